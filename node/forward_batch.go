package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/perpd/perpd/fsm"
)

// Forward batching. A follower's clients' writes reach the leader as
// forwards; one HTTPS call each cost the follower a client round trip and
// the leader a request to serve for every write, which made load spread
// over the members slower than load on the leader. The follower now
// batches them the way the leader's committer batches raft entries (and
// with no timer either): a forward joins a queue, and one goroutine sends
// what has queued as one call to ForwardBatchPath when no call is out to
// that leader (or a full batch waits and fewer than ForwardsInFlight
// are), so a lone write goes at once and under load batches grow by
// themselves; a call held by a leader that died does not hold back the
// writes bound for the next. The
// leader serves each item exactly as it serves a single forward
// (serveForward), concurrently, so the items meet in its group commit;
// each caller gets its own answer, refusal or rate verdict. A leader without the batch route (a rolling upgrade) gets
// the items one by one on ForwardPath.
const (
	// ForwardBatchPath is where the leader accepts a batch of forwards.
	ForwardBatchPath = "/internal/propose-batch"
	// ForwardBatchMax bounds the items of one batch.
	ForwardBatchMax = 256
	// ForwardsInFlight bounds the batch calls a follower keeps out; more
	// than one only while full batches wait.
	ForwardsInFlight = 4
	forwardQueue     = 8192
)

// forwardItem is one write of a batch: the encoded command and the rate
// budget it draws at the leader, if any.
type forwardItem struct {
	Cmd  []byte `cbor:"1,keyasint"`
	Draw *Draw  `cbor:"2,keyasint,omitempty"`
	// RequestID is the client request's id on the follower, so that
	// both nodes log the write under it.
	RequestID string `cbor:"3,keyasint,omitempty"`
	// TimeoutMs is what was left of the caller's deadline when the item
	// was sent (0: no bound): the leader queues the write only within it
	// (serveForward).
	TimeoutMs int64 `cbor:"4,keyasint,omitempty"`
}

// forwardAnswer is the leader's answer to one item: the HTTP status a
// single forward would have had, the encoded fsm.Result with 200, else the
// error text, and the verdict on the item's draw.
type forwardAnswer struct {
	Status  int      `cbor:"1,keyasint"`
	Result  []byte   `cbor:"2,keyasint,omitempty"`
	Error   string   `cbor:"3,keyasint,omitempty"`
	Verdict *Verdict `cbor:"4,keyasint,omitempty"`
}

// pendingForward is a write waiting for its batch.
type pendingForward struct {
	ctx  context.Context
	addr string
	item forwardItem
	done chan forwardAnswer
}

// forwardBatcher sends a follower's forwards in batches (batchLoop's
// rule: one call out unless a full batch waits).
type forwardBatcher struct {
	*batchLoop[*pendingForward]
	n *Node
	// single remembers leaders that answered 404 to a batch: older
	// binaries, sent single forwards from then on.
	single sync.Map // admin address -> true
	// calls and items count batch calls made and the forwards they
	// carried (ForwardStats).
	calls, items atomic.Uint64
}

// ForwardStats reports how many batch calls this node made to a leader and
// how many forwarded writes they carried.
func (n *Node) ForwardStats() (calls, items uint64) {
	return n.forwards.calls.Load(), n.forwards.items.Load()
}

func newForwardBatcher(n *Node) *forwardBatcher {
	b := &forwardBatcher{n: n, batchLoop: newBatchLoop[*pendingForward](forwardQueue, ForwardBatchMax, ForwardsInFlight, n.stop)}
	b.batchLoop.launch = b.launch
	// A call out to a leader that died holds no forward to the next one.
	b.batchLoop.keyOf = func(p *pendingForward) string { return p.addr }
	b.batchLoop.stopped = func(backlog []*pendingForward) {
		for _, p := range backlog {
			p.done <- forwardAnswer{Status: http.StatusServiceUnavailable, Error: "node stopping"}
		}
	}
	return b
}

// run is the batcher's loop; it ends when the node stops.
func (b *forwardBatcher) run() {
	defer b.n.wg.Done()
	b.batchLoop.run()
}

// launch sends one call with the items of backlog, all bound for one
// leader address (keyOf), on its own goroutine.
func (b *forwardBatcher) launch(backlog []*pendingForward) (taken int, launched bool) {
	batch := slices.Clone(backlog)
	go func() {
		defer b.finish(batch[0].addr, len(batch))
		b.send(batch)
	}()
	return len(batch), true
}

// send delivers one batch and hands every item its answer.
func (b *forwardBatcher) send(batch []*pendingForward) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- forwardAnswer{Status: http.StatusServiceUnavailable, Error: err.Error()}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	addr := live[0].addr
	if _, old := b.single.Load(addr); old {
		b.sendSingly(live)
		return
	}
	b.calls.Add(1)
	b.items.Add(uint64(len(live)))
	answers, err := b.call(addr, live)
	if err == errNoBatchRoute {
		b.single.Store(addr, true)
		b.sendSingly(live)
		return
	}
	for i, p := range live {
		switch {
		case err != nil:
			p.done <- forwardAnswer{Status: http.StatusServiceUnavailable, Error: err.Error()}
		default:
			p.done <- answers[i]
		}
	}
}

var errNoBatchRoute = fmt.Errorf("the leader has no %s", ForwardBatchPath)

// call posts the items to addr's batch route. Its context ends when the
// last item's would: an item whose caller gave up meanwhile is still
// applied or refused like a single forward whose caller went away.
func (b *forwardBatcher) call(addr string, ps []*pendingForward) ([]forwardAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.n.cfg.ProposeTimeout)
	defer cancel()
	items := make([]forwardItem, len(ps))
	for i, p := range ps {
		items[i] = p.item
		items[i].TimeoutMs = timeoutMsOf(p.ctx)
	}
	body, err := fsm.Marshal(items)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.n.PeerURL(addr, ForwardBatchPath), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	b.n.SetPeerAuth(req)
	req.Header.Set("Content-Type", "application/cbor")
	resp, err := b.n.forwarder.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardBytes))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errNoBatchRoute
	default:
		return nil, fmt.Errorf("leader answered %d to a batch: %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var answers []forwardAnswer
	if err := fsm.Unmarshal(raw, &answers); err != nil {
		return nil, err
	}
	if len(answers) != len(ps) {
		return nil, fmt.Errorf("leader answered %d items for %d", len(answers), len(ps))
	}
	return answers, nil
}

// sendSingly forwards each item on its own (to a leader without batches).
func (b *forwardBatcher) sendSingly(ps []*pendingForward) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.done <- b.n.forwardOne(p.ctx, p.addr, p.item)
		}()
	}
	wg.Wait()
}

// ForwardBatchHandler serves ForwardBatchPath: each item as ForwardPath
// would serve it alone, all at once, answers in item order.
func (n *Node) ForwardBatchHandler() http.Handler {
	return n.InternalPost(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, maxForwardBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The count first: the items are decoded only within the bound.
		var items []forwardItem
		if l, ok := cborArrayLen(raw); !ok || l == 0 || l > ForwardBatchMax || fsm.Unmarshal(raw, &items) != nil {
			http.Error(w, fmt.Sprintf("a batch holds 1 to %d encoded forwards", ForwardBatchMax), http.StatusBadRequest)
			return
		}
		answers := make([]forwardAnswer, len(items))
		var wg sync.WaitGroup
		for i, it := range items {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = n.serveForward(r.Context(), it.Cmd, it.Draw, it.RequestID, r.RemoteAddr, it.TimeoutMs)
			}()
		}
		wg.Wait()
		out, err := fsm.Marshal(answers)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/cbor")
		_, _ = w.Write(out)
	})
}

// cborArrayLen reads the length of the definite-length CBOR array b
// begins with, so that a batch past ForwardBatchMax is refused before its
// items are decoded: each costs a forwardItem however few bytes it takes
// (4 MiB of empty items made 233 MiB).
func cborArrayLen(b []byte) (uint64, bool) {
	if len(b) == 0 || b[0]>>5 != 4 {
		return 0, false
	}
	info := b[0] & 0x1f
	if info < 24 {
		return uint64(info), true
	}
	size := 0
	switch info {
	case 24, 25, 26, 27:
		size = 1 << (info - 24)
	default:
		return 0, false // indefinite length, or not well formed
	}
	if len(b) < 1+size {
		return 0, false
	}
	var n uint64
	for _, c := range b[1 : 1+size] {
		n = n<<8 | uint64(c)
	}
	return n, true
}
