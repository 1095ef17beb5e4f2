package fsm

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// TestOrderAnswerIsJSONMarshals: an order's answer is written without
// reflection, and must be json.Marshal's bytes for every order id the
// client may choose (stored answers are replayed byte for byte, and
// replicas must agree).
func TestOrderAnswerIsJSONMarshals(t *testing.T) {
	ids := []string{"", "m1", "order-42_x.y~z", "a b", `q"uote`, `back\slash`, "<tag>", "a&b", "\x00", "\x1f", "\x7f",
		"é", "日本", "\u2028", "\xff", "a\xc3", "\U0001F600"}
	for c := 0; c < 256; c++ {
		ids = append(ids, string([]byte{'x', byte(c), 'y'}))
	}
	fast := 0
	for _, id := range ids {
		for _, status := range []string{trade.StatusFilled, trade.StatusResting, trade.StatusWorking, trade.StatusAccepted} {
			v := trade.Created{OrderID: id, Status: status}
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			res, err := okResult(201, &v)
			if err != nil || !bytes.Equal(res.Body, want) {
				t.Fatalf("answer for %q: %s, want %s (%v)", id, res.Body, want, err)
			}
			if got, ok := appendCreated(nil, &v); ok {
				fast++
				if !bytes.Equal(got, want) {
					t.Fatalf("fast answer for %q: %s, want %s", id, got, want)
				}
			}
		}
	}
	if fast < 4*90 { // at least the x?y ids of printable ASCII, less the 5 escaped
		t.Fatalf("only %d answers took the fast path", fast)
	}
}
