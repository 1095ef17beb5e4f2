package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHeadIsAnsweredLikeGet: HEAD on a GET route answered 405 (gin adds
// no HEAD route of its own), so a monitor or a client checking a resource
// with HEAD saw a refusal where a GET succeeds. RFC 9110 9.3.2: HEAD is GET
// without the body: the same status and headers, and here the same guards,
// so the same authentication and the same rate budget. A public route, a
// keyed one (401 without a key, the key's read budget drawn with one), and
// paths that are no GET route's (unknown: 404; a POST-only route: 405).
func TestHeadIsAnsweredLikeGet(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	a.listMarkets()
	key, _ := a.signup()

	get := a.do(req{method: "GET", path: "/v1/markets"})
	head := a.do(req{method: "HEAD", path: "/v1/markets"})
	if get.status != 200 || head.status != 200 {
		t.Fatalf("GET %d, HEAD %d %s: want 200 both", get.status, head.status, head.body)
	}
	if len(head.body) != 0 {
		t.Fatalf("HEAD answered a body: %s", head.body)
	}
	for _, h := range []string{"Content-Type", "X-Raft-Index", "X-RateLimit-Limit"} {
		if head.header.Get(h) == "" || head.header.Get(h) != get.header.Get(h) && h != "X-Raft-Index" {
			t.Errorf("HEAD %s %q, GET %q", h, head.header.Get(h), get.header.Get(h))
		}
	}
	if cl := head.header.Get("Content-Length"); cl != strconv.Itoa(len(get.body)) {
		t.Errorf("HEAD Content-Length %q, the GET body is %d bytes", cl, len(get.body))
	}

	// Keyed: no key is 401 without a body; with the key, 200, drawn from
	// the key's read budget as a GET is (burst 3: two HEADs and a GET
	// pass, the next GET is refused).
	if r := a.do(req{method: "HEAD", path: "/v1/account"}); r.status != 401 || len(r.body) != 0 {
		t.Fatalf("HEAD /v1/account without a key: %d %s, want 401", r.status, r.body)
	}
	for i := 0; i < 2; i++ {
		if r := a.do(req{method: "HEAD", path: "/v1/account", key: key}); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("HEAD /v1/account %d: %d remaining %q", i, r.status, r.header.Get("X-RateLimit-Remaining"))
		}
	}
	if r := a.do(req{method: "GET", path: "/v1/account", key: key}); r.status != 200 {
		t.Fatalf("GET /v1/account with one token left: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "HEAD", path: "/v1/account", key: key}); r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("HEAD past the key's read budget: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}

	// No GET route: as before.
	if r := a.do(req{method: "HEAD", path: "/v1/no-such-route"}); r.status != 404 {
		t.Fatalf("HEAD on an unknown path: %d", r.status)
	}
	if r := a.do(req{method: "HEAD", path: "/v1/signup"}); r.status != 405 {
		t.Fatalf("HEAD on a POST-only route: %d", r.status)
	}

	// The description says it, once for every GET.
	info := a.srv.OpenAPI()["info"].(map[string]any)
	if d := info["description"].(string); !strings.Contains(d, headDoc) {
		t.Errorf("info.description does not say which paths answer HEAD: %q", d)
	}
	if txt := string(a.do(req{method: "GET", path: "/llms.txt"}).body); !strings.Contains(txt, headDoc) {
		t.Errorf("llms.txt does not say which paths answer HEAD")
	}
}

// TestHeadIsNotAWebSocketUpgrade: the upgrade is GET only (RFC 6455), so
// HEAD /v1/ws stays 405 and never reaches the WebSocket handler.
func TestHeadIsNotAWebSocketUpgrade(t *testing.T) {
	ws := &countingWS{}
	a := newTestAPIWith(t, []Option{WithWebSocket(ws)})
	if r := a.do(req{method: "HEAD", path: wsPath}); r.status != 405 || ws.calls.Load() != 0 {
		t.Fatalf("HEAD %s: %d, handler called %d times", wsPath, r.status, ws.calls.Load())
	}
}

// countingWS counts the requests handed to the WebSocket handler.
type countingWS struct{ calls atomic.Int64 }

func (w *countingWS) ServeClient(rw http.ResponseWriter, _ *http.Request, _ string) {
	w.calls.Add(1)
	rw.WriteHeader(http.StatusBadRequest)
}
