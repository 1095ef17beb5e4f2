package wsapi

import (
	"strconv"
	"testing"

	"github.com/olahol/melody"
)

// The WebSocket bounds at their boundaries: a connection takes exactly
// MaxSubscriptions subjects and the next is refused (validation), and
// exactly PerAccount connections subscribe to one account's channel and
// the next is refused (rate_limited); a refused join adds nothing, and an
// already held subject is still acknowledged at the cap.
func TestWebSocketCapsAtTheirBoundary(t *testing.T) {
	newHub := func() *Hub {
		return &Hub{subs: map[string]map[*melody.Session]struct{}{}, PerAccount: MaxAccountConnections}
	}
	newConn := func() *conn { return &conn{subjects: map[string]bool{}, accountID: "acc", keyHash: "hash"} }
	for _, tc := range []struct {
		name string
		cap  int
		code string
		// join i-th subject (of one connection, or one account subject
		// over the i-th connection).
		run func(h *Hub, c []*conn, s []*melody.Session, i int) *errorFrame
	}{
		{"subscriptions per connection", MaxSubscriptions, "validation",
			func(h *Hub, c []*conn, s []*melody.Session, i int) *errorFrame {
				return h.join(s[0], c[0], channelPrices+"|F"+strconv.Itoa(i), "")
			}},
		{"account-channel connections per node", MaxAccountConnections, "rate_limited",
			func(h *Hub, c []*conn, s []*melody.Session, i int) *errorFrame {
				return h.join(s[i], c[i], subjectAccountPref+"acc", "hash")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub()
			var cs []*conn
			var ss []*melody.Session
			for i := 0; i <= tc.cap; i++ {
				cs, ss = append(cs, newConn()), append(ss, &melody.Session{})
			}
			for i := 0; i < tc.cap; i++ {
				if ef := tc.run(h, cs, ss, i); ef != nil {
					t.Fatalf("join %d of %d refused: %+v", i+1, tc.cap, ef)
				}
			}
			ef := tc.run(h, cs, ss, tc.cap)
			if ef == nil || ef.Code != tc.code {
				t.Fatalf("join %d: %+v, want %s", tc.cap+1, ef, tc.code)
			}
			subs, total := len(h.subs), 0
			for _, m := range h.subs {
				total += len(m)
			}
			if total != tc.cap || len(cs[tc.cap].subjects) != 0 || (tc.cap == MaxSubscriptions && len(cs[0].subjects) != tc.cap) {
				t.Fatalf("a refused join changed state: %d subjects, %d subscriptions", subs, total)
			}
			if ef := tc.run(h, cs, ss, tc.cap-1); ef != nil {
				t.Fatalf("re-joining a held subject at the cap: %+v", ef)
			}
		})
	}
}
