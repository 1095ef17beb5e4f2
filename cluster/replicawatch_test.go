package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// fakeReplica is what one member answers the watch's fake asker: its
// applied index and its hash at any index, or err.
type fakeReplica struct {
	applied uint64
	hash    string
	err     error
}

// watchOver builds a watch comparing every `every` the members named in
// replicas (asked through a fake asker, not the network), leading when
// leads says so, logging into the returned buffer (written only by the
// goroutine that steps the watch).
func watchOver(every time.Duration, leads func() bool, replicas map[string]fakeReplica) (*ReplicaWatch, *strings.Builder) {
	var members []memberAddr
	for _, id := range []string{"node1", "node2", "node3"} {
		if _, ok := replicas[id]; ok {
			members = append(members, memberAddr{id: id, admin: id + ":9080"})
		}
	}
	ask := func(ctx context.Context, m memberAddr, index string) (StateAtView, error) {
		r := replicas[m.id]
		if r.err != nil {
			return StateAtView{}, r.err
		}
		v := StateAtView{AppliedIndex: strconv.FormatUint(r.applied, 10)}
		if index != "" {
			v.Index, v.StateHash = index, r.hash
		}
		return v, nil
	}
	logs := &strings.Builder{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	return &ReplicaWatch{every: every, leads: leads, log: log,
		compare: func(ctx context.Context) (ReplicasView, error) { return compareReplicas(ctx, members, ask), nil }}, logs
}

func always() bool { return true }

// runOnce takes a leading watch through one full interval: the step that
// sees it lead schedules the run, the step an interval later runs it.
func runOnce(t *testing.T, w *ReplicaWatch, at time.Time) ReplicaCheck {
	t.Helper()
	w.step(context.Background(), at)
	w.step(context.Background(), at.Add(w.every))
	c, ok := w.Last()
	if !ok {
		t.Fatal("a leader's run left no outcome")
	}
	return c
}

// Every member answering one hash is agreement (1), at the lowest applied
// index, and is not an error in the logs.
func TestReplicaWatchAgreement(t *testing.T) {
	w, logs := watchOver(time.Minute, always, map[string]fakeReplica{
		"node1": {applied: 40, hash: "aaaa"}, "node2": {applied: 38, hash: "aaaa"}, "node3": {applied: 41, hash: "aaaa"}})
	c := runOnce(t, w, time.Now())
	if c.Verdict != VerdictAgree || c.View.Index != "38" || w.Disagreements() != 0 {
		t.Fatalf("verdict %d at %s, %d disagreements", c.Verdict, c.View.Index, w.Disagreements())
	}
	if s := logs.String(); strings.Contains(s, "[ERROR]") || strings.Contains(s, "[WARN]") {
		t.Fatalf("agreement logged as trouble:\n%s", s)
	}
}

// Two hashes that differ are a disagreement (0), counted once per run,
// logged at ERROR with the index and every member's id and hash.
func TestReplicaWatchDisagreement(t *testing.T) {
	w, logs := watchOver(time.Minute, always, map[string]fakeReplica{
		"node1": {applied: 40, hash: "aaaa"}, "node2": {applied: 40, hash: "bbbb"}, "node3": {applied: 40, hash: "aaaa"}})
	t0 := time.Now()
	c := runOnce(t, w, t0)
	if c.Verdict != VerdictDisagree || w.Disagreements() != 1 {
		t.Fatalf("verdict %d, %d disagreements", c.Verdict, w.Disagreements())
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "[ERROR]") {
			line = l
		}
	}
	for _, want := range []string{"index=40", "node1=aaaa", "node2=bbbb", "node3=aaaa"} {
		if !strings.Contains(line, want) {
			t.Errorf("ERROR line %q lacks %s", line, want)
		}
	}
	w.step(context.Background(), t0.Add(2*w.every))
	if w.Disagreements() != 2 {
		t.Fatalf("a second disagreeing run: %d disagreements", w.Disagreements())
	}
}

// A member that cannot be asked leaves the outcome unknown (-1), logged at
// WARN naming it; unless two others already differ, which is a
// disagreement whatever the silent one would say.
func TestReplicaWatchUnreachableMember(t *testing.T) {
	refused := errors.New("dial tcp node3:9080: connection refused")
	w, logs := watchOver(time.Minute, always, map[string]fakeReplica{
		"node1": {applied: 40, hash: "aaaa"}, "node2": {applied: 40, hash: "aaaa"}, "node3": {err: refused}})
	c := runOnce(t, w, time.Now())
	if c.Verdict != VerdictUnknown || w.Disagreements() != 0 {
		t.Fatalf("verdict %d, %d disagreements", c.Verdict, w.Disagreements())
	}
	if s := logs.String(); !strings.Contains(s, "[WARN]") || !strings.Contains(s, "member=node3") || strings.Contains(s, "[ERROR]") {
		t.Fatalf("logs:\n%s", s)
	}

	w, _ = watchOver(time.Minute, always, map[string]fakeReplica{
		"node1": {applied: 40, hash: "aaaa"}, "node2": {applied: 40, hash: "bbbb"}, "node3": {err: refused}})
	if c := runOnce(t, w, time.Now()); c.Verdict != VerdictDisagree || w.Disagreements() != 1 {
		t.Fatalf("two differing hashes and a silent member: verdict %d, %d disagreements", c.Verdict, w.Disagreements())
	}

	w, _ = watchOver(time.Minute, always, map[string]fakeReplica{"node1": {err: refused}, "node2": {err: refused}})
	if c := runOnce(t, w, time.Now()); c.Verdict != VerdictUnknown || c.View.Index != "" {
		t.Fatalf("nobody answered: verdict %d at %q", c.Verdict, c.View.Index)
	}

	w, _ = watchOver(time.Minute, always, nil)
	w.compare = func(context.Context) (ReplicasView, error) { return ReplicasView{}, errors.New("raft: shutdown") }
	if c := runOnce(t, w, time.Now()); c.Verdict != VerdictUnknown {
		t.Fatalf("members unknown: verdict %d", c.Verdict)
	}
}

// A follower never compares and reports nothing; a leader compares an
// interval after it comes to lead and every interval after; a node that
// stops leading forgets its outcome, so only the current leader has one.
func TestReplicaWatchRunsOnTheLeaderOnly(t *testing.T) {
	var leading atomic.Bool
	w, _ := watchOver(time.Minute, leading.Load, map[string]fakeReplica{"node1": {applied: 9, hash: "aaaa"}})
	inner := w.compare
	runs := 0
	w.compare = func(ctx context.Context) (ReplicasView, error) { runs++; return inner(ctx) }
	ctx, t0 := context.Background(), time.Now()
	for i := range 5 {
		w.step(ctx, t0.Add(time.Duration(i)*w.every))
	}
	if _, ok := w.Last(); ok || runs != 0 {
		t.Fatalf("a follower compared: %d runs", runs)
	}

	leading.Store(true)
	t1 := t0.Add(10 * w.every)
	w.step(ctx, t1)
	w.step(ctx, t1.Add(w.every-time.Millisecond))
	if runs != 0 {
		t.Fatalf("compared %d times within an interval of coming to lead", runs)
	}
	w.step(ctx, t1.Add(w.every))
	w.step(ctx, t1.Add(w.every+time.Second))
	w.step(ctx, t1.Add(2*w.every))
	if c, ok := w.Last(); !ok || c.Verdict != VerdictAgree || runs != 2 {
		t.Fatalf("leader: %d runs, last %+v %v", runs, c, ok)
	}

	leading.Store(false)
	w.step(ctx, t1.Add(3*w.every))
	if _, ok := w.Last(); ok || runs != 2 {
		t.Fatalf("a node that stopped leading still reports (%d runs)", runs)
	}
	leading.Store(true)
	w.step(ctx, t1.Add(4*w.every))
	if _, ok := w.Last(); ok || runs != 2 {
		t.Fatal("a new stretch as leader reported the last stretch's outcome")
	}
}

// A run is bounded: a member that never answers is given up on when the
// run's time is up, and the run is unknown.
func TestReplicaWatchRunIsBounded(t *testing.T) {
	w, _ := watchOver(50*time.Millisecond, always, map[string]fakeReplica{"node1": {applied: 9, hash: "aaaa"}})
	w.compare = func(ctx context.Context) (ReplicasView, error) {
		hang := func(ctx context.Context, m memberAddr, index string) (StateAtView, error) {
			<-ctx.Done()
			return StateAtView{}, ctx.Err()
		}
		return compareReplicas(ctx, []memberAddr{{id: "node1"}, {id: "node2"}}, hang), nil
	}
	start := time.Now()
	c := runOnce(t, w, start)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a run took %v", took)
	}
	if c.Verdict != VerdictUnknown || !strings.Contains(c.View.Members[0].Error, "deadline") {
		t.Fatalf("hung members: %+v", c)
	}
}

// Run drives the schedule from its own ticker until its context ends.
func TestReplicaWatchRunLoop(t *testing.T) {
	w, _ := watchOver(20*time.Millisecond, always, map[string]fakeReplica{"node1": {applied: 9, hash: "aaaa"}})
	var runs atomic.Int32
	inner := w.compare
	w.compare = func(ctx context.Context) (ReplicasView, error) { runs.Add(1); return inner(ctx) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for runs.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if runs.Load() < 2 {
		t.Fatalf("%d runs in 10 s at a 20 ms interval", runs.Load())
	}
	if c, ok := w.Last(); !ok || c.Verdict != VerdictAgree {
		t.Fatalf("last %+v %v", c, ok)
	}
}

// A leader deposed while a run is under way (a run takes tens of seconds at
// scale) stops reporting within leaderPoll all the same, though the run's
// step does not come round to forget the outcome until the run ends.
func TestReplicaWatchDeposedMidRunStopsReporting(t *testing.T) {
	var leading atomic.Bool
	leading.Store(true)
	w, _ := watchOver(20*time.Millisecond, leading.Load, map[string]fakeReplica{"node1": {applied: 9, hash: "aaaa"}})
	inner := w.compare
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	w.compare = func(ctx context.Context) (ReplicasView, error) {
		if runs.Add(1) == 2 {
			close(started)
			<-release
		}
		return inner(ctx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no second run")
	}
	if _, ok := w.Last(); !ok {
		t.Fatal("the leader reports no outcome of its first run")
	}
	leading.Store(false)
	time.Sleep(leaderPoll + leaderPoll/2)
	if c, ok := w.Last(); ok {
		t.Errorf("deposed for %v during a run, still reports %+v", leaderPoll+leaderPoll/2, c)
	}
	close(release)
}
