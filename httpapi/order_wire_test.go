package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// The order path writes its headers straight into the header map and its
// answer without gin's renderer (fewer allocations): what a client reads
// on the wire must not change. These tests read raw HTTP/1.1 responses off
// a keep-alive connection, so header order and spelling count, with only
// the values that differ per request (the date, the request id, the log
// index, the token counts) reduced to their shape.

// wireVolatile are the headers whose values change per request, and the
// shape each must have.
var wireVolatile = map[string]*regexp.Regexp{
	"Date":                  regexp.MustCompile(`^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$`),
	"X-Request-Id":          regexp.MustCompile(`^[0-9a-f]{32}$`),
	"X-Raft-Index":          regexp.MustCompile(`^[1-9][0-9]*$`),
	"X-Ratelimit-Remaining": regexp.MustCompile(`^[0-9]+$`),
	"X-Ratelimit-Reset":     regexp.MustCompile(`^1[0-9]{9}$`),
}

// wireExchange sends one raw request on conn and returns the response's
// status line and header lines as sent (volatile values replaced by "*")
// and its body.
func wireExchange(t *testing.T, conn net.Conn, rd *bufio.Reader, method, path string, headers []string, body string) ([]string, string) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString(method + " " + path + " HTTP/1.1\r\nHost: perpd.test\r\n")
	for _, h := range headers {
		sb.WriteString(h + "\r\n")
	}
	if body != "" {
		sb.WriteString("Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	sb.WriteString("\r\n" + body)
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, sb.String()); err != nil {
		t.Fatal(err)
	}
	var lines []string
	length := -1
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the answer: %v (so far %q)", err, lines)
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		if name, value, ok := strings.Cut(line, ": "); ok && len(lines) > 0 {
			if re := wireVolatile[name]; re != nil {
				if !re.MatchString(value) {
					t.Errorf("%s: %q has not the expected shape", name, value)
				}
				line = name + ": *"
			}
			if name == "Content-Length" {
				length, _ = strconv.Atoi(value)
			}
		}
		lines = append(lines, line)
	}
	if length < 0 {
		t.Fatalf("no Content-Length: %q", lines)
	}
	b := make([]byte, length)
	if _, err := io.ReadFull(rd, b); err != nil {
		t.Fatal(err)
	}
	return lines, string(b)
}

func TestOrderAnswersOnTheWire(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	conn, err := net.Dial("tcp", a.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	keyed := []string{"X-Api-Key: " + key, "Idempotency-Key: wire-1"}
	order := `{"marketId":"ETH-PERP","side":"buy","type":"market","contracts":"10","reduceOnly":false}`
	const rateLines = "X-Ratelimit-Limit: 60\nX-Ratelimit-Remaining: *\nX-Ratelimit-Reset: *\n"

	for _, tc := range []struct {
		name    string
		method  string
		path    string
		headers []string
		body    string
		want    string // status line and header lines, "\n"-separated
		wantRe  string // the body
	}{
		{name: "placed", method: "POST", path: "/v1/orders", headers: keyed, body: order,
			want: "HTTP/1.1 201 Created\nContent-Length: 38\nContent-Type: application/json; charset=utf-8\n" + "X-Raft-Index: *\n" +
				rateLines + "X-Request-Id: *\nDate: *",
			wantRe: `^\{"orderId":"wire-1","status":"filled"\}$`},
		{name: "replayed", method: "POST", path: "/v1/orders", headers: keyed, body: order,
			want: "HTTP/1.1 201 Created\nContent-Length: 38\nContent-Type: application/json; charset=utf-8\nIdempotent-Replayed: true\n" +
				"X-Raft-Index: *\n" + rateLines + "X-Request-Id: *\nDate: *",
			wantRe: `^\{"orderId":"wire-1","status":"filled"\}$`},
		{name: "key reused with another body", method: "POST", path: "/v1/orders", headers: keyed,
			body: strings.Replace(order, `"10"`, `"11"`, 1),
			// SPEC section 7: every refusal on order placement is 400.
			want: "HTTP/1.1 400 Bad Request\nContent-Length: *\nContent-Type: application/json; charset=utf-8\n" + "X-Raft-Index: *\n" +
				rateLines + "X-Request-Id: *\nDate: *",
			wantRe: `^\{"error":"[^"]+","code":"idempotency_key_reused"\}$`},
		{name: "refused by the state machine", method: "POST", path: "/v1/orders",
			headers: []string{"X-Api-Key: " + key, "Idempotency-Key: wire-2"}, body: strings.Replace(order, `"10"`, `"1000000"`, 1),
			want: "HTTP/1.1 400 Bad Request\nContent-Length: *\nContent-Type: application/json; charset=utf-8\n" + "X-Raft-Index: *\n" +
				rateLines + "X-Request-Id: *\nDate: *",
			wantRe: `^\{"error":"[^"]+","code":"insufficient_[a-z]+"\}$`},
		{name: "cancel of a filled order", method: "DELETE", path: "/v1/orders/wire-1",
			headers: []string{"X-Api-Key: " + key, "Idempotency-Key: wire-c"},
			want: "HTTP/1.1 200 OK\nContent-Length: *\nContent-Type: application/json; charset=utf-8\nX-Raft-Index: *\n" +
				rateLines + "X-Request-Id: *\nDate: *",
			wantRe: `^\{"orderId":"wire-1","canceled":false\}$`},
		{name: "malformed", method: "POST", path: "/v1/orders",
			headers: []string{"X-Api-Key: " + key, "Idempotency-Key: wire-3"}, body: `{"marketId":"ETH-PERP","sides":"buy"}`,
			want:   "HTTP/1.1 400 Bad Request\nContent-Type: application/json; charset=utf-8\nX-Raft-Index: *\nX-Request-Id: *\nDate: *\nContent-Length: *",
			wantRe: `^\{"error":"field sides: is not a field of this request","code":"validation"\}$`},
		{name: "no key", method: "POST", path: "/v1/orders", headers: []string{"Idempotency-Key: wire-4"}, body: order,
			want:   "HTTP/1.1 401 Unauthorized\nContent-Type: application/json; charset=utf-8\nX-Raft-Index: *\nX-Request-Id: *\nDate: *\nContent-Length: *",
			wantRe: `^\{"error":"missing x-api-key header","code":"unauthorized"\}$`},
		{name: "no idempotency key", method: "POST", path: "/v1/orders", headers: []string{"X-Api-Key: " + key}, body: order,
			want:   "HTTP/1.1 400 Bad Request\nContent-Type: application/json; charset=utf-8\nX-Raft-Index: *\nX-Request-Id: *\nDate: *\nContent-Length: *",
			wantRe: `^\{"error":"header idempotency-key is required on this route","code":"validation"\}$`},
		{name: "unknown key", method: "POST", path: "/v1/orders",
			headers: []string{"X-Api-Key: pdk_000000000000000000000000000000000000000000000000", "Idempotency-Key: wire-5"}, body: order,
			want:   "HTTP/1.1 401 Unauthorized\nContent-Type: application/json; charset=utf-8\nX-Raft-Index: *\nX-Request-Id: *\nDate: *\nContent-Length: *",
			wantRe: `^\{"error":"API key is not valid \(unknown or revoked\)","code":"unauthorized"\}$`},
	} {
		lines, body := wireExchange(t, conn, rd, tc.method, tc.path, tc.headers, tc.body)
		for i, l := range lines {
			if strings.HasPrefix(l, "Content-Length: ") && strings.Contains(tc.want, "Content-Length: *") {
				lines[i] = "Content-Length: *"
			}
		}
		if got := strings.Join(lines, "\n"); got != tc.want {
			t.Errorf("%s: header\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		if !regexp.MustCompile(tc.wantRe).MatchString(body) {
			t.Errorf("%s: body %s", tc.name, body)
		}
	}
}

// What an order proposes is the command the handlers built before the
// order path was made cheaper, byte for byte: the payload, the account and
// key, the idempotency key and the request hash, which fsm.RequestHash
// makes of encoding/json's form of the request (a plain order, whose
// canonical JSON the handler writes itself, and an order with a trigger,
// which goes through encoding/json).
func TestOrderCommandIsUnchanged(t *testing.T) {
	var a *testAPI
	var got []*fsm.Command
	a = newTestAPIWith(t, []Option{WithProposer(func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
		if cmd.Type == fsm.CmdPlaceOrder {
			got = append(got, cmd)
		}
		return a.node.Propose(ctx, cmd)
	})})
	a.listMarkets()
	a.freshPrices()
	key, acct := a.tradingAccount()
	sessions := a.do(req{method: "GET", path: "/v1/sessions", key: key}).json(t)["sessions"].([]any)
	keyID := sessions[0].(map[string]any)["keyId"].(string)
	lev := wire.Int(10)
	plain := OrderRequest{MarketID: "ETH-PERP", Side: "buy", Type: "market", Contracts: 10, Leverage: &lev}
	trig := OrderRequest{MarketID: "ETH-PERP", Side: "sell", Type: "market", Contracts: 3,
		Trigger: &OrderTrigger{Kind: "stop", Level: wire.Int(ethStartQ8 / 2)}}
	for i, tc := range []struct {
		body  string
		req   OrderRequest
		place trade.PlaceRequest
	}{
		{`{"marketId":"ETH-PERP","side":"buy","type":"market","contracts":"10","reduceOnly":false,"leverage":"10"}`, plain,
			trade.PlaceRequest{OrderID: "cmd-0", MarketID: "ETH-PERP", Side: "buy", Type: "market", Contracts: 10, Leverage: 10}},
		{`{"reduceOnly":false, "contracts":"3","marketId":"ETH-PERP","side":"sell","type":"market","trigger":{"kind":"stop","level":"` +
			strconv.FormatInt(ethStartQ8/2, 10) + `"}}`, trig,
			trade.PlaceRequest{OrderID: "cmd-1", MarketID: "ETH-PERP", Side: "sell", Type: "market", Contracts: 3,
				TriggerKind: "stop", TriggerLevelQ8: ethStartQ8 / 2}},
	} {
		idem := "cmd-" + strconv.Itoa(i)
		if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: idem, body: tc.body}); r.status != 201 {
			t.Fatalf("order %d: %d %s", i, r.status, r.body)
		}
		want, err := fsm.NewCommand(fsm.CmdPlaceOrder, tc.place)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := json.Marshal(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		want.Account, want.KeyID, want.IdemKey = acct, keyID, "acct:"+acct+":"+idem
		want.ReqHash = fsm.RequestHash([]byte("POST"), []byte("/v1/orders"), canon)
		wantBytes, _ := want.Encode()
		if len(got) != i+1 {
			t.Fatalf("order %d: %d placements proposed", i, len(got))
		}
		// The leader stamps the entry's time once it is proposed.
		cmd := *got[i]
		cmd.TsMs = 0
		gotBytes, _ := cmd.Encode()
		if !bytes.Equal(gotBytes, wantBytes) {
			t.Errorf("order %d proposed\n%x\nwant\n%x", i, gotBytes, wantBytes)
		}
	}
}
