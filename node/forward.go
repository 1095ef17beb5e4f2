package node

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

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
// settlement. A new client-write command type must be added here.
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

func newForwarder(tc *tls.Config) *forwarder {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, TLSClientConfig: tc}
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

func (n *Node) forward(ctx context.Context, adminAddr string, cmd *fsm.Command) (*fsm.Result, error) {
	body, err := fsm.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.PeerURL(adminAddr, ForwardPath), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	n.SetPeerAuth(req)
	req.Header.Set("Content-Type", "application/cbor")
	rid := RequestIDFrom(ctx)
	if rid == "" { // a node's own housekeeping: still one id on both nodes
		rid = "int-" + NewRequestID()
	}
	req.Header.Set(RequestIDHeader, rid)
	if err := setDrawHeader(ctx, req); err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := n.forwarder.client.Do(req)
	if err != nil {
		n.cfg.Logger.Info("write forward failed", "request_id", rid, "type", cmd.Type, "leader", adminAddr, "err", err)
		return nil, err
	}
	n.cfg.Logger.Info("write forwarded to leader", "request_id", rid, "type", cmd.Type, "leader", adminAddr,
		"status", resp.StatusCode, "ms", time.Since(start).Milliseconds())
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardBytes))
	if err != nil {
		return nil, err
	}
	if err := readVerdict(ctx, resp); err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		if d := drawOf(ctx); d != nil && d.verdict != nil && !d.verdict.OK {
			return nil, &RateLimitedError{Budget: d.Budget, Verdict: *d.verdict}
		}
		return nil, fmt.Errorf("leader answered 429 without a verdict: %s", strings.TrimSpace(string(b)))
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%w: %d: %s", errForwardRefused, resp.StatusCode, strings.TrimSpace(string(b)))
	default:
		return nil, fmt.Errorf("leader answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var res fsm.Result
	if err := fsm.Unmarshal(b, &res); err != nil {
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
		cmd, err := fsm.DecodeCommand(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !Forwardable(cmd.Type) {
			http.Error(w, fmt.Sprintf("command type %d may not be forwarded: %v", cmd.Type, ErrLeaderOnly), http.StatusForbidden)
			return
		}
		d, err := drawFromHeader(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), n.cfg.ProposeTimeout)
		defer cancel()
		if d != nil {
			ctx = WithDraw(ctx, d)
		}
		// The follower's id, so both nodes log this write under one id; a
		// malformed one (the peer is authenticated, but still) is replaced.
		rid := r.Header.Get(RequestIDHeader)
		if !ValidRequestID(rid) {
			rid = "fwd-" + NewRequestID()
		}
		start := time.Now()
		res, err := n.applyLocal(ctx, cmd)
		writeVerdict(w, d)
		if err != nil {
			n.cfg.Logger.Info("forwarded write not applied", "request_id", rid, "type", cmd.Type, "from", r.RemoteAddr, "err", err)
		} else {
			n.cfg.Logger.Info("forwarded write applied", "request_id", rid, "type", cmd.Type, "from", r.RemoteAddr,
				"index", res.Index, "status", res.Status, "ms", time.Since(start).Milliseconds())
		}
		if err != nil {
			var limited *RateLimitedError
			status := http.StatusServiceUnavailable
			switch {
			case errors.Is(err, errNotLeader):
				status = http.StatusMisdirectedRequest
			case errors.As(err, &limited):
				status = http.StatusTooManyRequests
			}
			http.Error(w, err.Error(), status)
			return
		}
		out, err := fsm.Marshal(res)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/cbor")
		_, _ = w.Write(out)
	})
}
