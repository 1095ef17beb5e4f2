package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// freshMember serves the API of a member that has joined with an empty
// data directory and not yet received any entry: it is behind, and knows
// no key.
func freshMember(t *testing.T, opts ...Option) *httptest.Server {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
	n, err := node.New(node.Config{ID: "fresh", DataDir: t.TempDir(), RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", AdminToken: "t", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	srv := httptest.NewServer(New(n, log, opts...))
	t.Cleanup(func() { srv.Close(); _ = n.Shutdown() })
	return srv
}

// accountWithUnknownKey answers GET /v1/account with a key srv does not
// know.
func accountWithUnknownKey(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	r, _ := http.NewRequest("GET", srv.URL+"/v1/account", nil)
	r.Header.Set(KeyHeader, "pdk_0123456789abcdef0123456789abcdef0123456789abcdef")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// A member that has joined with an empty data directory and not yet
// received any entry knows no key: it must answer 503 (try again or ask
// another node), never call a valid key invalid with 401.
func TestFreshMemberAnswers503NotUnauthorizedForAnUnknownKey(t *testing.T) {
	if got := accountWithUnknownKey(t, freshMember(t)); got != http.StatusServiceUnavailable {
		t.Fatalf("an unknown key on a member with no state yet: %d, want 503", got)
	}
}

// stalledApply blocks the state machine's goroutine after each batch until
// released, so raft goes on committing while nothing more is applied.
type stalledApply struct{ entered, release chan struct{} }

func (s stalledApply) Applied(int, time.Duration) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
}
func (stalledApply) Grouped(int) {}

// A lagging node waits for the log before it refuses an unknown key, and
// that wait comes before any key's budget: it is drawn from the client
// address's public read budget, so made-up keys cannot keep a lagging
// node's goroutines waiting without limit. (A member with no state at all
// does not wait: it answers 503 at once, halt.go.)
func TestUnknownKeyOnALaggingNodeDrawsTheAddressBudget(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	stall := stalledApply{entered: make(chan struct{}, 1), release: make(chan struct{})}
	a.node.SetObserver(stall)
	t.Cleanup(func() { close(stall.release) }) // before the node's shutdown
	// A write stalls the machine after its batch (its answer comes once
	// released); a barrier is then committed behind it, never applied
	// while the stall lasts.
	go func() {
		r, _ := http.NewRequest("POST", a.http.URL+"/v1/signup", strings.NewReader("{}"))
		r.Header.Set("idempotency-key", "lag")
		if res, err := http.DefaultClient.Do(r); err == nil {
			res.Body.Close()
		}
	}()
	select {
	case <-stall.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the machine never stalled")
	}
	go a.node.Raft.Barrier(0)
	deadline := time.Now().Add(10 * time.Second)
	for a.node.Machine().Applied() >= a.node.Raft.CommitIndex() {
		if time.Now().After(deadline) {
			t.Fatal("the node never fell behind its log")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv := a.http
	for i := range 3 { // tinyRead's burst
		if got := accountWithUnknownKey(t, srv); got != http.StatusServiceUnavailable {
			t.Fatalf("unknown key %d within the address's burst: %d, want 503", i+1, got)
		}
	}
	if got := accountWithUnknownKey(t, srv); got != http.StatusTooManyRequests {
		t.Fatalf("unknown key past the address's burst: %d, want 429", got)
	}
}
