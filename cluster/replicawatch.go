package cluster

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The replica watch: the comparison GET /admin/replicas makes, run by the
// leader on a schedule, so a diverged replica shows on a metric an
// operator alerts on instead of waiting for someone to ask. Only the
// leader runs it (one node's work per cluster, and the answer lives where
// an operator looks first). It asks the members the way the admin route
// does, over the peer credential. Each member computes its hash on its
// snapshot shadow, so a run never stalls apply; it reads the live state
// only for a moment, to look up the members' admin addresses.

// Bounds of the scheduled comparison.
const (
	// DefaultReplicaCheckInterval is serve's --replica-check-interval.
	DefaultReplicaCheckInterval = 10 * time.Minute
	// MinReplicaCheckInterval is the shortest interval serve accepts: a
	// run asks every member twice and may replay its log to the compared
	// index, and a divergence does not heal by itself, so a shorter
	// interval buys load, not information.
	MinReplicaCheckInterval = 10 * time.Second
)

// Verdict is one comparison's outcome, as perpd_replicas_check_agree
// reports it.
type Verdict int

const (
	// VerdictUnknown: a member could not be asked, or none answered.
	VerdictUnknown Verdict = -1
	// VerdictDisagree: two members answered different hashes at one index.
	VerdictDisagree Verdict = 0
	// VerdictAgree: every member answered, all with one hash.
	VerdictAgree Verdict = 1
)

// ReplicaCheck is one scheduled comparison.
type ReplicaCheck struct {
	At      time.Time // when it ended
	View    ReplicasView
	Verdict Verdict
}

// ReplicaWatch runs the comparison every interval while this node leads
// (Run) and keeps its latest outcome (Last) and a count of the runs that
// found the members disagreeing (Disagreements). A node that does not lead
// has no latest outcome, so only the current leader reports one.
type ReplicaWatch struct {
	every   time.Duration
	leads   func() bool
	compare func(ctx context.Context) (ReplicasView, error)
	log     hclog.Logger

	// due is when the next run starts; zero while this node does not
	// lead. Only Run's goroutine touches it.
	due time.Time

	mu            sync.Mutex
	last          *ReplicaCheck
	disagreements uint64
}

// NewReplicaWatch builds the watch of s's node, comparing every `every`
// while the node leads.
func NewReplicaWatch(s *AdminServer, every time.Duration, log hclog.Logger) *ReplicaWatch {
	return &ReplicaWatch{every: every, leads: s.n.IsLeader, compare: s.replicas, log: log}
}

// leaderPoll is how often the watch looks whether this node leads: a node
// that lost leadership stops reporting within it.
const leaderPoll = time.Second

// Run looks at the schedule every leaderPoll until ctx ends.
func (w *ReplicaWatch) Run(ctx context.Context) {
	t := time.NewTicker(min(leaderPoll, w.every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			w.step(ctx, now)
		}
	}
}

// Last returns the latest comparison this node ran in its current stretch
// as leader; false on a follower and on a leader before its first. It
// asks whether the node leads itself: step forgets the outcome only
// between runs, and a run (tens of seconds at scale) deposed midway would
// leave the old leader reporting beside the new one until it ended.
func (w *ReplicaWatch) Last() (ReplicaCheck, bool) {
	if !w.leads() {
		return ReplicaCheck{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		return ReplicaCheck{}, false
	}
	return *w.last, true
}

// Disagreements counts the runs that found two hashes differing, since the
// process started.
func (w *ReplicaWatch) Disagreements() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.disagreements
}

// step decides, at now, what the schedule asks for. A node that does not
// lead forgets its last outcome (the next leader's is the one that
// counts). A node that has just come to lead runs its first comparison an
// interval later, not at once: right after an election the members are
// still settling (one that just joined may not have recorded its admin
// address yet), so a run at once would mostly report members it could not
// ask. A leader whose run is due runs it.
func (w *ReplicaWatch) step(ctx context.Context, now time.Time) {
	if !w.leads() {
		w.due = time.Time{}
		w.mu.Lock()
		w.last = nil
		w.mu.Unlock()
		return
	}
	if w.due.IsZero() {
		w.due = now.Add(w.every)
		return
	}
	if now.Before(w.due) {
		return
	}
	w.due = now.Add(w.every)
	w.record(w.check(ctx))
}

// replicaCheckTimeout bounds one run (and never more than the interval,
// so a run ends before the next is due): the index round (at most 5 s),
// then the hashes, which at scale take tens of seconds (askPeer). A run
// cut short leaves its hashes computing on the members, remembered for
// the next ask (node/statehash.go), never queued behind each other.
const replicaCheckTimeout = 60 * time.Second

// check runs one comparison within its bound and judges it.
func (w *ReplicaWatch) check(ctx context.Context) ReplicaCheck {
	ctx, cancel := context.WithTimeout(ctx, min(replicaCheckTimeout, w.every))
	defer cancel()
	v, err := w.compare(ctx)
	c := ReplicaCheck{At: time.Now(), View: v, Verdict: verdict(v)}
	if err != nil {
		c.Verdict = VerdictUnknown
		w.log.Warn("replica check: could not list the members", "err", err)
	}
	return c
}

// record keeps c as the latest outcome and logs it: a member that could
// not be asked at WARN, a disagreement at ERROR with every member's hash.
// Errors are the members' answers or transport errors, which carry no
// credential (the peer credential travels in a header).
func (w *ReplicaWatch) record(c ReplicaCheck) {
	w.mu.Lock()
	w.last = &c
	if c.Verdict == VerdictDisagree {
		w.disagreements++
	}
	w.mu.Unlock()
	for _, m := range c.View.Members {
		if m.Error != "" {
			w.log.Warn("replica check: a member could not be asked", "member", m.ID, "index", c.View.Index, "err", m.Error)
		}
	}
	switch c.Verdict {
	case VerdictDisagree:
		w.log.Error("replicas disagree: state hashes differ at one index (docs/deploy.md, When a node dies)",
			"index", c.View.Index, "hashes", memberHashes(c.View.Members))
	case VerdictAgree:
		w.log.Debug("replicas agree", "index", c.View.Index, "members", len(c.View.Members))
	}
}

// verdict judges a comparison. Two answered hashes that differ are a
// disagreement whatever else happened: a silent member cannot make them
// agree. Otherwise a member without a hash leaves the outcome unknown.
func verdict(v ReplicasView) Verdict {
	seen := ""
	for _, m := range v.Members {
		if m.StateHash == "" {
			continue
		}
		if seen != "" && m.StateHash != seen {
			return VerdictDisagree
		}
		seen = m.StateHash
	}
	if v.Agree {
		return VerdictAgree
	}
	return VerdictUnknown
}

// memberHashes is "id=hash ..." for a log line, in the members' order;
// a member without a hash shows "-".
func memberHashes(ms []ReplicaMember) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		h := m.StateHash
		if h == "" {
			h = "-"
		}
		parts[i] = m.ID + "=" + h
	}
	return strings.Join(parts, " ")
}
