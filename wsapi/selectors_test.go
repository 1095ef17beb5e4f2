package wsapi

import (
	"strings"
	"testing"
	"time"
)

// TestMissingRequiredFieldIsValidation: a frame without a field the
// description requires (auth's apiKey, prices' feedId, stats' marketId) is
// a malformed frame: validation, naming the field. Before, a subscribe to
// prices without feedId answered not_found "unknown feedId" (as if the
// client had named a feed that does not exist) and an auth without apiKey
// answered unauthorized "API key is not valid" (as if it had sent a wrong
// key). A field of the wrong JSON type (apiKey 123) was worse: the frame
// was dropped without a word. A selector that names nothing stays
// not_found.
func TestMissingRequiredFieldIsValidation(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	for _, tc := range []struct {
		frame      map[string]any
		code, want string
	}{
		{map[string]any{"op": "subscribe", "channel": "prices"}, "validation", "feedId is required"},
		{map[string]any{"op": "subscribe", "channel": "prices", "feedId": ""}, "validation", "feedId is required"},
		{map[string]any{"op": "subscribe", "channel": "stats"}, "validation", "marketId is required"},
		{map[string]any{"op": "unsubscribe", "channel": "prices"}, "validation", "feedId is required"},
		{map[string]any{"op": "unsubscribe", "channel": "stats"}, "validation", "marketId is required"},
		{map[string]any{"op": "auth"}, "validation", "apiKey is required"},
		{map[string]any{"op": "auth", "apiKey": ""}, "validation", "apiKey is required"},
		{map[string]any{"op": "auth", "apiKey": 123}, "validation", "apiKey must be a string"},
		{map[string]any{"op": "subscribe", "channel": "prices", "feedId": 7}, "validation", "feedId must be a string"},
		{map[string]any{"op": "subscribe", "channel": "prices", "feedId": "NOPE"}, "not_found", "unknown feedId"},
		{map[string]any{"op": "subscribe", "channel": "stats", "marketId": "NOPE"}, "not_found", "unknown marketId"},
		{map[string]any{"op": "auth", "apiKey": "pdk_wrong"}, "unauthorized", "API key is not valid"},
	} {
		send(t, c, tc.frame)
		m := next(t, c, "error")
		if m["code"] != tc.code || !strings.Contains(m["error"].(string), tc.want) || m["badOp"] != tc.frame["op"] {
			t.Errorf("%v: got %v; want code %s, error naming %q, badOp %v", tc.frame, m, tc.code, tc.want, tc.frame["op"])
		}
	}
}
