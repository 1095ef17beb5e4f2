package httpapi

import (
	"strings"
	"testing"
)

// Without a WebSocket there is nothing to describe: /asyncapi.json is a
// 404 in the {error, code} shape, and the llms files still point to it.
func TestAsyncAPIWithoutWebSocket(t *testing.T) {
	a := newTestAPI(t)
	r := a.do(req{method: "GET", path: "/asyncapi.json"})
	if r.status != 404 || r.code() != "not_found" {
		t.Fatalf("/asyncapi.json without a WebSocket: %d %s", r.status, r.body)
	}
	for _, txt := range []string{"/llms.txt", "/llms-full.txt"} {
		if b := string(a.do(req{method: "GET", path: txt}).body); !strings.Contains(b, "/asyncapi.json (AsyncAPI 3.0)") {
			t.Errorf("%s does not link /asyncapi.json", txt)
		}
	}
}
