package node

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
)

// A leader that dies mid-call (its host gone: no answer, no reset) holds
// the batch call out until the call's timeout. Forwards to the leader
// elected meanwhile must not wait behind it: before batching each
// forward was its own call, and a write sent to the new leader went at
// once.
func TestForwardToANewLeaderIsNotHeldBehindACallToTheOldOne(t *testing.T) {
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer dead.Close()
	defer close(release)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var items []forwardItem
		if err := fsm.Unmarshal(raw, &items); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answers := make([]forwardAnswer, len(items))
		for i, it := range items {
			cmd, _ := fsm.DecodeCommand(it.Cmd)
			out, _ := fsm.Marshal(&fsm.Result{Status: http.StatusOK, Index: 9, Body: []byte(`"` + cmd.IdemKey + `"`)})
			answers[i] = forwardAnswer{Status: http.StatusOK, Result: out}
		}
		out, _ := fsm.Marshal(answers)
		_, _ = w.Write(out)
	}))
	defer live.Close()

	const timeout = 5 * time.Second
	n := &Node{forwarder: newForwarder(nil), keys: &keys{}, cfg: Config{ProposeTimeout: timeout, Logger: hclog.NewNullLogger()}, stop: make(chan struct{})}
	n.forwards = newForwardBatcher(n)
	n.wg.Add(1)
	go n.forwards.run()
	defer func() { close(n.stop); n.wg.Wait() }()

	// Under load the follower goes on forwarding to the old leader until
	// it learns of the election: the old leader holds every call it may
	// have, and more writes wait for it than a backlog of full batches.
	old, cancelOld := context.WithTimeout(context.Background(), timeout)
	defer cancelOld()
	for range 2*ForwardsInFlight*ForwardBatchMax + 1 {
		go func() {
			_, _ = n.forward(old, strings.TrimPrefix(dead.URL, "http://"), &fsm.Command{Type: fsm.CmdNoop, IdemKey: "old"})
		}()
	}
	for range ForwardsInFlight {
		<-arrived
	}
	time.Sleep(100 * time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	res, err := n.forward(ctx, strings.TrimPrefix(live.URL, "http://"), &fsm.Command{Type: fsm.CmdNoop, IdemKey: "new"})
	if took := time.Since(start); err != nil || string(res.Body) != `"new"` || took > time.Second {
		t.Fatalf("the forward to the new leader answered %+v, %v after %v; want its answer at once", res, err, took)
	}
}
