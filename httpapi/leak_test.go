package httpapi

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/perpd/perpd/fsm"
)

// A write the node could not get applied is answered 503 with a fixed
// message: the leader's own error text (a peer-credential refusal names
// the cluster secret's fingerprint, a dial error the leader's admin
// address) goes to the log, not to the client.
func TestFailedWriteDoesNotRelayTheLeadersError(t *testing.T) {
	const detail = `the leader refused the forwarded write: 401: cluster secret mismatch: fingerprint 0123456789abcdef; Post "http://10.0.0.7:7002/internal/propose"`
	var armed atomic.Bool
	var a *testAPI
	a = newTestAPIWith(t, []Option{WithProposer(func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
		if armed.Load() {
			return nil, errors.New(detail)
		}
		return a.srv.Node.Propose(ctx, cmd)
	})})
	key, _ := a.signup()
	armed.Store(true)
	r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: nextIdem(), body: orderBody("BTC-PERP", "buy", "market", "20000", nil)})
	if r.status != 503 || r.code() != "unavailable" {
		t.Fatalf("failed write: %d %s", r.status, r.body)
	}
	for _, s := range []string{"fingerprint", "10.0.0.7", "/internal/"} {
		if strings.Contains(string(r.body), s) {
			t.Fatalf("503 body relays internal detail %q: %s", s, r.body)
		}
	}
}
