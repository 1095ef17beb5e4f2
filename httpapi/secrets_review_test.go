package httpapi

import (
	"bytes"
	"strings"
	"testing"
)

// TestKeyInARequestIDHeaderIsNeverLogged: a client that sends its API key
// as X-Request-Id (a header mix-up) had it logged verbatim as
// client_request_id (a key is 52 characters of [a-z0-9_], a well-formed
// id), and behind a trusted proxy that passes the header on, it became the
// request id itself: logged on this node and on the leader a write is
// forwarded to, and echoed in X-Request-Id. A key-shaped id is now
// neither kept nor logged.
func TestKeyInARequestIDHeaderIsNeverLogged(t *testing.T) {
	for _, proxied := range []bool{false, true} {
		var opts []Option
		if proxied {
			opts = append(opts, WithTrustedProxies([]string{"127.0.0.1"}))
		}
		a, logs, _ := newLoggedAPI(t, opts...)
		key, _ := a.signup()
		hex := strings.TrimPrefix(key, keyPrefix)
		for _, r := range []req{
			{method: "GET", path: "/v1/account", key: key, header: map[string]string{"X-Request-Id": key}},
			{method: "POST", path: "/v1/faucet", key: key, idem: nextIdem(), header: map[string]string{"X-Request-Id": key}},
			{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": strings.ToUpper(key)}},
		} {
			res := a.do(r)
			if got := res.header.Get("X-Request-Id"); !ourID.MatchString(got) {
				t.Errorf("proxied %v, %s %s: answered X-Request-Id %q, want the node's own", proxied, r.method, r.path, got)
			}
		}
		if l := logs.String(); strings.Contains(strings.ToLower(l), hex) {
			t.Fatalf("proxied %v: the key reached the log:\n%s", proxied, l)
		}
	}
}

// TestKeyAsIdempotencyKeyIsRefused: an idempotency key is stored in the
// replicated log as it is (an order's id, a withdrawal's idempotencyKey,
// the idempotency record), so a client that sent its API key there had
// the key in clear in every replica's log, snapshots and backups, and
// listed back as the order id (POST /v1/orders answered orderId = the
// key). Secrets enter the log only as hashes: such a request is refused
// before it is proposed, and the key is not echoed.
func TestKeyAsIdempotencyKeyIsRefused(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	hex := strings.TrimPrefix(key, keyPrefix)
	for _, r := range []req{
		{method: "POST", path: "/v1/faucet", key: key, idem: key},
		{method: "POST", path: "/v1/orders", key: key, idem: "grid-" + key, body: orderBody("BTC-PERP", "buy", "market", "1", nil)},
		{method: "POST", path: "/v1/signup", idem: strings.ToUpper(key), body: map[string]any{}},
	} {
		res := a.do(r)
		if res.status != 400 || res.code() != "validation" || strings.Contains(strings.ToLower(string(res.body)), hex) {
			t.Fatalf("%s %s with the key as idempotency-key: %d %s", r.method, r.path, res.status, res.body)
		}
	}
	snap, err := a.node.Machine().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ToLower(snap), []byte(hex)) {
		t.Fatal("the key reached the replicated state")
	}
	// Not a key (too short to be one) is still a fine idempotency key.
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: "pdk_" + hex[:40]}); r.status != 201 {
		t.Fatalf("faucet with a short pdk_ idempotency key: %d %s", r.status, r.body)
	}
}
