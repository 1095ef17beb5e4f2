package wsapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node/rail"
)

// asyncDoc is /asyncapi.json as served, with its message payloads
// compiled as JSON Schema (AsyncAPI's default schema format is a superset
// of draft 7).
type asyncDoc struct {
	t        *testing.T
	raw      []byte
	doc      map[string]any
	payloads map[string]*jsonschema.Schema
	seen     map[string]int
}

func (e *wsEnv) asyncAPI() *asyncDoc {
	e.t.Helper()
	res, err := http.Get(e.http.URL + "/asyncapi.json")
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || res.Header.Get("ETag") == "" {
		e.t.Fatalf("/asyncapi.json: %d %v %s", res.StatusCode, res.Header, raw)
	}
	// Cached like /openapi.json: the same bytes, and 304 on the ETag.
	r, _ := http.NewRequest("GET", e.http.URL+"/asyncapi.json", nil)
	r.Header.Set("If-None-Match", res.Header.Get("ETag"))
	again, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		e.t.Fatalf("If-None-Match: %d", again.StatusCode)
	}
	d := &asyncDoc{t: e.t, raw: raw, payloads: map[string]*jsonschema.Schema{}, seen: map[string]int{}}
	if err := json.Unmarshal(raw, &d.doc); err != nil {
		e.t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	const base = "mem:///asyncapi.json"
	if err := c.AddResource(base, inst); err != nil {
		e.t.Fatal(err)
	}
	for name := range d.messages() {
		s, err := c.Compile(base + "#/components/messages/" + name + "/payload")
		if err != nil {
			e.t.Fatalf("message %s: payload is not a valid schema: %v", name, err)
		}
		d.payloads[name] = s
	}
	return d
}

func (d *asyncDoc) messages() map[string]any {
	return d.doc["components"].(map[string]any)["messages"].(map[string]any)
}

// check validates one frame against the named message's payload.
func (d *asyncDoc) check(name string, frame []byte) {
	d.t.Helper()
	s := d.payloads[name]
	if s == nil {
		d.t.Errorf("frame %s: no message %q in the description", frame, name)
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(frame))
	if err != nil {
		d.t.Fatalf("frame not JSON: %s", frame)
	}
	if err := s.Validate(inst); err != nil {
		d.t.Errorf("frame does not match message %s: %v\nframe: %s", name, err, frame)
	}
	d.seen[name]++
}

// serverMessage names the message a frame the node sent should match.
func serverMessage(m map[string]any) string {
	switch op, _ := m["op"].(string); op {
	case "auth":
		return "authAck"
	case "event":
		kind, _ := m["kind"].(string)
		return EventKind{Kind: kind}.MessageName()
	default:
		return op
	}
}

// send writes a client frame after checking it against its message.
func (d *asyncDoc) send(c *websocket.Conn, v map[string]any) {
	d.t.Helper()
	b, _ := json.Marshal(v)
	d.check(v["op"].(string), b)
	if err := c.WriteMessage(websocket.TextMessage, b); err != nil {
		d.t.Fatal(err)
	}
}

// next reads frames, validating every one, until one for which want holds.
func (d *asyncDoc) next(c *websocket.Conn, what string, want func(m map[string]any) bool) map[string]any {
	d.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			d.t.Fatalf("waiting for %s: %v", what, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			d.t.Fatalf("frame not JSON: %s", b)
		}
		d.check(serverMessage(m), b)
		if want(m) {
			return m
		}
	}
}

// events reads until an event of each kind arrived, in any order.
func (d *asyncDoc) events(c *websocket.Conn, kinds ...string) {
	d.t.Helper()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	d.next(c, strings.Join(kinds, ", ")+" events", func(m map[string]any) bool {
		if m["op"] == "event" {
			delete(want, m["kind"].(string))
		}
		return len(want) == 0
	})
}

func op(name string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["op"] == name }
}

func kind(name string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["op"] == "event" && m["kind"] == name }
}

// TestFramesMatchAsyncAPI provokes every frame the node can send in a test
// and checks each against the message /asyncapi.json gives for it.
func TestFramesMatchAsyncAPI(t *testing.T) {
	e := newEnv(t)
	d := e.asyncAPI()
	res, err := e.node.ProposeInternal(fsm.CmdMarketsGenesis, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue(),
		Anchors: []fsm.FeedAnchor{{FeedID: "BTCUSD", MidQ8: 97_000 * market.Q8}, {FeedID: "ETHUSD", MidQ8: 3_400 * market.Q8}}})
	if err != nil || !res.OK() {
		t.Fatalf("markets genesis: %v %+v", err, res)
	}
	signup := e.post("/v1/signup", "", "{}")
	master := signup["apiKey"].(string)
	minted := e.post("/v1/sessions", master, `{"scopes":["read"]}`)

	c := e.dial()
	if err := c.WriteJSON(map[string]any{"op": "teleport"}); err != nil { // no message: an unknown op
		t.Fatal(err)
	}
	d.next(c, "unknown op", op("error"))
	d.send(c, map[string]any{"op": "subscribe", "channel": "account"})
	d.next(c, "account before auth", op("error"))
	d.send(c, map[string]any{"op": "subscribe", "channel": "prices", "feedId": "NOPE"})
	d.next(c, "unknown feed", op("error"))
	d.send(c, map[string]any{"op": "pong"})
	d.send(c, map[string]any{"op": "auth", "apiKey": master})
	d.next(c, "auth ack", op("auth"))
	d.send(c, map[string]any{"op": "subscribe", "channel": "account"})
	d.next(c, "account subscribed", op("subscribed"))
	d.send(c, map[string]any{"op": "subscribe", "channel": "prices", "feedId": "BTCUSD"})
	d.next(c, "prices subscribed", op("subscribed"))
	d.send(c, map[string]any{"op": "subscribe", "channel": "stats", "marketId": "BTC-PERP"})
	d.next(c, "stats subscribed", op("subscribed"))
	d.next(c, "ping", op("ping"))

	// A print: price and stats.
	now := time.Now().UnixMilli()
	if res, err := e.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD", MidQ8: 97_000 * market.Q8, ConfQ9: 300_000, TsMs: now}); err != nil || !res.OK() {
		t.Fatalf("print: %v %+v", err, res)
	}
	d.next(c, "price event", kind("price"))
	d.next(c, "stats event", kind("stats"))

	// The faucet: a deposit. A market order: order, fill, position.
	e.post("/v1/faucet", master, "{}")
	d.next(c, "deposit event", kind("deposit"))
	if r := e.post("/v1/orders", master, `{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"100","reduceOnly":false}`); r["status"] != "filled" {
		t.Fatalf("market order: %v", r)
	}
	d.events(c, "order", "fill", "position")
	// A stop protecting it: a trigger.
	if r := e.post("/v1/orders", master, `{"marketId":"BTC-PERP","side":"sell","type":"stop_market","contracts":"100","reduceOnly":true,"triggerPriceQ8":"9000000000000"}`); r["status"] != "working" {
		t.Fatalf("stop order: %v", r)
	}
	d.next(c, "trigger event", kind("trigger"))
	// A crash through the stop's level liquidates the 100x long first: a
	// liquidation (its stop is cancelled first), then the position.
	if res, err := e.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD", MidQ8: 80_000 * market.Q8, ConfQ9: 300_000, TsMs: time.Now().UnixMilli()}); err != nil || !res.OK() {
		t.Fatalf("crash print: %v %+v", err, res)
	}
	d.events(c, "trigger", "liquidation", "position")

	// A withdrawal to a Spark address nobody at the venue owns.
	dest := sparkAddr(t, "asyncapi")
	body := map[string]any{"toAddress": dest, "amountMsat": "5000000"}
	q := e.postJSON("/v1/withdrawals/quote", master, body)
	if tok, ok := q["confirmToken"]; ok && tok != nil {
		body["confirmToken"] = tok
	}
	if w := e.postJSON("/v1/withdrawals", master, body); w["railRef"] == nil {
		t.Fatalf("withdrawal: %v", w)
	}
	d.next(c, "withdrawal event", kind("withdrawal"))

	// Revoking a minted key: session_revoked on the master's connection,
	// and the minted key's own connection loses the account channel (an
	// error frame without badOp).
	c2 := e.dial()
	d.send(c2, map[string]any{"op": "auth", "apiKey": minted["apiKey"]})
	d.next(c2, "auth ack", op("auth"))
	d.send(c2, map[string]any{"op": "subscribe", "channel": "account"})
	d.next(c2, "subscribed", op("subscribed"))
	e.post("/v1/sessions/revoke", master, `{"keyId":"`+minted["keyId"].(string)+`"}`)
	d.next(c, "session_revoked event", kind(KindSessionRevoked))
	if m := d.next(c2, "revocation error", op("error")); m["code"] != "unauthorized" || m["badOp"] != nil {
		t.Fatalf("revocation: %v", m)
	}

	// No funding boundary falls inside a test: deliver one as the state
	// machine would emit it, through the hub's own path.
	e.hub.deliver(fsm.Event{Kind: "funding", Channel: channelStats, Selector: "BTC-PERP", TsMs: now,
		Data: fsm.FundingBoundaryView{MarketID: "BTC-PERP", BoundaryTsMs: 3_600_000, RateQ9: -12, SkewQ9: 5}})
	d.next(c, "funding event", kind("funding"))
	// Nor a funding flow: deliver one the same way, on the account channel.
	acct := signup["accountId"].(string)
	e.hub.deliver(fsm.Event{Kind: "funding_flow", Channel: channelAccount, Account: acct, Seq: 999, TsMs: now,
		Data: trade.FundingFlowView{Seq: 999, BoundaryTsMs: 3_600_000, MarketID: "BTC-PERP", RateQ9: 100, FlowMsat: -5, PaidMsat: -5, PositionID: "pos_1"}})
	d.next(c, "funding_flow event", kind("funding_flow"))
	// A USDx event, as fsm/usdx emits one for a mint.
	ref, usd, state := "uq_1", "100", "minted"
	e.hub.deliver(fsm.Event{Kind: "usdx", Channel: channelAccount, Account: acct, Seq: 1000, TsMs: now,
		Data: usdx.ActivityView{Seq: 1000, TsMs: wire.Int(now), Kind: "mint", Ref: &ref, Usdx: &usd, SatsMsat: wire.Ptr(1_000_000), State: &state}})
	d.next(c, "usdx event", kind("usdx"))
	// Referral and promoter earnings need a referee's fill: delivered the
	// same way (fsm/referral_test.go and promoter_test.go cover the emits).
	ref, code := "referee-1", "FRIENDS1"
	for _, k := range []string{"referral_earning", "promoter_earning"} {
		e.hub.deliver(fsm.Event{Kind: k, Channel: channelAccount, Account: acct, Seq: 1000, TsMs: now,
			Data: growth.EarningView{Seq: 1000, FillSeq: wire.Ptr(998), TsMs: wire.Int(now), Ref: &ref, GrossFeeMsat: 100,
				NetFeeMsat: 90, ShareQ9: 200_000_000, RewardMsat: 18, Status: growth.StatusAccrued, EpochDay: 0, Code: &code}})
		d.next(c, k+" event", kind(k))
	}

	d.send(c, map[string]any{"op": "unsubscribe", "channel": "stats", "marketId": "BTC-PERP"})
	d.next(c, "unsubscribed", op("unsubscribed"))

	// Every message of the description was seen.
	var missing []string
	for name := range d.messages() {
		if d.seen[name] == 0 {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("messages never exercised: %v", missing)
	}
}

// A frame that breaks its message is caught: the validator is not vacuous.
func TestAsyncAPIRejectsWrongFrames(t *testing.T) {
	e := newEnv(t)
	d := e.asyncAPI()
	for name, frame := range map[string]string{
		"ping":          `{"op":"ping","tsMs":1700000000000}`,                                                                                                                        // number, not decimal string
		"priceEvent":    `{"op":"event","channel":"stats","kind":"price","tsMs":"1","feedId":"BTCUSD","data":{}}`,                                                                    // wrong channel, empty data
		"depositEvent":  `{"op":"event","channel":"account","kind":"deposit","tsMs":"1","data":{"accountId":"a","amountMsat":"1","feeMsat":"0","railRef":"r","seq":"1","tsMs":"1"}}`, // no seq
		"authAck":       `{"op":"auth","ok":true,"v":2,"accountId":"a"}`,                                                                                                             // another version
		"subscribe":     `{"op":"subscribe","channel":"prices"}`,                                                                                                                     // no feedId
		"unsubscribe":   `{"op":"unsubscribe","channel":"stats","marketId":""}`,                                                                                                      // empty marketId
		"auth":          `{"op":"auth","apiKey":""}`,                                                                                                                                 // empty apiKey
		"positionEvent": `{"op":"event","channel":"account","kind":"position","tsMs":"1","seq":"3","data":{"marketId":"BTC-PERP","position":{"side":"long","contracts":"1","entryPriceQ8":"1","marginMsat":"1","extra":1}}}`,
	} {
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(frame))
		if err := d.payloads[name].Validate(inst); err == nil {
			t.Errorf("%s accepted a wrong frame: %s", name, frame)
		}
	}
}

func (e *wsEnv) postJSON(path, key string, body map[string]any) map[string]any {
	b, _ := json.Marshal(body)
	return e.post(path, key, string(b))
}

func sparkAddr(t *testing.T, label string) string {
	key, err := rail.NodeKeyFromSecret("payee " + label)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: key})
	if err != nil {
		t.Fatal(err)
	}
	seed := sha256.Sum256([]byte(label))
	return r.AccountAddress(seed[:])
}

// TestAsyncAPIStructure checks the document is a well-formed AsyncAPI 3.0
// description: every $ref resolves, channel parameters match addresses,
// operations use their channel's messages, and every message is on a
// channel and in an operation. (Checked once by hand against the official
// AsyncAPI 3.0.0 JSON Schema too; it is not vendored here.)
func TestAsyncAPIStructure(t *testing.T) {
	e := newEnv(t)
	d := e.asyncAPI()
	doc := d.doc
	info, _ := doc["info"].(map[string]any)
	if doc["asyncapi"] != "3.0.0" || info["title"] == "" || info["version"] == nil || doc["defaultContentType"] != "application/json" {
		t.Fatalf("header: %v %v", doc["asyncapi"], info)
	}
	// Every $ref in the document resolves.
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && resolve(doc, ref) == nil {
				t.Errorf("dangling $ref %s", ref)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)

	channels := doc["channels"].(map[string]any)
	onChannel := map[string]bool{}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	for name, ch := range channels {
		c := ch.(map[string]any)
		addr, _ := c["address"].(string)
		params, _ := c["parameters"].(map[string]any)
		inAddr := param.FindAllStringSubmatch(addr, -1)
		if len(inAddr) != len(params) {
			t.Errorf("channel %s: address %q against parameters %v", name, addr, params)
		}
		for _, m := range inAddr {
			if params[m[1]] == nil {
				t.Errorf("channel %s: parameter %s undefined", name, m[1])
			}
		}
		for key, m := range c["messages"].(map[string]any) {
			ref := m.(map[string]any)["$ref"].(string)
			if ref != "#/components/messages/"+key {
				t.Errorf("channel %s: message %s refers to %s", name, key, ref)
			}
			onChannel[key] = true
		}
	}
	inOperation := map[string]bool{}
	checkRefs := func(opName, channelRef string, msgs []any) {
		ch := strings.TrimPrefix(channelRef, "#/channels/")
		for _, m := range msgs {
			ref := m.(map[string]any)["$ref"].(string)
			if !strings.HasPrefix(ref, "#/channels/"+ch+"/messages/") {
				t.Errorf("operation %s: message %s is not on its channel %s", opName, ref, ch)
			}
			inOperation[ref[strings.LastIndex(ref, "/")+1:]] = true
		}
	}
	for name, o := range doc["operations"].(map[string]any) {
		op := o.(map[string]any)
		if a := op["action"]; a != "send" && a != "receive" {
			t.Errorf("operation %s: action %v", name, a)
		}
		if !strings.HasPrefix(name, op["action"].(string)) {
			t.Errorf("operation %s: name does not say its action %v", name, op["action"])
		}
		checkRefs(name, op["channel"].(map[string]any)["$ref"].(string), op["messages"].([]any))
		if r, ok := op["reply"].(map[string]any); ok {
			checkRefs(name+" reply", r["channel"].(map[string]any)["$ref"].(string), r["messages"].([]any))
		}
	}
	for name, m := range d.messages() {
		msg := m.(map[string]any)
		p, _ := msg["payload"].(map[string]any)
		if p["type"] != "object" || msg["name"] != name {
			t.Errorf("message %s: %v", name, msg)
		}
		if !onChannel[name] || !inOperation[name] {
			t.Errorf("message %s: on a channel %v, in an operation %v", name, onChannel[name], inOperation[name])
		}
	}
	// The close code and its reasons, and the ping cadence.
	cc := doc["x-svc-close-codes"].([]any)[0].(map[string]any)
	if cc["code"] != float64(CloseResync) || len(cc["reasons"].([]any)) != 3 || doc["x-svc-ping-every-ms"] != float64(PingEvery.Milliseconds()) {
		t.Errorf("close codes %v, ping %v", cc, doc["x-svc-ping-every-ms"])
	}
}

func resolve(doc map[string]any, ref string) any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var cur any = doc
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return cur
}

// TestEventKindsCoverTheStateMachine fails when fsm/ gains an event kind
// the description (EventKinds) does not list.
func TestEventKindsCoverTheStateMachine(t *testing.T) {
	known := map[string]bool{}
	for _, k := range EventKinds {
		known[k.Kind] = true
	}
	emits := regexp.MustCompile(`(?:Kind: "([a-z_]+)"|\.Emit\("([a-z_]+)")`)
	found := map[string]bool{fsm.EventSessionRevoked: true}
	err := filepath.WalkDir("../fsm", func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		for _, m := range emits.FindAllStringSubmatch(string(b), -1) {
			found[m[1]+m[2]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < len(EventKinds) {
		t.Fatalf("the scan found only %v", found)
	}
	for k := range found {
		if !known[k] {
			t.Errorf("fsm emits kind %q, missing from EventKinds (and /asyncapi.json)", k)
		}
	}
}
