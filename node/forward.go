package node

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
)

// ForwardPath is where the leader accepts writes forwarded by followers, on
// the admin listener.
const ForwardPath = "/internal/propose"

// maxForwardBytes bounds a forwarded command (the public body limit is far
// below it).
const maxForwardBytes = 8 << 20

// forwardable are the command types a follower may forward to the leader:
// client writes, operator commands proposed by any node's admin listener,
// and a node's own housekeeping. Everything else (deposit settlements,
// payout results, oracle prints, genesis, ticks) is proposed by the
// leader's own drivers and is refused from a forward, so that a node, or
// whoever holds its credentials, cannot credit an account by forwarding a
// settlement. A new client-write command type must be added here
// (httpapi's TestEveryClientCommandIsForwardable fails until it is).
var forwardable = map[fsm.CmdType]bool{
	fsm.CmdNoop:                true,
	fsm.CmdNodeMeta:            true,
	fsm.CmdSignup:              true,
	fsm.CmdMintKey:             true,
	fsm.CmdRevokeKeys:          true,
	fsm.CmdFaucet:              true,
	fsm.CmdTouchKeys:           true,
	fsm.CmdInvoiceCreated:      true,
	fsm.CmdWithdrawalRequested: true,
	fsm.CmdMarketSet:           true,
	fsm.CmdOraclePin:           true,
	fsm.CmdOracleScript:        true,
	fsm.CmdOracleUnpin:         true,
	fsm.CmdPlaceOrder:          true,
	fsm.CmdCancelOrder:         true,
	fsm.CmdCancelAllAfter:      true,
	// USDx: client writes and operator commands. The token rail's reports
	// (CmdUSDxWithdrawalPaid, CmdUSDxFreezeApplied) are leader-only.
	fsm.CmdUSDxQuote:    true,
	fsm.CmdUSDxMint:     true,
	fsm.CmdUSDxRedeem:   true,
	fsm.CmdUSDxStake:    true,
	fsm.CmdUSDxUnstake:  true,
	fsm.CmdUSDxWithdraw: true,
	fsm.CmdUSDxFreeze:   true,
	fsm.CmdUSDxAttest:   true,
	fsm.CmdUSDxHalt:     true,
	fsm.CmdUSDxParams:   true,
	// Growth programmes: referral, leaderboard and promoter writes.
	fsm.CmdReferralCode:        true,
	fsm.CmdReferralBind:        true,
	fsm.CmdReferralClaim:       true,
	fsm.CmdLeaderboardSettings: true,
	fsm.CmdPromoterApply:       true,
	fsm.CmdPromoterCode:        true,
	fsm.CmdPromoterClaim:       true,
	fsm.CmdPromoterReview:      true, // the operator's decision
}

// Forwardable reports whether a follower may forward commands of type t.
// Commands a test registered (fsm.RegisterTestCommand) travel like client
// writes; production registers none.
func Forwardable(t fsm.CmdType) bool { return forwardable[t] || fsm.IsTestCommand(t) }

// ErrLeaderOnly means the command is applied only by the leader's own
// drivers: a follower neither forwards it nor retries it.
var ErrLeaderOnly = errors.New("leader-only command: it is proposed by the leader itself, never forwarded")

// errForwardRefused is a leader's final refusal of a forward (credentials
// or command type); retrying it cannot succeed.
var errForwardRefused = errors.New("the leader refused the forwarded write")

// forwarder sends node-to-node requests to other members' admin listeners.
type forwarder struct {
	scheme string
	client *http.Client
}

// PeerConnsPerHost bounds the connections this node holds to one other
// member's admin listener, below that listener's per-address cap
// (cluster.AdminConnsPerAddress): forwards travel in batches, so a few
// connections carry them, and a burst past the bound waits for one.
const PeerConnsPerHost = 128

func newForwarder(tc *tls.Config) *forwarder {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: PeerConnsPerHost, IdleConnTimeout: 90 * time.Second, TLSClientConfig: tc}
	scheme := "http"
	if tc != nil {
		scheme = "https"
	}
	return &forwarder{scheme: scheme, client: &http.Client{Transport: tr}}
}

// PeerURL is the URL of path on another member's admin listener.
func (n *Node) PeerURL(adminAddr, path string) string {
	return n.forwarder.scheme + "://" + adminAddr + path
}

// PeerClient is the HTTP client for other members' admin listeners: it
// presents this node's certificate when the cluster runs TLS.
func (n *Node) PeerClient() *http.Client { return n.forwarder.client }

// forward sends cmd to the leader at adminAddr through the batcher and
// waits for its answer (or ctx).
func (n *Node) forward(ctx context.Context, adminAddr string, cmd *fsm.Command) (*fsm.Result, error) {
	body, err := fsm.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	rid := RequestIDFrom(ctx)
	if rid == "" { // a node's own housekeeping: still one id on both nodes
		rid = "int-" + NewRequestID()
	}
	p := &pendingForward{ctx: ctx, addr: adminAddr, item: forwardItem{Cmd: body, RequestID: rid}, done: make(chan forwardAnswer, 1)}
	if d := drawOf(ctx); d != nil {
		c := *d
		c.verdict = nil
		p.item.Draw = &c
	}
	select {
	case n.forwards.in <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	start := time.Now()
	select {
	case a := <-p.done:
		took := time.Since(start)
		n.cfg.Logger.Log(forwardLogLevel(cmd.Type, a.Status, took), "write forwarded to leader", "request_id", rid,
			"type", cmd.Type, "leader", adminAddr, "status", a.Status, "ms", took.Milliseconds())
		return forwardOutcome(ctx, a)
	case <-ctx.Done():
		n.cfg.Logger.Info("write forward failed", "request_id", rid, "type", cmd.Type, "leader", adminAddr, "err", ctx.Err())
		return nil, ctx.Err()
	}
}

// TimeoutHeader carries a single forward's TimeoutMs (forwardItem).
const TimeoutHeader = "X-Perpd-Timeout-Ms"

// timeoutMsOf is what is left of ctx's deadline in whole milliseconds, at
// least 1; 0 when ctx has none.
func timeoutMsOf(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(dl).Milliseconds(), 1)
}

// forwardOne is one forward on its own call to ForwardPath.
func (n *Node) forwardOne(ctx context.Context, adminAddr string, it forwardItem) forwardAnswer {
	fail := func(err error) forwardAnswer {
		return forwardAnswer{Status: http.StatusServiceUnavailable, Error: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.PeerURL(adminAddr, ForwardPath), bytes.NewReader(it.Cmd))
	if err != nil {
		return fail(err)
	}
	n.SetPeerAuth(req)
	req.Header.Set("Content-Type", "application/cbor")
	req.Header.Set(RequestIDHeader, it.RequestID)
	if ms := timeoutMsOf(ctx); ms > 0 {
		req.Header.Set(TimeoutHeader, strconv.FormatInt(ms, 10))
	}
	if it.Draw != nil {
		b, err := json.Marshal(it.Draw)
		if err != nil {
			return fail(err)
		}
		req.Header.Set(DrawHeader, string(b))
	}
	resp, err := n.forwarder.client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardBytes))
	if err != nil {
		return fail(err)
	}
	a := forwardAnswer{Status: resp.StatusCode}
	if raw := resp.Header.Get(VerdictHeader); raw != "" {
		var v Verdict
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return fail(fmt.Errorf("leader's verdict: %w", err))
		}
		a.Verdict = &v
	}
	if a.Status == http.StatusOK {
		a.Result = b
	} else {
		a.Error = strings.TrimSpace(string(b))
	}
	return a
}

// forwardOutcome turns the leader's answer to a forward into the result
// or error Propose expects, recording the verdict in ctx's Draw.
func forwardOutcome(ctx context.Context, a forwardAnswer) (*fsm.Result, error) {
	d := drawOf(ctx)
	if d != nil && a.Verdict != nil {
		v := *a.Verdict
		d.verdict = &v
	}
	switch a.Status {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		if d != nil && d.verdict != nil && !d.verdict.OK {
			return nil, &RateLimitedError{Budget: d.Budget, Verdict: *d.verdict}
		}
		return nil, fmt.Errorf("leader answered 429 without a verdict: %s", a.Error)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%w: %d: %s", errForwardRefused, a.Status, a.Error)
	default:
		return nil, fmt.Errorf("leader answered %d: %s", a.Status, a.Error)
	}
	var res fsm.Result
	if err := fsm.Unmarshal(a.Result, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// CheckToken compares a bearer token with token in constant time.
func CheckToken(r *http.Request, token string) bool {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// InternalPost guards a node-to-node endpoint: POST with this cluster's
// peer credential (on top of the listener's mutual TLS when it has it).
func (n *Node) InternalPost(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := n.CheckPeer(r); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

// ForwardHandler serves ForwardPath: it applies a follower's command if this
// node leads, and answers 421 otherwise so the follower looks again. A
// command that carries a Draw (DrawHeader) is metered here first: the
// verdict goes back in VerdictHeader, with 429 and no log entry when the
// budget is empty.
func (n *Node) ForwardHandler() http.Handler {
	return n.InternalPost(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxForwardBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d, err := drawFromHeader(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		timeoutMs, _ := strconv.ParseInt(r.Header.Get(TimeoutHeader), 10, 64) // absent or bad: no bound
		a := n.serveForward(r.Context(), b, d, r.Header.Get(RequestIDHeader), r.RemoteAddr, timeoutMs)
		if a.Verdict != nil {
			if vb, err := json.Marshal(a.Verdict); err == nil {
				w.Header().Set(VerdictHeader, string(vb))
			}
		}
		if a.Status != http.StatusOK {
			http.Error(w, a.Error, a.Status)
			return
		}
		w.Header().Set("Content-Type", "application/cbor")
		_, _ = w.Write(a.Result)
	})
}

// serveForward applies one forwarded command (encoded) with its draw, as
// the leader: the answer a single forward gets, for ForwardPath and for
// each item of a ForwardBatchPath call alike.
// The follower's request id (rid) logs the write under one id on both
// nodes; a malformed one (the peer is authenticated, but still) is
// replaced. timeoutMs, when positive, is what was left of the follower's
// caller's deadline when it sent the write: past it the follower has
// answered 503 and the client may have retried elsewhere, so the write is
// queued only within it (applied late, it could land after its own retry
// was judged).
func (n *Node) serveForward(ctx context.Context, raw []byte, d *Draw, rid, from string, timeoutMs int64) forwardAnswer {
	cmd, err := fsm.DecodeCommand(raw)
	if err != nil {
		return forwardAnswer{Status: http.StatusBadRequest, Error: err.Error()}
	}
	if !Forwardable(cmd.Type) {
		return forwardAnswer{Status: http.StatusForbidden, Error: fmt.Sprintf("command type %d may not be forwarded: %v", cmd.Type, ErrLeaderOnly)}
	}
	if d != nil {
		if err := checkDraw(d); err != nil {
			return forwardAnswer{Status: http.StatusBadRequest, Error: err.Error()}
		}
		d.verdict = nil // only this leader's meter gives one
		d.forwarded = true
	}
	if !ValidRequestID(rid) {
		rid = "fwd-" + NewRequestID()
	}
	if d != nil {
		ctx = WithDraw(ctx, d)
	}
	start := time.Now()
	deadline := start.Add(n.cfg.ProposeTimeout)
	if timeoutMs > 0 && timeoutMs < n.cfg.ProposeTimeout.Milliseconds() {
		// Later than the follower's own deadline by the trip here, so a
		// retry that the client sends after its 503 reaches the queue
		// behind this write, if it was queued at all.
		deadline = start.Add(time.Duration(timeoutMs) * time.Millisecond)
	}
	res, err := n.applyLocalUntil(ctx, cmd, deadline)
	if err != nil {
		n.cfg.Logger.Info("forwarded write not applied", "request_id", rid, "type", cmd.Type, "from", from, "err", err)
	} else {
		took := time.Since(start)
		n.cfg.Logger.Log(forwardLogLevel(cmd.Type, res.Status, took), "forwarded write applied", "request_id", rid,
			"type", cmd.Type, "from", from, "index", res.Index, "status", res.Status, "ms", took.Milliseconds())
	}
	var a forwardAnswer
	if v, ok := d.Verdict(); ok {
		a.Verdict = &v
	}
	if err != nil {
		var limited *RateLimitedError
		a.Status, a.Error = http.StatusServiceUnavailable, err.Error()
		switch {
		case errors.Is(err, errNotLeader):
			a.Status = http.StatusMisdirectedRequest
		case errors.As(err, &limited):
			a.Status = http.StatusTooManyRequests
		}
		return a
	}
	out, err := fsm.Marshal(res)
	if err != nil {
		return forwardAnswer{Status: http.StatusInternalServerError, Error: err.Error()}
	}
	a.Status, a.Result = http.StatusOK, out
	return a
}

// routineCmds are the order flow: placing, canceling, refreshing the
// dead-man switch; the routes marked httpapi.Route.Routine send them.
var routineCmds = map[fsm.CmdType]bool{fsm.CmdPlaceOrder: true, fsm.CmdCancelOrder: true, fsm.CmdCancelAllAfter: true}

// SlowRoutine is the time past which a successful order-flow write is
// still logged at info.
const SlowRoutine = time.Second

// forwardLogLevel is the level of a forwarded write's log line, as the
// access log's (httpapi/reqlog.go): the order flow's successes at debug
// unless slow, everything else at info.
func forwardLogLevel(t fsm.CmdType, status int, took time.Duration) hclog.Level {
	if status >= 200 && status < 300 && took < SlowRoutine && routineCmds[t] {
		return hclog.Debug
	}
	return hclog.Info
}
