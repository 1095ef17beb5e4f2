package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

// lossyCluster is a 3-node cluster whose handlers, when armed, lose the
// answer of their first proposal, move leadership elsewhere, and propose
// the same command again: what the node does after a leader change or a
// dropped forward whose write was applied anyway.
type lossyCluster struct {
	*clustertest.Cluster
	armed   atomic.Bool
	dropped atomic.Int32
	nodes   atomic.Pointer[[]*node.Node]
}

func startLossy(t *testing.T) *lossyCluster {
	lc := &lossyCluster{}
	lc.nodes.Store(&[]*node.Node{})
	assemble := func(n *node.Node, log hclog.Logger) (*cluster.AdminServer, *httpapi.Server, error) {
		key, err := rail.NewNodeKey(nil)
		if err != nil {
			return nil, nil, err
		}
		r, err := rail.NewSimRail(rail.SimConfig{Network: httpapi.RailNetwork(n.Config().Deployment), NodeKey: key})
		if err != nil {
			return nil, nil, err
		}
		all := append(append([]*node.Node(nil), *lc.nodes.Load()...), n)
		lc.nodes.Store(&all)
		hook := func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
			if !lc.armed.CompareAndSwap(true, false) {
				return n.Propose(ctx, cmd)
			}
			if _, err := n.Propose(ctx, cmd); err != nil {
				return nil, err
			}
			lc.dropped.Add(1) // the answer is lost
			if err := lc.moveLeader(n); err != nil {
				return nil, err
			}
			return n.Propose(ctx, cmd)
		}
		return cluster.NewAdminServer(n), httpapi.New(n, log.Named("http"), httpapi.WithRail(r), httpapi.WithProposer(hook)), nil
	}
	lc.Cluster = clustertest.Start(t, 3, clustertest.Assemble(assemble))
	return lc
}

// moveLeader transfers leadership away and waits until n knows a leader
// of a later term. (The old leader may win that term back: raft does not
// promise a transfer sticks, and the retry does not need it to.)
func (lc *lossyCluster) moveLeader(n *node.Node) error {
	term := n.Raft.CurrentTerm()
	for _, m := range *lc.nodes.Load() {
		if m.IsLeader() {
			if err := m.Raft.LeadershipTransfer().Error(); err != nil {
				return err
			}
		}
	}
	if !clustertest.Poll(10*time.Second, func() bool {
		_, id := n.Raft.LeaderWithID()
		return id != "" && n.Raft.CurrentTerm() > term
	}) {
		return errors.New("no leader of a later term after the transfer")
	}
	return nil
}

// TestRetriedSignupAndMintStillReturnTheKey: a signup and a session mint
// whose first answer is lost across a leader change come back from the
// node's retry as replays; the client still gets the key, and it works.
func TestRetriedSignupAndMintStillReturnTheKey(t *testing.T) {
	lc := startLossy(t)
	via := lc.HTTP(lc.Followers()[0].ID)

	lc.armed.Store(true)
	st, h, body := call(t, via, "POST", "/v1/signup", "", "lossy-signup", "{}")
	if lc.dropped.Load() != 1 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the first answer was not lost and replayed (dropped %d, replayed %q): %d %s", lc.dropped.Load(), h.Get("Idempotent-Replayed"), st, body)
	}
	var su struct{ APIKey, AccountID string }
	_ = json.Unmarshal(body, &su)
	if st != 201 || !strings.HasPrefix(su.APIKey, "pdk_") {
		t.Fatalf("a retried signup lost its key: %d %s", st, body)
	}
	idx := h.Get("X-Raft-Index")
	if st, _, b := call(t, via, "GET", "/v1/account", su.APIKey, "", "", "X-Min-Index", idx); st != 200 || !strings.Contains(string(b), su.AccountID) {
		t.Fatalf("the returned master key does not work: %d %s", st, b)
	}

	lc.armed.Store(true)
	st, h, body = call(t, via, "POST", "/v1/sessions", su.APIKey, "lossy-mint", `{"scopes":["read"]}`)
	if lc.dropped.Load() != 2 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the mint's answer was not lost and replayed: %d %s", st, body)
	}
	var mint struct{ APIKey, KeyID string }
	_ = json.Unmarshal(body, &mint)
	if st != 201 || !strings.HasPrefix(mint.APIKey, "pdk_") {
		t.Fatalf("a retried mint lost its key: %d %s", st, body)
	}
	if st, _, b := call(t, via, "GET", "/v1/account", mint.APIKey, "", "", "X-Min-Index", h.Get("X-Raft-Index")); st != 200 || !strings.Contains(string(b), su.AccountID) {
		t.Fatalf("the minted key does not work: %d %s", st, b)
	}

	// Someone else sending the same requests again gets no key.
	st, _, body = call(t, via, "POST", "/v1/signup", "", "lossy-signup", "{}")
	if st != 409 || strings.Contains(string(body), "apiKey") || !strings.Contains(string(body), "fresh random idempotency-key") {
		t.Fatalf("another client's replayed signup: %d %s", st, body)
	}
	st, _, body = call(t, via, "POST", "/v1/sessions", su.APIKey, "lossy-mint", `{"scopes":["read"]}`)
	if st != 201 || strings.Contains(string(body), "apiKey") || !strings.Contains(string(body), mint.KeyID) {
		t.Fatalf("another request's replayed mint: %d %s", st, body)
	}
}
