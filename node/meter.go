package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate budgets drawn at the leader (issue 10). Every write reaches the
// leader, so a budget drawn there, just before raft.Apply, holds for the
// whole cluster: a key spreading its writes over N nodes gets one budget,
// not N. The public API sizes and keeps the buckets (it installs a Meter);
// the node carries the request (a Draw) from the receiving node to the
// leader with the write and the answer (a Verdict) back.

// DrawHeader carries a forwarded write's Draw (JSON) to the leader.
const DrawHeader = "X-Perpd-Draw"

// VerdictHeader carries the leader's Verdict (JSON) back with the answer
// to a forwarded write that carried a Draw.
const VerdictHeader = "X-Perpd-Verdict"

// MeterPath is where the leader reports the tokens left in budgets
// (without drawing), for a follower's GET /v1/limits, on the admin
// listener.
const MeterPath = "/internal/meter"

// Draw asks for one token of a rate budget before a write enters the log.
type Draw struct {
	// ID names the client request: the node's retries of one request
	// carry the same ID and draw once.
	ID      string `json:"id"`
	Budget  string `json:"budget"`
	Subject string `json:"subject"`           // "key:<id>" or "ip:<address>"
	Account string `json:"account,omitempty"` // also draws the account's bucket

	verdict *Verdict
	// forwarded marks a draw that came from a follower: its retries
	// arrive as new Draws, so the leader remembers admissions by ID.
	forwarded bool
}

// Verdict is the outcome of a Draw, with what the rate headers need.
type Verdict struct {
	OK           bool  `json:"ok"`
	Limit        int   `json:"limit"` // per-minute limit of the binding bucket
	Remaining    int   `json:"remaining"`
	ResetUnix    int64 `json:"reset"`
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
}

// Verdict returns the leader's verdict on d once a proposal carrying it
// reached a leader that meters; ok is false before that (or when the
// leader runs no meter).
func (d *Draw) Verdict() (Verdict, bool) {
	if d == nil || d.verdict == nil {
		return Verdict{}, false
	}
	return *d.verdict, true
}

// Meter keeps the token buckets the leader draws from.
type Meter interface {
	// Take draws one token of d's budget for its subject (and account):
	// both or neither.
	Take(d Draw) Verdict
	// Remaining reports the tokens left in d's budget without drawing.
	Remaining(d Draw) int
}

// SetMeter installs the meter this node draws from while it leads.
// Without one, writes carrying a Draw pass unmetered.
func (n *Node) SetMeter(m Meter) { n.meter.Store(&m) }

type drawCtxKey struct{}

// WithDraw attaches d to ctx: a Propose under the returned context draws
// d at the leader before the command enters the log, and records the
// verdict in d.
func WithDraw(ctx context.Context, d *Draw) context.Context {
	return context.WithValue(ctx, drawCtxKey{}, d)
}

func drawOf(ctx context.Context) *Draw {
	d, _ := ctx.Value(drawCtxKey{}).(*Draw)
	return d
}

// RateLimitedError is a write the leader's meter refused: it never
// reached the log. Propose does not retry it.
type RateLimitedError struct {
	Budget  string
	Verdict Verdict
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("the %s budget is empty; retry after %d ms", e.Budget, e.Verdict.RetryAfterMs)
}

// drawMemory is how long the leader remembers an admitted draw, so that
// the node's retries of the same request (each within ProposeTimeout of
// its start) are not charged again.
func (n *Node) drawMemory() time.Duration { return 2 * n.cfg.ProposeTimeout }

// maxRememberedDraws bounds the memory of admitted draws; past it the
// older half is forgotten early (a retry of one of those then draws
// again).
const maxRememberedDraws = 1 << 17

// draws remembers the verdicts of admitted forwarded draws by request ID,
// in two generations: a verdict lives in cur, then in old, so it is kept
// for at least keep and at most twice that, with no allocation per draw
// beyond its map slot. Only forwarded draws need it: a node's retry of
// its own client's request carries the same *Draw, which holds its
// verdict.
type draws struct {
	mu       sync.Mutex
	cur, old map[string]Verdict
	since    time.Time // when cur began
}

// take returns the remembered verdict of id, or draws with take and
// remembers an admission.
func (ds *draws) take(id string, now time.Time, keep time.Duration, take func() Verdict) Verdict {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.cur == nil || now.Sub(ds.since) >= keep || len(ds.cur) >= maxRememberedDraws/2 {
		ds.old, ds.cur, ds.since = ds.cur, make(map[string]Verdict), now
	}
	if id != "" {
		if v, ok := ds.cur[id]; ok {
			return v
		}
		if v, ok := ds.old[id]; ok {
			return v
		}
	}
	v := take()
	if v.OK && id != "" {
		ds.cur[id] = v
	}
	return v
}

// size is the number of verdicts remembered (both generations).
func (ds *draws) size() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return len(ds.cur) + len(ds.old)
}

// gate draws the Draw attached to ctx, if any, on this node's meter. It
// runs on the leader just before raft.Apply, for its own clients' writes
// and for forwarded ones alike; a refusal never reaches the log. A retry
// of this node's own client's request that was admitted is not charged
// again.
func (n *Node) gate(ctx context.Context) error {
	d := drawOf(ctx)
	if d == nil {
		return nil
	}
	mp := n.meter.Load()
	if mp == nil {
		return nil
	}
	m := *mp
	var v Verdict
	switch {
	case d.forwarded:
		v = n.draws.take(d.ID, time.Now(), n.drawMemory(), func() Verdict { return m.Take(*d) })
	case d.verdict != nil && d.verdict.OK:
		return nil
	default:
		v = m.Take(*d)
	}
	d.verdict = &v
	if !v.OK {
		return &RateLimitedError{Budget: d.Budget, Verdict: v}
	}
	return nil
}

// drawFromHeader reads a forwarded write's Draw; nil when it carries none.
func drawFromHeader(r *http.Request) (*Draw, error) {
	raw := r.Header.Get(DrawHeader)
	if raw == "" {
		return nil, nil
	}
	var d Draw
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return nil, fmt.Errorf("bad %s: %w", DrawHeader, err)
	}
	if err := checkDraw(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// checkDraw refuses a forwarded Draw without its budget or subject.
func checkDraw(d *Draw) error {
	if d.Budget == "" || d.Subject == "" {
		return fmt.Errorf("bad %s: budget and subject are required", DrawHeader)
	}
	return nil
}

// maxMeterBody bounds a budget report request and answer.
const maxMeterBody = 64 << 10

// maxPeekDraws bounds the budgets one report asks about.
const maxPeekDraws = 16

// ErrNoMeter means the leader runs no meter, so there is nothing to report.
var ErrNoMeter = errors.New("the leader keeps no rate budgets")

// Remaining reports the tokens left in each of ds's budgets as the meter
// that draws them sees it: this node's while it leads, else the leader's.
func (n *Node) Remaining(ctx context.Context, ds []Draw) ([]int, error) {
	if n.IsLeader() {
		return n.remainingLocal(ds)
	}
	meta := n.leaderMeta()
	if meta == nil || meta.Admin == "" {
		return nil, errors.New("leader unknown")
	}
	body, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.PeerURL(meta.Admin, MeterPath), strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	n.SetPeerAuth(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.forwarder.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMeterBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("leader %s answered %d: %s", meta.ID, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var out []int
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("budget report: %w", err)
	}
	if len(out) != len(ds) {
		return nil, fmt.Errorf("budget report: %d figures for %d budgets", len(out), len(ds))
	}
	return out, nil
}

func (n *Node) remainingLocal(ds []Draw) ([]int, error) {
	mp := n.meter.Load()
	if mp == nil {
		return nil, ErrNoMeter
	}
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = (*mp).Remaining(d)
	}
	return out, nil
}

// MeterHandler serves MeterPath: the leader reports the tokens left in the
// budgets asked about ([]Draw in, []int out); any other node answers 421.
func (n *Node) MeterHandler() http.Handler {
	return n.InternalPost(func(w http.ResponseWriter, r *http.Request) {
		if !n.IsLeader() {
			http.Error(w, errNotLeader.Error(), http.StatusMisdirectedRequest)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxMeterBody))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ds []Draw
		if err := json.Unmarshal(b, &ds); err != nil || len(ds) > maxPeekDraws {
			http.Error(w, "want a JSON array of at most "+strconv.Itoa(maxPeekDraws)+" budgets", http.StatusBadRequest)
			return
		}
		out, err := n.remainingLocal(ds)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
