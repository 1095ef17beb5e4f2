package node

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
)

// A leader without the batch route (an older binary during a rolling
// upgrade) answers 404 to a batch: the follower then sends the same items
// one by one on ForwardPath, each caller gets its own answer, and later
// forwards to that leader skip the batch route.
func TestForwardBatchFallsBackToSingleForwards(t *testing.T) {
	var batches, singles atomic.Int32
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case ForwardBatchPath:
			batches.Add(1)
			http.NotFound(w, r)
		case ForwardPath:
			singles.Add(1)
			b, _ := io.ReadAll(r.Body)
			cmd, err := fsm.DecodeCommand(b)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if strings.HasSuffix(cmd.IdemKey, "refuse") {
				http.Error(w, "not the leader", http.StatusMisdirectedRequest)
				return
			}
			out, _ := fsm.Marshal(&fsm.Result{Status: http.StatusOK, Index: 7, Body: []byte(`"` + cmd.IdemKey + `"`)})
			_, _ = w.Write(out)
		}
	}))
	defer leader.Close()
	addr := strings.TrimPrefix(leader.URL, "http://")

	n := &Node{forwarder: newForwarder(nil), keys: &keys{}, cfg: Config{ProposeTimeout: 5 * time.Second, Logger: hclog.NewNullLogger()}, stop: make(chan struct{})}
	n.forwards = newForwardBatcher(n)
	n.wg.Add(1)
	go n.forwards.run()
	defer func() { close(n.stop); n.wg.Wait() }()

	send := func(keys ...string) {
		t.Helper()
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := n.forward(context.Background(), addr, &fsm.Command{Type: fsm.CmdNoop, IdemKey: k})
				if strings.HasSuffix(k, "refuse") {
					if err == nil || !strings.Contains(err.Error(), "421") {
						t.Errorf("%s: %v, want the leader's 421", k, err)
					}
					return
				}
				if err != nil || string(res.Body) != `"`+k+`"` {
					t.Errorf("%s: answered %+v, %v", k, res, err)
				}
			}()
		}
		wg.Wait()
	}
	send("a", "b", "c-refuse", "d")
	if batches.Load() == 0 || singles.Load() != 4 {
		t.Fatalf("%d batch calls, %d single forwards; want at least one batch then 4 singles", batches.Load(), singles.Load())
	}
	b0 := batches.Load()
	send("e", "f")
	if batches.Load() != b0 || singles.Load() != 6 {
		t.Fatalf("after a 404 the follower tried batches again (%d -> %d) or lost forwards (%d singles)", b0, batches.Load(), singles.Load())
	}
}

// TestForwardLogLevelQuietsOnlyTheOrderFlowsSuccesses: a forwarded order,
// cancel or dead-man refresh that succeeded in time logs at debug; a
// refusal, a slow one or any other write at info.
func TestForwardLogLevelQuietsOnlyTheOrderFlowsSuccesses(t *testing.T) {
	cases := []struct {
		t      fsm.CmdType
		status int
		took   time.Duration
		want   hclog.Level
	}{
		{fsm.CmdPlaceOrder, 201, time.Millisecond, hclog.Debug},
		{fsm.CmdCancelOrder, 200, time.Millisecond, hclog.Debug},
		{fsm.CmdCancelAllAfter, 200, time.Millisecond, hclog.Debug},
		{fsm.CmdPlaceOrder, 400, time.Millisecond, hclog.Info},
		{fsm.CmdPlaceOrder, 201, SlowRoutine, hclog.Info},
		{fsm.CmdSignup, 201, time.Millisecond, hclog.Info},
	}
	for _, c := range cases {
		if got := forwardLogLevel(c.t, c.status, c.took); got != c.want {
			t.Errorf("%v status %d in %v: level %v, want %v", c.t, c.status, c.took, got, c.want)
		}
	}
}

// A batch holds at most ForwardBatchMax items, and the bound is checked
// before the items are decoded: every item costs a forwardItem however
// few bytes it takes, so a body of empty items within maxForwardBytes
// would otherwise make dozens of times its size before the count is seen.
func TestForwardBatchPastItsBoundIsRefusedBeforeItsItemsAreDecoded(t *testing.T) {
	n := &Node{keys: &keys{peerBearer: "peer"}, cfg: Config{Logger: hclog.NewNullLogger()}}
	const items = 4 << 20
	body := []byte{0x9a, items >> 24, items >> 16 & 0xff, items >> 8 & 0xff, items & 0xff} // an array of 4 Mi items
	body = append(body, bytes.Repeat([]byte{0xf6}, items)...)                              // each null
	req := httptest.NewRequest(http.MethodPost, ForwardBatchPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer peer")
	w := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n.ForwardBatchHandler().ServeHTTP(w, req)
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("a batch of %d items answered %d %s", items, w.Code, w.Body)
	}
	if made := after.TotalAlloc - before.TotalAlloc; made > 8*uint64(len(body)) {
		t.Fatalf("refusing a %d-byte batch made %d MiB", len(body), made>>20)
	}
}
