package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/tokenrail"
)

// The hostile-input harness (SPEC sections 4 and 7, our guide's rule):
// every route the router serves, every method, is sent malformed and
// hostile requests, and each answer must be a clear refusal or a declared
// success. A refusal is a status the route's description declares, never
// 500, with an {error, code} body whose code is one the route may give;
// and it changes nothing: the replicated state hash is the same after it
// as before. A GET changes nothing whatever it answers.
//
// The routes come from the router (Engine.Routes), joined to the route
// table for their auth, idempotency, body and query types, so a new route
// is probed without anyone listing it here. Values are derived from the
// request and query structs' tags (json, req, enum, min, max, maxLen).
//
// TestEveryRouteRefusesHostileInput runs the whole generated table (a few
// seconds). FuzzEveryRoute mutates one request at a time from a seed corpus
// of the same table; the normal suite runs only its seeds. A longer run:
//
//	make fuzz-api FUZZTIME=5m
//
// Log time is frozen (fuzzClock), so the leader's ticks change nothing and
// any change of the hash is a request's.
//
// PERPD_FUZZ_TRACE=1 logs every request and answer; PERPD_FUZZ_ACCEPTED=1
// lists the hostile requests that were answered with a success (values
// the rules allow, like "01" for a decimal string), for review.

// fuzzClock is a clock that never moves: every entry carries the same
// stamp, so ticks leave the state as it was.
type fuzzClock struct{ ms int64 }

func (c fuzzClock) WallMs() int64       { return c.ms }
func (c fuzzClock) Mono() time.Duration { return 0 }

// fuzzTarget is a one-node API with a funded account, keys of narrower
// scopes, fresh prices and a resting order, and the state hash after the
// last request.
type fuzzTarget struct {
	a                *testAPI
	master, readOnly string
	restingID        string
	// other is a second account: its ids must be foreign to master.
	other                              string
	otherOrder, otherKeyID, otherQuote string
	otherAddr                          string
	hash                               string
	hashIndex                          uint64 // the applied index hash was taken at
	byKey                              map[routeKey]*Route
	routes                             []routeKey // the router's, sorted
	accepted                           []string   // hostile requests answered with a success
	// fuzzing: requests come from the fuzzer, not the table: a request
	// the client cannot send is skipped, and exchanges are not kept.
	fuzzing bool
}

func newFuzzTarget(t testing.TB) *fuzzTarget {
	t.Helper()
	noon := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	a := newTestAPIWith(t, []Option{WithBudgetScale(10_000), WithTokenRail(tokenrail.NewSim())}, func(c *node.Config) {
		c.Clock = fuzzClock{noon.UnixMilli()}
		c.SignupsPerHour = 1_000_000
		c.FaucetGrantsPerHour = 1_000_000
	})
	a.listMarkets()
	a.print("BTCUSD", btcStartQ8, noon.UnixMilli())
	a.print("ETHUSD", ethStartQ8, noon.UnixMilli())
	ft := &fuzzTarget{a: a, byKey: map[routeKey]*Route{}}
	ft.master, _ = a.tradingAccount()
	ft.readOnly, _ = a.mint(ft.master, "read")
	ft.restingID = "fuzz-resting-1"
	if r := a.do(req{method: "POST", path: "/v1/orders", key: ft.master, idem: ft.restingID,
		body: orderBody("BTC-PERP", "buy", "limit", "10", map[string]any{"limitPriceQ8": strconv.FormatInt(btcStartQ8/2, 10)})}); r.status != 201 {
		t.Fatalf("resting order: %d %s", r.status, r.body)
	}
	ft.other, _ = a.tradingAccount()
	ft.otherOrder = "fuzz-other-1"
	if r := a.do(req{method: "POST", path: "/v1/orders", key: ft.other, idem: ft.otherOrder,
		body: orderBody("BTC-PERP", "buy", "limit", "10", map[string]any{"limitPriceQ8": strconv.FormatInt(btcStartQ8/2, 10)})}); r.status != 201 {
		t.Fatalf("other's resting order: %d %s", r.status, r.body)
	}
	_, ft.otherKeyID = a.mint(ft.other, "read")
	ft.otherAddr = a.do(req{method: "GET", path: "/v1/account", key: ft.other}).json(t)["railAddress"].(string)
	ft.otherQuote = ft.quote(ft.other, "1")
	if r := a.do(req{method: "POST", path: "/v1/referral/code", key: ft.other, idem: nextIdem(), body: map[string]any{"code": "FUZZOTHER"}}); r.status != 201 {
		t.Fatalf("other's referral code: %d %s", r.status, r.body)
	}
	// USDx and sUSDx on the master account, so that redemptions, stakes,
	// unstakes and USDx withdrawals reach the state machine's checks.
	q := ft.quote(ft.master, "300")
	if r := a.do(req{method: "POST", path: "/v1/usdx/mints", key: ft.master, idem: q, body: map[string]any{"quoteId": q}}); r.status != 201 {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/usdx/stake", key: ft.master, body: map[string]any{"usdx": "5"}}); r.status >= 300 {
		t.Fatalf("stake: %d %s", r.status, r.body)
	}
	for _, r := range a.srv.Routes {
		ft.byKey[routeKey{r.Method, r.Path}] = r
	}
	for _, ri := range a.srv.Engine.Routes() {
		k := routeKey{ri.Method, ri.Path}
		if get := ft.byKey[routeKey{http.MethodGet, ri.Path}]; ri.Method == http.MethodHead && get != nil && answersHead(get) {
			// The GET's row, probed with HEAD beside its GET (probesFor).
			continue
		}
		if ft.byKey[k] == nil {
			t.Errorf("%s %s is served but has no row in the route table", ri.Method, ri.Path)
			continue
		}
		ft.routes = append(ft.routes, k)
	}
	sort.Slice(ft.routes, func(i, j int) bool {
		if ft.routes[i].path != ft.routes[j].path {
			return ft.routes[i].path < ft.routes[j].path
		}
		return ft.routes[i].method < ft.routes[j].method
	})
	ft.hash = ft.stateHash()
	return ft
}

// quote asks for a USDx mint quote and returns its id.
func (ft *fuzzTarget) quote(key, usdx string) string {
	r := ft.a.do(req{method: "POST", path: "/v1/usdx/quotes", key: key, body: map[string]any{"side": "mint", "usdx": usdx}})
	if r.status != 201 {
		ft.a.t.Fatalf("quote: %d %s", r.status, r.body)
	}
	return r.json(ft.a.t)["quoteId"].(string)
}

// stateHash is the state hash now. The state changes only by applying
// an entry, so while the applied index stays where it was at the last
// hash, that hash still holds (most requests apply nothing: a hash per
// request was half the harness's time).
func (ft *fuzzTarget) stateHash() string {
	if ft.hash != "" && ft.a.node.Machine().Applied() == ft.hashIndex {
		return ft.hash
	}
	idx, h, err := ft.a.node.StateHash(context.Background())
	if err != nil {
		ft.a.t.Fatal(err)
	}
	ft.hashIndex = idx
	return h
}

// fuzzAnswerWithin bounds the wait for an answer: past the longest wait
// a request may ask for (node.MaxReadWait), a hang is a failure.
const fuzzAnswerWithin = node.MaxReadWait + 10*time.Second

// probe is one hostile request.
type probe struct {
	name   string
	route  routeKey // the route it aims at (its method may differ)
	method string
	path   string // escaped, as sent
	query  string // raw, as sent
	body   []byte // nil: none
	// header lines, added in order (a name may repeat); key and idem
	// are added first unless noKey / noIdem.
	header         [][2]string
	noKey, noIdem  bool
	key            string // "" = the master key
	idem           string // "" = a fresh one
	chunked        bool   // send the body without a length
	mustRefuse     bool   // the input is malformed: a success is a defect
	wantStatus     int    // when non-zero, the only acceptable status
	skipStatusRule bool   // the method is not the route's (405 or another route)
	likeGet        bool   // a HEAD that must get the status the same GET gets
}

// send issues p and records the exchange for the description check.
func (ft *fuzzTarget) send(p probe) resp {
	a := ft.a
	a.t.Helper()
	u := a.http.URL + p.path
	if p.query != "" {
		u += "?" + p.query
	}
	var body io.Reader
	if p.body != nil {
		body = bytes.NewReader(p.body)
		if p.chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
	}
	hr, err := http.NewRequestWithContext(context.Background(), p.method, u, body)
	if err != nil {
		if ft.fuzzing {
			return resp{}
		}
		a.t.Fatalf("%s: %v", p.name, err)
	}
	r := ft.byKey[p.route]
	if r != nil && r.Auth == Keyed && !p.noKey {
		k := p.key
		if k == "" {
			k = ft.master
		}
		hr.Header.Add(KeyHeader, k)
	}
	if r != nil && (r.Idem || r.IdemOptional) && !p.noIdem {
		idem := p.idem
		if idem == "" {
			idem = nextIdem()
		}
		hr.Header.Add(IdemHeader, idem)
	}
	for _, h := range p.header {
		hr.Header.Add(h[0], h[1])
	}
	client := *a.http.Client()
	client.Timeout = fuzzAnswerWithin
	res, err := client.Do(hr)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return resp{status: -1}
		}
		// Go's client will not send some malformed requests (a control
		// character in a header): no server sees them either.
		if ft.fuzzing || strings.Contains(err.Error(), "invalid header field") {
			return resp{}
		}
		a.t.Fatalf("%s: %v", p.name, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, body: b}
	if ft.fuzzing {
		return out
	}
	a.seen = append(a.seen, exchange{method: p.method, path: hr.URL.Path, query: p.query, status: out.status, header: out.header, body: b})
	return out
}

// check sends p and holds its answer to the rule; it returns a failure
// description, or "".
func (ft *fuzzTarget) check(p probe) string {
	if bytes.Contains(p.body, []byte("$QUOTE")) {
		// A mint's idempotency-key is its quote id: a fresh quote each.
		q := ft.quote(ft.master, "1")
		if p.idem == "" {
			p.idem = q
		}
		p.body = bytes.ReplaceAll(p.body, []byte("$QUOTE"), []byte(q))
		ft.hash = ft.stateHash()
	}
	p.body = bytes.ReplaceAll(p.body, []byte("$ADDR"), []byte(ft.otherAddr))
	before := ft.hash
	got := ft.send(p)
	if got.status == 0 {
		return ""
	}
	if got.status < 0 {
		return fmt.Sprintf("%s %s?%s [%s]: no answer within %v", p.method, truncate(p.path, 80), truncate(p.query, 80), p.name, fuzzAnswerWithin)
	}
	if os.Getenv("PERPD_FUZZ_TRACE") != "" {
		ft.a.t.Logf("trace: %s %s?%s [%s] -> %d %s", p.method, truncate(p.path, 60), truncate(p.query, 60), p.name, got.status, truncate(string(got.body), 160))
	}
	after := ft.stateHash()
	ft.hash = after
	what := fmt.Sprintf("%s %s?%s [%s]", p.method, truncate(p.path, 80), truncate(p.query, 80), p.name)
	bodyText := truncate(string(got.body), 300)
	if got.status >= 500 && got.status != http.StatusServiceUnavailable {
		return fmt.Sprintf("%s: %d %s", what, got.status, bodyText)
	}
	if p.wantStatus != 0 && got.status != p.wantStatus {
		return fmt.Sprintf("%s: want %d, got %d %s", what, p.wantStatus, got.status, bodyText)
	}
	r := ft.byKey[p.route]
	if p.method == http.MethodHead {
		// No body on a HEAD answer (RFC 9110 9.3.2): status and state only.
		if after != before {
			return fmt.Sprintf("%s: a HEAD answered %d and changed the state", what, got.status)
		}
		if p.likeGet {
			g := p
			g.method, g.likeGet = http.MethodGet, false
			if gr := ft.send(g); gr.status != got.status || gr.header.Get("Content-Type") != got.header.Get("Content-Type") {
				return fmt.Sprintf("%s: HEAD answered %d %s, GET %d %s", what, got.status, got.header.Get("Content-Type"), gr.status, gr.header.Get("Content-Type"))
			}
		}
		return ""
	}
	if got.status >= 400 && !declaresOwnBody(r, got.status) {
		var e map[string]any
		if err := json.Unmarshal(got.body, &e); err != nil {
			return fmt.Sprintf("%s: %d refusal body is not JSON: %s", what, got.status, bodyText)
		}
		msg, _ := e["error"].(string)
		code, _ := e["code"].(string)
		if msg == "" || !slices.Contains(wire.AllCodes, code) {
			return fmt.Sprintf("%s: %d refusal body is not {error, code} with a SPEC code: %s", what, got.status, bodyText)
		}
		if r != nil && !p.skipStatusRule {
			allowed := refusalCodes(r)
			if _, declared := r.Responses[got.status]; !declared && allowed[got.status] == nil {
				return fmt.Sprintf("%s: status %d is not declared for the route: %s", what, got.status, bodyText)
			}
			if codes := allowed[got.status]; codes != nil && !slices.Contains(codes, code) {
				return fmt.Sprintf("%s: code %s is not one %d may carry on this route (%v): %s", what, code, got.status, codes, bodyText)
			}
		}
		if after != before {
			return fmt.Sprintf("%s: refused %d %s but the state changed", what, got.status, bodyText)
		}
		return ""
	}
	if got.status >= 400 {
		// A body of the route's own (the health object of /healthz):
		// the description check at cleanup holds it to its schema.
		if after != before {
			return fmt.Sprintf("%s: refused %d %s but the state changed", what, got.status, bodyText)
		}
		return ""
	}
	if p.method == http.MethodGet && after != before {
		return fmt.Sprintf("%s: a GET answered %d and changed the state", what, got.status)
	}
	if p.mustRefuse {
		return fmt.Sprintf("%s: malformed input accepted: %d %s", what, got.status, bodyText)
	}
	if p.name != "base" {
		ft.accepted = append(ft.accepted, fmt.Sprintf("%s: %d %s", what, got.status, truncate(string(got.body), 120)))
	}
	return ""
}

// declaresOwnBody reports whether the route declares a body for status
// that is not a refusal body (no error field): /healthz's 503.
func declaresOwnBody(r *Route, status int) bool {
	if r == nil {
		return false
	}
	body, ok := r.Responses[status]
	if !ok || body == nil {
		return false
	}
	for _, fi := range fieldsOf(reflect.TypeOf(body)) {
		if fi.name == "error" {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

// ---- values ----

// fuzzBases are request bodies that the route accepts (or refuses only
// for the account's state), so that a one-field mutation reaches the
// checks behind decoding. A route not listed gets one built from its
// request type's tags (baseValue).
var fuzzBases = map[string]string{
	"POST /v1/orders":            `{"marketId":"BTC-PERP","side":"buy","type":"limit","contracts":"1","reduceOnly":false,"limitPriceQ8":"4850000000000"}`,
	"POST /v1/cancel-all-after":  `{"timeoutMs":"0"}`,
	"POST /v1/sessions":          `{"label":"fuzz","scopes":["read"]}`,
	"POST /v1/sessions/revoke":   `{"keyId":"no-such-key"}`,
	"POST /v1/withdrawals":       `{"amountMsat":"1000","toAddress":"$ADDR"}`,
	"POST /v1/withdrawals/quote": `{"amountMsat":"1000","toAddress":"$ADDR"}`,
	"POST /v1/deposit-invoices":  `{"amountMsat":"1000","expirySeconds":60,"memo":"fuzz"}`,
	"POST /v1/referral/bind":     `{"code":"FUZZOTHER"}`,
	"POST /v1/usdx/quotes":       `{"side":"mint","usdx":"1"}`,
	"POST /v1/usdx/redemptions":  `{"usdx":"1"}`,
	"POST /v1/usdx/stake":        `{"usdx":"1"}`,
	"POST /v1/usdx/unstake":      `{"susdx":"1"}`,
	"POST /v1/usdx/mints":        `{"quoteId":"$QUOTE"}`,
	"POST /v1/usdx/withdrawals":  `{"usdx":"1","sparkAddress":"$ADDR"}`,
	"POST /v1/promoter/codes":    `{"code":"FUZZ1","label":"fuzz","kickbackQ9":"0"}`,
	"POST /v1/promoter/apply": `{"displayName":"fuzz","channels":[{"kind":"x","url":"https://x.com/fuzz","audience":"few"}],` +
		`"plan":"post","jurisdictions":["DE"],"acceptedTermsVersion":"2026-11"}`,
}

var wireIntType = reflect.TypeOf(wire.Int(0))

type fieldInfo struct {
	name string
	typ  reflect.Type // pointers removed
	tag  reflect.StructTag
}

func fieldsOf(t reflect.Type) []fieldInfo {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out = append(out, fieldInfo{name: name, typ: ft, tag: f.Tag})
	}
	return out
}

// baseValue is a plausible value of a field: the first enum value, the
// lower bound, a short string.
func baseValue(fi fieldInfo) any {
	switch {
	case fi.typ == wireIntType:
		if m := fi.tag.Get("min"); m != "" {
			return m
		}
		return "1"
	case fi.tag.Get("enum") != "" && fi.typ.Kind() == reflect.String:
		e, _, _ := strings.Cut(fi.tag.Get("enum"), ",")
		return e
	}
	switch fi.typ.Kind() {
	case reflect.String:
		return "fuzz"
	case reflect.Bool:
		return false
	case reflect.Int, reflect.Int64, reflect.Int32:
		if m := fi.tag.Get("min"); m != "" {
			n, _ := strconv.ParseInt(m, 10, 64)
			return n
		}
		return 1
	case reflect.Slice:
		el := fieldInfo{name: fi.name, typ: fi.typ.Elem(), tag: fi.tag}
		for el.typ.Kind() == reflect.Pointer {
			el.typ = el.typ.Elem()
		}
		return []any{baseValue(el)}
	case reflect.Struct:
		return baseObject(fi.typ, false)
	}
	return nil
}

// baseObject holds a struct's required fields (all fields when all).
func baseObject(t reflect.Type, all bool) map[string]any {
	m := map[string]any{}
	for _, fi := range fieldsOf(t) {
		if all || fi.tag.Get("req") == "true" {
			m[fi.name] = baseValue(fi)
		}
	}
	return m
}

// hostileValues are values a field of this kind must refuse (bad) or may
// take or refuse, but never with a 500 or a half-applied state (edge).
func hostileValues(fi fieldInfo) (bad []string, edge []string) {
	deep := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	common := []string{`{}`, `[]`, `[[[[[[[[]]]]]]]]`, deep, `{"a":{"b":{"c":[1]}}}`}
	enum := fi.tag.Get("enum")
	switch {
	case fi.typ == wireIntType:
		bad = append(common, `1`, `0`, `-1`, `1.5`, `1e3`, `true`, `"1.5"`, `"1e3"`, `" 1"`, `"1 "`, `"+1"`, `"0x10"`,
			`"١"`, `"1\u0000"`, `""`, `"-"`, `"--1"`, `"9223372036854775808"`, `"-9223372036854775809"`,
			`"99999999999999999999999999999"`, `9007199254740993`, `"１"`)
		edge = []string{`"0"`, `"-1"`, `"9223372036854775807"`, `"-9223372036854775808"`, `"01"`, `"-0"`, `"00000000000000000000001"`}
		if m := fi.tag.Get("min"); m != "" {
			n, _ := strconv.ParseInt(m, 10, 64)
			if n > -1<<63 {
				bad = append(bad, strconv.Quote(strconv.FormatInt(n-1, 10)))
			}
		}
		if m := fi.tag.Get("max"); m != "" {
			n, _ := strconv.ParseInt(m, 10, 64)
			if n < 1<<63-1 {
				bad = append(bad, strconv.Quote(strconv.FormatInt(n+1, 10)))
			}
			edge = append(edge, strconv.Quote(m))
		}
	case fi.typ.Kind() == reflect.Int64 || fi.typ.Kind() == reflect.Int:
		bad = append(common, `"1"`, `"abc"`, `1.5`, `1e3`, `1.0`, `true`, `9223372036854775808`, `-9223372036854775809`,
			`1e400`, `-0.0`, `0x10`, `01`)
		edge = []string{`0`, `-1`, `9223372036854775807`, `-9223372036854775808`}
		if m := fi.tag.Get("min"); m != "" {
			n, _ := strconv.ParseInt(m, 10, 64)
			bad = append(bad, strconv.FormatInt(n-1, 10))
		}
		if m := fi.tag.Get("max"); m != "" {
			n, _ := strconv.ParseInt(m, 10, 64)
			if n < 1<<63-1 {
				bad = append(bad, strconv.FormatInt(n+1, 10))
			}
			edge = append(edge, m)
		}
	case fi.typ.Kind() == reflect.String:
		bad = append(common, `1`, `-1`, `1.5`, `true`)
		edge = []string{`"0"`, `"-1"`, `"-0"`, `"1.5"`, `"1e3"`, `"+1"`, `" 1"`, `"0x10"`, `"١"`, `"9223372036854775807"`,
			`"9223372036854775808"`, `"99999999999999999999999999999999999999"`, `""`, `"\u0000"`, `"a\u0000b"`, `"\ud800"`, `"é🙂"`, `"../../etc"`, `"a/b%2F.."`, `"\u202e"`,
			`"` + strings.Repeat("A", 5000) + `"`, `"<script>"`, `"pdk_` + strings.Repeat("a", 48) + `"`}
		if enum != "" {
			first, _, _ := strings.Cut(enum, ",")
			bad = append(bad, `""`, strconv.Quote(strings.ToUpper(first)), strconv.Quote(" "+first), `"nope"`)
		}
		if m := fi.tag.Get("maxLen"); m != "" {
			n, _ := strconv.Atoi(m)
			bad = append(bad, strconv.Quote(strings.Repeat("a", n+1)))
		}
	case fi.typ.Kind() == reflect.Bool:
		bad = append(common, `"true"`, `1`, `0`, `"false"`, `"yes"`)
		edge = []string{`true`, `false`}
	case fi.typ.Kind() == reflect.Slice:
		bad = append([]string{`"x"`, `1`, `true`, `{}`, `[1]`, `[[]]`, `[null]`, `[{}]`}, deep)
		edge = []string{`[]`}
		if m := fi.tag.Get("maxLen"); m != "" {
			n, _ := strconv.Atoi(m)
			el, _ := json.Marshal(baseValue(fieldInfo{typ: fi.typ.Elem(), tag: fi.tag}))
			bad = append(bad, "["+strings.TrimSuffix(strings.Repeat(string(el)+",", n+1), ",")+"]")
			edge = append(edge, "["+string(el)+","+string(el)+"]")
		}
	case fi.typ.Kind() == reflect.Struct:
		bad = append([]string{`"x"`, `1`, `true`, `[]`, `[{}]`}, deep)
		inner := baseObject(fi.typ, false)
		inner["unknownField"] = 1
		b, _ := json.Marshal(inner)
		bad = append(bad, string(b))
		for _, sub := range fieldsOf(fi.typ) {
			sb, _ := hostileValues(sub)
			for _, v := range sb[:min(len(sb), 8)] {
				o := baseObject(fi.typ, false)
				raw, _ := json.Marshal(o)
				bad = append(bad, setRaw(raw, sub.name, v))
			}
		}
	}
	return bad, edge
}

// setRaw returns the JSON object obj with field name set to the raw
// JSON text v (added when absent).
func setRaw(obj []byte, name, v string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	keys := make([]string, 0, len(m)+1)
	for k := range m {
		if k != name {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for _, k := range keys {
		b.WriteString(strconv.Quote(k) + ":" + string(m[k]) + ",")
	}
	b.WriteString(strconv.Quote(name) + ":" + v + "}")
	return b.String()
}

// ---- probes ----

// pathFor fills a route's parameters: real ones where the fixture has
// them, else value.
func (ft *fuzzTarget) pathFor(path string, value func(param string) string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segs[i] = value(s[1:])
		}
	}
	return strings.Join(segs, "/")
}

func (ft *fuzzTarget) realParam(route routeKey) func(string) string {
	return func(param string) string {
		switch {
		case param == "id" && strings.HasPrefix(route.path, "/v1/markets"):
			return "BTC-PERP"
		case param == "id":
			return ft.restingID
		}
		return "nobody"
	}
}

// probesFor lists the hostile requests for one route.
func (ft *fuzzTarget) probesFor(k routeKey) []probe {
	r := ft.byKey[k]
	path := ft.pathFor(k.path, ft.realParam(k))
	mk := func(name string) probe { return probe{name: name, route: k, method: k.method, path: path} }
	var out []probe
	base := []byte(nil)
	if r.Request != nil {
		if s, ok := fuzzBases[k.method+" "+k.path]; ok {
			base = []byte(s)
		} else {
			base, _ = json.Marshal(baseObject(reflect.TypeOf(r.Request), false))
		}
	}
	withBody := func(p probe, b []byte) probe { p.body = b; return p }
	// The base request itself, then hostile headers on it.
	if k.method != http.MethodDelete {
		out = append(out, withBody(mk("base"), base))
	}
	add := func(name string, must bool, f func(p *probe)) {
		p := withBody(mk(name), base)
		p.mustRefuse = must
		f(&p)
		out = append(out, p)
	}
	hdr := func(name, v string) func(p *probe) {
		return func(p *probe) { p.header = append(p.header, [2]string{name, v}) }
	}
	if r.Auth == Keyed {
		add("no key", true, func(p *probe) { p.noKey = true; p.wantStatus = 401 })
		add("bad key", true, func(p *probe) { p.key = "pdk_not_a_key"; p.wantStatus = 401 })
		add("empty key", true, func(p *probe) { p.noKey = true; p.header = [][2]string{{KeyHeader, ""}}; p.wantStatus = 401 })
		add("key twice, one bad", true, hdr(KeyHeader, "pdk_not_a_key"))
		add("key twice, same", false, hdr(KeyHeader, ft.master))
		// Spaces around a header value are not part of it (RFC 9110 5.5).
		add("key with spaces", false, func(p *probe) { p.key = " " + ft.master + " " })
		add("huge key", true, func(p *probe) { p.key = strings.Repeat("k", 20_000) })
		add("key with control", true, func(p *probe) { p.key = ft.master + "\x7f" })
		if r.Scope != "" && r.Scope != "read" {
			add("read-only key", true, func(p *probe) { p.key = ft.readOnly; p.wantStatus = 403 })
		}
	}
	if r.Idem {
		add("no idempotency-key", true, func(p *probe) { p.noIdem = true; p.wantStatus = 400 })
	}
	if r.Idem || r.IdemOptional {
		add("empty idempotency-key", r.Idem, func(p *probe) { p.noIdem = true; p.header = [][2]string{{IdemHeader, ""}} })
		add("idempotency-key twice", true, hdr(IdemHeader, "second"))
		add("long idempotency-key", true, func(p *probe) { p.noIdem = true; p.header = [][2]string{{IdemHeader, strings.Repeat("i", 256)}} })
		add("idempotency-key with space", true, func(p *probe) { p.noIdem = true; p.header = [][2]string{{IdemHeader, "a b"}} })
		add("idempotency-key unicode", true, func(p *probe) { p.noIdem = true; p.header = [][2]string{{IdemHeader, "ключ"}} })
		add("idempotency-key is the api key", true, func(p *probe) { p.noIdem = true; p.header = [][2]string{{IdemHeader, ft.master}} })
	}
	if r.Idem || r.IdemOptional {
		// A key that already named another request of this account (the
		// fixture's resting order): 409 idempotency_key_reused, except
		// where a route keeps keys of its own (a cancel, a redemption).
		// A public write (signup) scopes keys by route, not account.
		own := r.IdemOwnNamespace || r.Auth != Keyed
		add("idempotency-key of another request", !own, func(p *probe) { p.idem = ft.restingID })
		// A key in the redemptions' namespace would be stored under a
		// redemption's key: refused wherever it could be.
		add("idempotency-key in a reserved namespace", !own, func(p *probe) {
			p.idem = usdxRedeemIdemNS + nextIdem()
			if !own {
				p.wantStatus = 400
			}
		})
	}
	for _, v := range []string{"abc", "-1", "1.5", "18446744073709551616", "0x10", "1 1", "+1"} {
		add("X-Min-Index "+v, true, hdr("X-Min-Index", v))
	}
	add("X-Min-Index far ahead", true, hdr("X-Min-Index", "18446744073709551615"))
	add("X-Min-Index twice", true, func(p *probe) {
		p.header = [][2]string{{"X-Min-Index", "1"}, {"X-Min-Index", "abc"}}
		p.wantStatus = 400
	})
	add("X-Min-Index twice, agreeing", true, func(p *probe) {
		p.header = [][2]string{{"X-Min-Index", "1"}, {"X-Min-Index", "1"}}
		p.wantStatus = 400
	})
	add("X-Consistency twice", true, func(p *probe) {
		p.header = [][2]string{{"X-Consistency", "default"}, {"X-Consistency", "linearizable"}}
		p.wantStatus = 400
	})
	add("X-Consistency bogus", true, hdr("X-Consistency", "strong"))
	for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/json; charset=utf-16"} {
		add("content-type "+ct, false, hdr("Content-Type", ct))
	}
	add("x-forwarded-for garbage", false, hdr("X-Forwarded-For", "not-an-ip, 999.1.1.1"))
	add("api key in query", true, func(p *probe) { p.query = "apiKey=" + url.QueryEscape(ft.master) })

	if k.method == http.MethodGet && answersHead(r) {
		// HEAD is the GET without its body: the status the GET gets
		// (check sends both), the key's 401 without one.
		add("HEAD", false, func(p *probe) { p.method, p.likeGet = http.MethodHead, true })
		if r.Auth == Keyed {
			add("HEAD, no key", true, func(p *probe) { p.method, p.noKey, p.wantStatus = http.MethodHead, true, 401 })
		}
	}

	// Another account's ids: as unknown as made-up ones.
	switch k.method + " " + k.path {
	case "GET /v1/orders/:id", "DELETE /v1/orders/:id":
		p := mk("other account's order")
		p.path = "/v1/orders/" + ft.otherOrder
		p.mustRefuse, p.wantStatus = true, 404
		out = append(out, p)
	case "POST /v1/sessions/revoke":
		p := withBody(mk("other account's key"), []byte(`{"keyId":"`+ft.otherKeyID+`"}`))
		p.mustRefuse, p.wantStatus = true, 404
		out = append(out, p)
	case "POST /v1/usdx/mints":
		p := withBody(mk("other account's quote"), []byte(`{"quoteId":"`+ft.otherQuote+`"}`))
		p.idem = ft.otherQuote
		p.mustRefuse = true
		out = append(out, p)
	}

	// Path parameters.
	if strings.Contains(k.path, "/:") {
		for _, v := range []string{strings.Repeat("x", 5000), "%2F", "a%2Fb", "..", "%2e%2e", "%C3%A9", "%F0%9F%99%82", "%FF%FE",
			"%00", "a%20b", "%25", "nonexistent", "pdk_" + strings.Repeat("a", 48), "%E2%80%AE"} {
			p := withBody(mk("path param "+v[:min(len(v), 20)]), base)
			p.path = ft.pathFor(k.path, func(string) string { return v })
			out = append(out, p)
		}
	}

	// Query parameters.
	if r.Query != nil {
		for _, fi := range fieldsOf(reflect.TypeOf(r.Query)) {
			vals := []string{"", "abc", "-1", "0", "1.5", "1e3", "9223372036854775808", "-9223372036854775809", "%00", "%FF", "+1", "%20"}
			if m := fi.tag.Get("max"); m != "" {
				n, _ := strconv.ParseInt(m, 10, 64)
				vals = append(vals, strconv.FormatInt(n+1, 10))
			}
			if e := fi.tag.Get("enum"); e != "" {
				first, _, _ := strings.Cut(e, ",")
				if up := strings.ToUpper(first); up != first {
					vals = append(vals, up)
				}
				vals = append(vals, "nope")
			}
			for _, v := range vals {
				p := withBody(mk("query "+fi.name+"="+v), base)
				p.query = fi.name + "=" + v
				// An empty value is as good as absent; 0 and -1 may be in
				// range for a field without bounds.
				p.mustRefuse = v != "" && !(fi.tag.Get("min") == "" && (v == "0" || v == "-1"))
				if fi.typ.Kind() == reflect.String && fi.tag.Get("enum") == "" {
					p.mustRefuse = false
				}
				out = append(out, p)
			}
			for _, q := range []string{fi.name + "=%zz", fi.name + "=1%", fi.name + "=1;" + fi.name + "=500", fi.name + "=1;x"} {
				// Malformed: a reader that drops what it cannot parse
				// answers a question the client did not ask.
				p := withBody(mk("query "+q), base)
				p.query = q
				p.mustRefuse = true
				out = append(out, p)
			}
			if fi.tag.Get("repeat") != "true" {
				p := withBody(mk("query "+fi.name+" repeated"), base)
				v := "1"
				if e := fi.tag.Get("enum"); e != "" {
					v, _, _ = strings.Cut(e, ",")
				}
				p.query = fi.name + "=" + v + "&" + fi.name + "=" + v
				p.mustRefuse = true
				out = append(out, p)
			}
		}
		p := withBody(mk("unknown query param"), base)
		p.query = "bogus=1"
		p.mustRefuse = true
		out = append(out, p)
	} else {
		for _, q := range []string{"bogus=1", "limit=abc&limit=-1", "%zz=1", strings.Repeat("a=1&", 2000)} {
			p := withBody(mk("stray query"), base)
			p.query = q
			out = append(out, p)
		}
	}

	// Methods the path does not take.
	// Paths that are the route's but for their shape: no answer but a
	// refusal (404), whatever the route does.
	for _, v := range []string{path + "/", path + "//", "/" + path, strings.Replace(path, "/v1/", "/v1//", 1),
		strings.Replace(path, "/v1/", "/V1/", 1), path + "/..", path + "/%2e%2e", path + "%00", path + "/x"} {
		if v == path {
			continue
		}
		p := withBody(mk("path shape "+strings.TrimPrefix(v, path)), base)
		p.path = v
		p.skipStatusRule = true
		out = append(out, p)
	}
	for _, m := range []string{"PUT", "PATCH", "DELETE", "POST", "GET", "HEAD", "OPTIONS", "TRACE", "PURGE"} {
		if ft.byKey[routeKey{m, k.path}] != nil {
			continue
		}
		if get := ft.byKey[routeKey{http.MethodGet, k.path}]; m == http.MethodHead && get != nil && answersHead(get) {
			continue // served: the GET route's HEAD probes
		}
		p := withBody(mk("method "+m), base)
		p.method = m
		p.wantStatus = 405
		p.skipStatusRule = true
		out = append(out, p)
	}

	// Bodies.
	wholeBad := []string{"null", "[]", `"x"`, "1", "true", "{", "}", "{}}", "{} {}", `{"a":1,}`, "\xef\xbb\xbf{}", "{'a':1}",
		strings.Repeat("[", 100_000), strings.Repeat(`{"a":`, 20_000), "\x00", "{\x00}", "\xff\xfe{}", `{"":1}`,
		`{"__proto__":{}}`, "nul\x00l"}
	if r.Request == nil {
		// A route without a body: whatever is sent is ignored or refused
		// (a sample: the body is never read).
		for _, b := range []string{"{}", "{", strings.Repeat("[", 100_000), "nul\x00l\xff", strings.Repeat(" ", MaxBodyBytes+1)} {
			out = append(out, withBody(mk("stray body "+truncate(b, 12)), []byte(b)))
		}
		return out
	}
	for _, b := range wholeBad {
		p := withBody(mk("body "+truncate(b, 12)), []byte(b))
		p.mustRefuse = true
		out = append(out, p)
	}
	// SPEC section 7: a refusal on order placement or cancel-all-after is
	// 400, a body too large included (Route.Refuses400).
	tooLarge := 413
	if r.Refuses400 {
		tooLarge = 400
	}
	big := withBody(mk("oversized body"), []byte(`{"x":"`+strings.Repeat("a", MaxBodyBytes)+`"}`))
	big.mustRefuse, big.wantStatus = true, tooLarge
	out = append(out, big)
	bigChunked := big
	bigChunked.name, bigChunked.chunked = "oversized body, chunked", true
	out = append(out, bigChunked)
	chunked := withBody(mk("base, chunked"), base)
	chunked.chunked = true
	out = append(out, chunked)
	padded := withBody(mk("oversized whitespace"), append(bytes.Repeat([]byte(" "), MaxBodyBytes+1), base...))
	padded.mustRefuse, padded.wantStatus = true, tooLarge
	out = append(out, padded)
	out = append(out, withBody(mk("empty body"), []byte{}), withBody(mk("whitespace body"), []byte(" \n\t ")))
	unknown := withBody(mk("unknown field"), []byte(setRaw(base, "unknownField", "1")))
	unknown.mustRefuse = true
	out = append(out, unknown)
	nestedUnknown := withBody(mk("unknown field deep"), []byte(setRaw(base, "zz", strings.Repeat(`{"a":`, 5000)+"1"+strings.Repeat("}", 5000))))
	nestedUnknown.mustRefuse = true
	out = append(out, nestedUnknown)
	trailing := withBody(mk("trailing garbage"), append(append([]byte{}, base...), " x"...))
	trailing.mustRefuse = true
	out = append(out, trailing)
	badUTF := withBody(mk("invalid utf-8 outside strings"), append(append([]byte{}, base...), 0xff))
	badUTF.mustRefuse = true
	out = append(out, badUTF)
	for _, fi := range fieldsOf(reflect.TypeOf(r.Request)) {
		cur := fieldValue(base, fi)
		once := []byte(setRaw(base, fi.name, cur))
		dup := withBody(mk("duplicate "+fi.name), []byte(strings.TrimSuffix(string(once), "}")+","+strconv.Quote(fi.name)+":"+cur+"}"))
		dup.mustRefuse = true
		out = append(out, dup)
		upper := withBody(mk("case-folded "+fi.name), []byte(setRaw(base, strings.ToUpper(fi.name[:1])+fi.name[1:], cur)))
		upper.mustRefuse = true
		out = append(out, upper)
		if fi.tag.Get("req") == "true" {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(base, &m)
			delete(m, fi.name)
			b, _ := json.Marshal(m)
			miss := withBody(mk("missing "+fi.name), b)
			miss.mustRefuse = true
			out = append(out, miss)
			null := withBody(mk("null "+fi.name), []byte(setRaw(base, fi.name, "null")))
			null.mustRefuse = fi.tag.Get("nullable") != "true"
			out = append(out, null)
		}
		bad, edge := hostileValues(fi)
		for _, v := range bad {
			p := withBody(mk(fi.name+"="+truncate(v, 24)), []byte(setRaw(base, fi.name, v)))
			p.mustRefuse = true
			out = append(out, p)
		}
		for _, v := range edge {
			out = append(out, withBody(mk(fi.name+"~"+truncate(v, 24)), []byte(setRaw(base, fi.name, v))))
		}
		// Raw invalid UTF-8 and a raw NUL inside a string value.
		if fi.typ.Kind() == reflect.String && fi.typ != wireIntType {
			out = append(out, withBody(mk(fi.name+" raw invalid utf-8"), []byte(setRaw(base, fi.name, "\"a\xff\xfeb\""))))
			p := withBody(mk(fi.name+" raw NUL"), []byte(setRaw(base, fi.name, "\"a\x00b\"")))
			p.mustRefuse = true
			out = append(out, p)
		}
	}
	return out
}

// fieldValue is the raw JSON of field fi in obj, or a base value.
func fieldValue(obj []byte, fi fieldInfo) string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(obj, &m)
	if v, ok := m[fi.name]; ok {
		return string(v)
	}
	b, _ := json.Marshal(baseValue(fi))
	return string(b)
}

// allProbes is the whole table, route by route in the router's order.
func (ft *fuzzTarget) allProbes() []probe {
	var out []probe
	for _, k := range ft.routes {
		if k.path == "/v1/ws" {
			continue // an upgrade, probed by wsapi's tests
		}
		out = append(out, ft.probesFor(k)...)
	}
	return out
}

func TestEveryRouteRefusesHostileInput(t *testing.T) {
	ft := newFuzzTarget(t)
	probes := ft.allProbes()
	start := time.Now()
	fails := 0
	for _, p := range probes {
		if msg := ft.check(p); msg != "" {
			t.Error(msg)
			if fails++; fails > 200 {
				t.Fatal("too many failures")
			}
		}
	}
	if len(ft.routes) < 60 || len(probes) < 3000 {
		t.Fatalf("only %d routes and %d probes: the router or the generator lost some", len(ft.routes), len(probes))
	}
	t.Logf("%d routes, %d probes in %v", len(ft.routes), len(probes), time.Since(start).Round(time.Millisecond))
	if os.Getenv("PERPD_FUZZ_ACCEPTED") != "" {
		for _, s := range ft.accepted {
			t.Log("accepted: " + s)
		}
	}
}

// The fuzz target's request: the route (by index into the router's
// routes), a method (0: the route's own), the value of every path
// parameter, the raw query, header lines ("Name: value"; "!nokey" and
// "!noidem" leave out the key and the idempotency-key the route would
// get, "!key: v" sends v as the key), and the body.
var fuzzMethods = []string{"", "GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"}

func (ft *fuzzTarget) fuzzProbe(route uint16, method uint8, param, query, headers string, body []byte) (probe, bool) {
	if len(ft.routes) == 0 {
		return probe{}, false
	}
	k := ft.routes[int(route)%len(ft.routes)]
	if k.path == "/v1/ws" {
		return probe{}, false
	}
	p := probe{name: "fuzz", route: k, method: k.method, query: query, body: body}
	if m := fuzzMethods[int(method)%len(fuzzMethods)]; m != "" && m != k.method {
		p.method, p.skipStatusRule = m, true
	}
	p.path = ft.pathFor(k.path, func(string) string { return param })
	if strings.Contains(k.path, "/:") && (param == "" || strings.Contains(param, "/") || strings.ContainsAny(param, "?#")) {
		// Another route's path, or none: only the general rules hold.
		p.skipStatusRule = true
	}
	if _, err := url.ParseRequestURI(p.path + "?" + p.query); err != nil || strings.ContainsFunc(p.path+p.query, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		// Not a request-target (a space, a bad escape in the path): Go's
		// server refuses it before any handler runs, in plain text.
		return probe{}, false
	}
	for _, line := range strings.Split(headers, "\n") {
		switch name, v, _ := strings.Cut(line, ": "); {
		case line == "":
		case line == "!nokey":
			p.noKey = true
		case line == "!noidem":
			p.noIdem = true
		case name == "!key":
			p.key = v
		default:
			p.header = append(p.header, [2]string{name, v})
		}
	}
	return p, true
}

// fuzzArgs is a probe of the table as the fuzz target's arguments.
func (ft *fuzzTarget) fuzzArgs(p probe) (route uint16, method uint8, param, query, headers string, body []byte, ok bool) {
	i := slices.Index(ft.routes, p.route)
	m := slices.Index(fuzzMethods, p.method)
	if i < 0 || m < 0 {
		return 0, 0, "", "", "", nil, false
	}
	if p.method == p.route.method {
		m = 0
	}
	tmpl, segs := strings.Split(p.route.path, "/"), strings.Split(p.path, "/")
	if len(tmpl) != len(segs) {
		return 0, 0, "", "", "", nil, false
	}
	for j := range tmpl {
		if strings.HasPrefix(tmpl[j], ":") {
			param = segs[j]
		}
	}
	var lines []string
	if p.noKey {
		lines = append(lines, "!nokey")
	}
	if p.noIdem {
		lines = append(lines, "!noidem")
	}
	if p.key != "" {
		lines = append(lines, "!key: "+p.key)
	}
	for _, h := range p.header {
		lines = append(lines, h[0]+": "+h[1])
	}
	return uint16(i), uint8(m), param, p.query, strings.Join(lines, "\n"), p.body, true
}

// FuzzEveryRoute sends the fuzzer's requests to every route and holds each
// answer to the rule of TestEveryRouteRefusesHostileInput but for what
// only the table knows (which inputs are malformed). Its seeds are a
// sample of the table, a few per route; the normal suite runs only them.
func FuzzEveryRoute(f *testing.F) {
	ft := newFuzzTarget(f)
	seen := map[routeKey]int{}
	for i, p := range ft.allProbes() {
		if seen[p.route] >= 3 && i%40 != 0 {
			continue
		}
		if route, method, param, query, headers, body, ok := ft.fuzzArgs(p); ok && !bytes.Contains(body, []byte("$")) {
			seen[p.route]++
			f.Add(route, method, param, query, headers, body)
		}
	}
	ft.fuzzing = true
	f.Fuzz(func(t *testing.T, route uint16, method uint8, param, query, headers string, body []byte) {
		ft.a.t = t // the F may not be used inside the target
		p, ok := ft.fuzzProbe(route, method, param, query, headers, body)
		if !ok {
			return
		}
		if msg := ft.check(p); msg != "" {
			t.Error(msg)
		}
	})
}
