package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/perpd/perpd/internal/testlog"
)

// A randomized hunt over the guard's handling of a deposed leader's stale
// entries (snapguard.go: dropUnvouched, the snapshot's point, the held
// snapshot, the append handed over from a snapshot's point). Each round
// starts three guarded rafts on in-memory transports and node.New's log
// store (raft-boltdb), and runs one to three cycles of: maybe hand the
// leadership on, or remove a follower, snapshot past it and add it back; cut
// off the leader (or, sometimes, a follower) while it appends 0-60 entries
// nobody commits; let the others elect a leader that writes until its
// snapshot lands below, at or past the stale tail, snapshots with few or no
// trailing entries and writes on; heal, sometimes cutting it off again
// mid catch-up, sometimes restarting it on its stores (node.New's start rule
// included) while cut off or catching up; sometimes a member snapshots on
// its own after, with few or no trailing entries. At random moments (during
// catch-up, after a restart, after a re-add, after a member's own snapshot)
// the leader re-sends one of its snapshots, its newest or an older one its
// file store keeps, to a follower over the raw transport, and sometimes the
// appends from that snapshot's point that follow (resend): the follower may
// lack it, hold it in its log, or have snapshotted past it itself. After
// each cycle every member must have applied the same entries (a hash chain
// over index and data) and never restored a state older than one it had,
// each member caught up with at most one snapshot install per catch-up
// (besides those a resent snapshot made), every configuration lists all
// three, and every entry a member stores must be the committed one,
// except, at or below its latest snapshot, a snapshot's point of the
// committed entry's term.
//
// PERPD_SNAPPOINT_SEED=n starts from round seed n, PERPD_SNAPPOINT_ROUNDS=k
// runs k rounds (1 to replay one: the same choices, not the same timing),
// PERPD_SNAPPOINT_BUDGET=5m runs longer, PERPD_SNAPPOINT_LOG=n prints n
// lines of the rafts' logs on failure.
func TestSnapshotPointStress(t *testing.T) {
	seed := time.Now().UnixNano() % 1_000_000_007
	rounds, budget := 1000, 30*time.Second
	if testing.Short() {
		rounds, budget = 4, 5*time.Second
	}
	if v := os.Getenv("PERPD_SNAPPOINT_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &seed); err != nil {
			t.Fatal(err)
		}
	}
	if v := os.Getenv("PERPD_SNAPPOINT_ROUNDS"); v != "" {
		if _, err := fmt.Sscan(v, &rounds); err != nil {
			t.Fatal(err)
		}
	}
	if v := os.Getenv("PERPD_SNAPPOINT_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		budget = d
	}
	t.Logf("base seed %d", seed)
	start := time.Now()
	seen := make(map[string]int)
	done := 0
	for i := range rounds {
		if done > 0 && time.Since(start) > budget {
			break
		}
		stressRound(t, seed+int64(i), seen)
		done++
	}
	var cover []string
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		cover = append(cover, fmt.Sprintf("%s %d", k, seen[k]))
	}
	t.Logf("%d rounds in %v: %s", done, time.Since(start).Round(time.Millisecond), strings.Join(cover, ", "))
}

// chainFSM folds every applied entry's index and data into a hash chain, so
// two members that applied different entries (or the same in another
// order) differ. A snapshot carries the chain.
type chainFSM struct {
	mu       sync.Mutex
	n        uint64
	last     uint64
	sum      [32]byte
	odd      []string // applies that must not happen
	restores atomic.Int32
}

func (f *chainFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if IsSnapshotPoint(l) || l.Type != raft.LogCommand {
		f.odd = append(f.odd, fmt.Sprintf("applied entry %d of type %s (%q)", l.Index, l.Type, l.Data))
	}
	if l.Index <= f.last {
		f.odd = append(f.odd, fmt.Sprintf("applied entry %d after entry %d", l.Index, f.last))
	}
	h := sha256.New()
	h.Write(f.sum[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], l.Index)
	h.Write(b[:])
	h.Write(l.Data)
	copy(f.sum[:], h.Sum(nil))
	f.n++
	f.last = l.Index
	return nil
}

func (f *chainFSM) state() (n uint64, sum [32]byte, odd []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.sum, append([]string(nil), f.odd...)
}

func (f *chainFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s chainSnap
	binary.BigEndian.PutUint64(s[0:], f.n)
	binary.BigEndian.PutUint64(s[8:], f.last)
	copy(s[16:], f.sum[:])
	return s, nil
}

func (f *chainFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s chainSnap
	if _, err := io.ReadFull(rc, s[:]); err != nil {
		return err
	}
	f.mu.Lock()
	if last := binary.BigEndian.Uint64(s[8:]); last < f.last {
		f.odd = append(f.odd, fmt.Sprintf("restored a snapshot of entry %d after applying entry %d: the state went back", last, f.last))
	}
	f.n = binary.BigEndian.Uint64(s[0:])
	f.last = binary.BigEndian.Uint64(s[8:])
	copy(f.sum[:], s[16:])
	f.mu.Unlock()
	f.restores.Add(1)
	return nil
}

type chainSnap [48]byte

func (s chainSnap) Persist(sink raft.SnapshotSink) error { return persistBytes(sink, s[:]) }

func (chainSnap) Release() {}

// spPeer is one member; its data directory and snapshot store outlive a
// restart of its raft (the log store is closed and opened again).
type spPeer struct {
	id       raft.ServerID
	raw      *raft.InmemTransport
	dir      string
	store    *raftboltdb.BoltStore // node.New's (raft.InmemStore's bounds break when raft compacts an empty log)
	logs     raft.LogStore         // the cache raft and the guard share, as in node.New
	snaps    raft.SnapshotStore
	fsm      *chainFSM
	r        *raft.Raft
	trailing uint64
	cut      bool
	// installs before the current raft, and the restores its start made.
	pastInstalls, startRestores int32
	// resent counts installs a resent snapshot (resend) made: a follower
	// that lacked the snapshot installs it, once more than its catch-up.
	resent int32
}

// installs counts snapshots installed from a leader, over restarts.
func (p *spPeer) installs() int32 {
	return p.pastInstalls + p.fsm.restores.Load() - p.startRestores
}

// syncBuf collects the rafts' logs of a round, printed on failure.
type syncBuf struct{ testlog.Buffer }

// tail is the last lines logged.
func (s *syncBuf) tail(lines int) string {
	all := strings.Split(strings.TrimRight(s.String(), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

type spCluster struct {
	t         *testing.T
	seed      int64
	rng       *rand.Rand
	peers     []*spPeer
	maxAppend int
	logs      syncBuf
	trace     []string
	oracle    map[uint64]raft.Log // committed entries, from leaders' logs
	seq       int
	seen      map[string]int // what the rounds covered
}

func (c *spCluster) note(format string, args ...any) {
	c.trace = append(c.trace, fmt.Sprintf(format, args...))
}

func (c *spCluster) fail(format string, args ...any) {
	c.t.Helper()
	var st []string
	for _, p := range c.peers {
		n, _, _ := p.fsm.state()
		first, _ := p.logs.FirstIndex()
		lastStored, _ := p.logs.LastIndex()
		st = append(st, fmt.Sprintf("  %s: %s term %d last %d (log %d..%d) commit %d applied %d fsm %d installs %d",
			p.id, p.r.State(), p.r.CurrentTerm(), p.r.LastIndex(), first, lastStored, p.r.CommitIndex(), p.r.AppliedIndex(), n, p.installs()))
	}
	c.t.Fatalf("round seed %d (replay: PERPD_SNAPPOINT_SEED=%d PERPD_SNAPPOINT_ROUNDS=1): %s\nsteps:\n  %s\nmembers:\n%s\nraft logs (tail):\n%s",
		c.seed, c.seed, fmt.Sprintf(format, args...), strings.Join(c.trace, "\n  "), strings.Join(st, "\n"), c.logs.tail(logLines()))
}

// start opens p's log store and runs its raft on its stores, as node.New
// does: NewRaft, then the entries the restored snapshot replaced go, then
// the guard passes RPCs.
func (c *spCluster) start(p *spPeer) {
	store, err := openLogStore(filepath.Join(p.dir, "raft.db"))
	if err != nil {
		c.t.Fatal(err)
	}
	p.store = store
	rc := fastRaftConfig(p.id, hclog.New(&hclog.LoggerOptions{Name: string(p.id), Output: &c.logs, Level: hclog.Info}), p.trailing)
	rc.MaxAppendEntries = c.maxAppend
	logs, err := raft.NewLogCache(64, p.store)
	if err != nil {
		c.t.Fatal(err)
	}
	p.logs = logs
	guard := newSnapshotGuard(p.raw, rc.Logger)
	r, err := raft.NewRaft(rc, p.fsm, logs, p.store, p.snaps, guard)
	if err != nil {
		c.fail("start %s: %v", p.id, err)
	}
	p.r = r
	p.startRestores = p.fsm.restores.Load()
	if idx, term, ok := lastSnapshotOf(r); ok {
		if _, _, _, err := dropUnvouched(logs, idx, term); err != nil {
			c.fail("start rule on %s: %v", p.id, err)
		}
	}
	guard.start(follower{r: r, logs: logs, snaps: p.snaps, log: rc.Logger})
}

func (c *spCluster) restart(p *spPeer) {
	c.note("restart %s (last %d)", p.id, p.r.LastIndex())
	p.pastInstalls = p.installs()
	if err := p.r.Shutdown().Error(); err != nil {
		c.fail("shutdown %s: %v", p.id, err)
	}
	if err := p.store.Close(); err != nil {
		c.fail("close %s's log store: %v", p.id, err)
	}
	p.fsm = &chainFSM{}
	c.start(p)
	if !p.cut {
		c.link(p, true) // closing the transport dropped its links out
	}
}

// link cuts (or restores) every link between p and the others.
func (c *spCluster) link(p *spPeer, on bool) {
	p.cut = !on
	for _, q := range c.peers {
		if q != p && !q.cut {
			linkTransports(p.raw, q.raw, on)
		}
	}
}

func (c *spCluster) leader(among []*spPeer) *spPeer {
	c.t.Helper()
	i := awaitLeader(len(among), func(i int) *raft.Raft { return among[i].r })
	if i < 0 {
		c.fail("no leader")
		return nil
	}
	return among[i]
}

func (c *spCluster) up() []*spPeer {
	var up []*spPeer
	for _, p := range c.peers {
		if !p.cut {
			up = append(up, p)
		}
	}
	return up
}

// leaderDo runs op on whichever member leads the connected ones, again on
// the next leader while leadership moves (elections come often on a loaded
// machine with these short timeouts), for up to 10 s.
func (c *spCluster) leaderDo(what string, op func(l *spPeer) error) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := c.leader(c.up())
		err := op(l)
		if err == nil {
			return
		}
		moved := errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress)
		if !moved || time.Now().After(deadline) {
			c.fail("%s through %s: %v", what, l.id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// write commits n entries through the leader, following a change of leader.
func (c *spCluster) write(n int) {
	c.t.Helper()
	for range n {
		c.seq++
		data := []byte(fmt.Sprintf("w%d", c.seq))
		c.leaderDo("write", func(l *spPeer) error { return l.r.Apply(data, 5*time.Second).Error() })
	}
}

// writeTo writes until the leader's last index reaches target, and returns
// the leader.
func (c *spCluster) writeTo(target uint64) *spPeer {
	c.t.Helper()
	for {
		l := c.leader(c.up())
		if l.r.LastIndex() >= target {
			return l
		}
		c.write(1)
	}
}

func sameEntry(a, b *raft.Log) bool {
	return a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data)
}

// record adds the leader's committed entries above its latest snapshot to
// the oracle; a second, different entry at an index is a failure.
func (c *spCluster) record(l *spPeer) {
	c.t.Helper()
	snapIdx, _, _ := lastSnapshotOf(l.r)
	first, err1 := l.logs.FirstIndex()
	last, err2 := l.logs.LastIndex()
	if err1 != nil || err2 != nil {
		c.fail("leader log bounds: %v %v", err1, err2)
	}
	commit := l.r.CommitIndex()
	for i := max(first, snapIdx+1); first != 0 && i <= min(last, commit); i++ {
		var e raft.Log
		if err := l.logs.GetLog(i, &e); err != nil {
			c.fail("leader %s entry %d (log %d..%d, snapshot %d): %v", l.id, i, first, last, snapIdx, err)
		}
		if IsSnapshotPoint(&e) {
			c.fail("leader %s holds a snapshot's point at %d above its snapshot %d", l.id, i, snapIdx)
		}
		if o, ok := c.oracle[i]; ok && !sameEntry(&o, &e) {
			c.fail("two committed entries at %d: term %d %q, and term %d %q on leader %s", i, o.Term, o.Data, e.Term, e.Data, l.id)
		}
		c.oracle[i] = e
	}
}

// caughtUp waits until every member has applied the leader's last entry
// and holds the same state.
func (c *spCluster) caughtUp() *spPeer {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := c.leader(c.peers)
		last := l.r.LastIndex()
		ln, lsum, _ := l.fsm.state()
		ok := l.r.AppliedIndex() == last
		for _, p := range c.peers {
			n, sum, _ := p.fsm.state()
			if p.r.LastIndex() != last || p.r.AppliedIndex() != last || n != ln {
				ok = false
			} else if sum != lsum {
				c.fail("%s applied the same number of entries (%d) as leader %s, but other ones", p.id, n, l.id)
			}
		}
		if ok && l.r.State() == raft.Leader && l.r.LastIndex() == last {
			return l
		}
		if time.Now().After(deadline) {
			c.fail("members did not catch up with leader %s (last %d)", l.id, last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// check: every member's stored entries are the committed ones, except at
// or below its latest snapshot a snapshot's point of the committed term;
// above its snapshot its log has no hole; its state machine applied no
// entry it must not have.
func (c *spCluster) check(l *spPeer) {
	c.t.Helper()
	c.record(l)
	for _, p := range c.peers {
		if _, _, odd := p.fsm.state(); len(odd) > 0 {
			c.fail("%s: %s", p.id, strings.Join(odd, "; "))
		}
		f := p.r.GetConfiguration()
		if err := f.Error(); err != nil || len(f.Configuration().Servers) != len(c.peers) {
			c.fail("%s's configuration: %+v (%v)", p.id, f.Configuration().Servers, err)
		}
		snapIdx, snapTerm, _ := lastSnapshotOf(p.r)
		first, err1 := p.logs.FirstIndex()
		last, err2 := p.logs.LastIndex()
		if err1 != nil || err2 != nil {
			c.fail("%s log bounds: %v %v", p.id, err1, err2)
		}
		if last > snapIdx && first > snapIdx+1 {
			c.fail("%s: log starts at %d, its snapshot ends at %d", p.id, first, snapIdx)
		}
		for i := first; first != 0 && i <= last; i++ {
			var e raft.Log
			if err := p.logs.GetLog(i, &e); err != nil {
				if i > snapIdx {
					c.fail("%s: no entry %d above its snapshot %d: %v", p.id, i, snapIdx, err)
				}
				continue
			}
			o, ok := c.oracle[i]
			if !ok {
				c.fail("%s holds entry %d (term %d %q), no committed entry known there", p.id, i, e.Term, e.Data)
			}
			switch {
			case IsSnapshotPoint(&e) && i > snapIdx:
				c.fail("%s holds a snapshot's point at %d, above its snapshot %d", p.id, i, snapIdx)
			case IsSnapshotPoint(&e) && e.Term != o.Term:
				c.fail("%s holds a snapshot's point at %d of term %d, the committed entry is of term %d", p.id, i, e.Term, o.Term)
			case IsSnapshotPoint(&e):
			case !sameEntry(&e, &o):
				c.fail("%s holds entry %d of term %d %q (snapshot %d/%d); the committed one is term %d %q",
					p.id, i, e.Term, e.Data, snapIdx, snapTerm, o.Term, o.Data)
			}
		}
	}
}

func (c *spCluster) pick(choices ...uint64) uint64 { return choices[c.rng.Intn(len(choices))] }

func (c *spCluster) setTrailing(p *spPeer, n uint64) {
	p.trailing = n
	rc := p.r.ReloadableConfig()
	rc.TrailingLogs = n
	if err := p.r.ReloadConfig(rc); err != nil {
		c.fail("reload %s: %v", p.id, err)
	}
}

// rejoin removes a follower, writes and snapshots past it, and adds it
// back: the leader sends it the snapshot, and may send it again from its
// old replication (the jepsen case the guard answers).
func (c *spCluster) rejoin() {
	c.t.Helper()
	l := c.leader(c.peers)
	var f *spPeer
	for f == nil || f == l {
		f = c.peers[c.rng.Intn(len(c.peers))]
	}
	before := f.installs()
	c.note("remove %s, snapshot, add it back", f.id)
	c.leaderDo("remove "+string(f.id), func(l *spPeer) error { return l.r.RemoveServer(f.id, 0, 5*time.Second).Error() })
	c.write(5 + c.rng.Intn(20))
	l = c.leader(c.peers)
	c.record(l)
	c.setTrailing(l, c.pick(0, 2))
	if err := l.r.Snapshot().Error(); err != nil {
		c.fail("snapshot on %s: %v", l.id, err)
	}
	c.write(c.rng.Intn(5))
	c.leaderDo("add "+string(f.id)+" back", func(l *spPeer) error {
		return l.r.AddVoter(f.id, f.raw.LocalAddr(), 0, 5*time.Second).Error()
	})
	resentBefore := f.resent
	if c.rng.Intn(3) == 0 {
		time.Sleep(time.Duration(c.rng.Intn(40)) * time.Millisecond)
		c.resend("after rejoin", f)
	}
	c.write(1 + c.rng.Intn(5))
	c.seen["rejoin"]++
	now := c.caughtUp()
	if n := f.installs() - before; n > 1+f.resent-resentBefore {
		c.fail("%s rejoined with %d snapshot installs (%d of them resent)", f.id, n, f.resent-resentBefore)
	}
	c.check(now)
}

// cycle: cut a member off (the leader, mostly, with stale entries), let the
// others snapshot past, heal, check.
func (c *spCluster) cycle() {
	c.t.Helper()
	if c.rng.Intn(6) == 0 {
		c.rejoin()
	}
	if c.rng.Intn(4) == 0 {
		l := c.leader(c.peers)
		to := c.peers[c.rng.Intn(len(c.peers))]
		if to != l {
			c.note("leadership %s -> %s", l.id, to.id)
			if err := l.r.LeadershipTransferToServer(to.id, to.raw.LocalAddr()).Error(); err != nil {
				c.note("transfer failed: %v", err)
			}
			c.write(1 + c.rng.Intn(3))
		}
	}
	l := c.leader(c.peers)
	victim := l
	if c.rng.Intn(5) == 0 {
		victim = c.peers[c.rng.Intn(len(c.peers))]
	}
	c.setTrailing(victim, c.pick(1024, 1024, 0, 1, 3))
	before, resentBefore := make(map[*spPeer]int32), make(map[*spPeer]int32)
	for _, p := range c.peers {
		before[p], resentBefore[p] = p.installs(), p.resent
	}
	c.link(victim, false)
	stale := 0
	if victim == l {
		stale = c.rng.Intn(61)
		for i := range stale {
			victim.r.Apply([]byte(fmt.Sprintf("stale%d", i)), 0) // not waited on: appended while the lease lasts
		}
		deadline := time.Now().Add(5 * time.Second)
		for victim.r.State() == raft.Leader {
			if time.Now().After(deadline) {
				c.fail("the cut-off leader %s did not step down", victim.id)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	staleTo := victim.r.LastIndex()
	if c.rng.Intn(8) == 0 {
		c.restart(victim)
		c.seen["restart while cut off"]++
	}

	nl := c.leader(c.up())
	c.write(1) // the new leader's no-op is in its log after this
	base := nl.r.LastIndex()
	var target uint64
	switch mode := c.rng.Intn(5); {
	case mode <= 1:
		target = base + uint64(c.rng.Intn(40))
	default: // just below, at, just past the stale tail
		target = max(base, min(base+39, staleTo+uint64(mode)-3))
	}
	nl = c.writeTo(target)
	c.record(nl)
	trailing := c.pick(0, 0, 1, 3)
	c.setTrailing(nl, trailing)
	if err := nl.r.Snapshot().Error(); err != nil {
		c.fail("snapshot on %s: %v", nl.id, err)
	}
	snapIdx, snapTerm, _ := lastSnapshotOf(nl.r)
	extra := c.rng.Intn(11)
	c.write(extra)
	c.note("cut %s (leader %s, trailing %d) after %d stale entries, log to %d; %s snapshots at %d/%d keeping %d, writes %d more",
		victim.id, l.id, victim.trailing, stale, staleTo, nl.id, snapIdx, snapTerm, trailing, extra)

	c.seen["cycles"]++
	switch {
	case stale == 0:
		c.seen["no stale entries"]++
	case staleTo < snapIdx:
		c.seen["stale below snapshot"]++
	case staleTo == snapIdx:
		c.seen["stale end at snapshot"]++
	case staleTo >= snapIdx+victim.trailing: // raft's install compacts through the index
		c.seen["stale past snapshot and trailing"]++
	default:
		c.seen["stale past snapshot"]++
	}

	c.link(victim, true)
	if c.rng.Intn(3) == 0 {
		time.Sleep(time.Duration(c.rng.Intn(60)) * time.Millisecond)
		c.resend("during catch-up", c.either(victim))
	}
	catchUps := int32(1)
	if c.rng.Intn(5) == 0 { // cut again mid catch-up
		time.Sleep(time.Duration(c.rng.Intn(40)) * time.Millisecond)
		c.link(victim, false)
		c.write(1 + c.rng.Intn(20))
		if c.rng.Intn(2) == 0 {
			l := c.leader(c.up())
			c.record(l)
			c.setTrailing(l, c.pick(0, 2))
			if err := l.r.Snapshot().Error(); err != nil {
				c.fail("snapshot on %s: %v", l.id, err)
			}
		}
		c.note("cut %s again mid catch-up", victim.id)
		c.seen["flap"]++
		c.link(victim, true)
		catchUps++
	}
	if c.rng.Intn(4) == 0 {
		time.Sleep(time.Duration(c.rng.Intn(150)) * time.Millisecond)
		c.restart(victim)
		c.seen["restart while catching up"]++
		if c.rng.Intn(2) == 0 {
			c.resend("after restart", c.either(victim))
		}
	}
	c.write(1) // a leader replaces a stale tail only when it appends there
	now := c.caughtUp()
	c.checkInstalls(before, resentBefore, catchUps)
	c.check(now)
	if c.rng.Intn(3) == 0 { // a snapshot of a member's own, trailing entries kept
		p := c.peers[c.rng.Intn(len(c.peers))]
		if c.rng.Intn(2) == 0 {
			p = victim // it may still list the snapshot it caught up with
		}
		if c.rng.Intn(2) == 0 {
			c.setTrailing(p, c.pick(0, 1, 3))
		}
		switch err := p.r.Snapshot().Error(); {
		case err == nil:
			c.note("%s snapshots at %d keeping %d", p.id, p.r.AppliedIndex(), p.trailing)
			c.seen["own snapshot"]++
		case !errors.Is(err, raft.ErrNothingNewToSnapshot):
			c.fail("snapshot on %s: %v", p.id, err)
		}
		if c.rng.Intn(3) != 0 { // the leader's snapshot is now older than the member's
			for _, q := range c.peers {
				before[q], resentBefore[q] = q.installs(), q.resent
			}
			c.write(c.rng.Intn(6))
			c.resend("after own snapshot", p)
			c.write(1)
			now := c.caughtUp()
			c.checkInstalls(before, resentBefore, 0)
			c.check(now)
		}
	}
}

// checkInstalls: each member caught up with at most one snapshot install
// per catch-up, besides those a resent snapshot made.
func (c *spCluster) checkInstalls(before, resentBefore map[*spPeer]int32, catchUps int32) {
	c.t.Helper()
	for _, p := range c.peers {
		resent := p.resent - resentBefore[p]
		if n := p.installs() - before[p]; n > catchUps+resent {
			c.fail("%s caught up %d times with %d snapshot installs (%d of them resent)", p.id, catchUps, n, resent)
		}
	}
}

// either is p or, half the time, nil (resend then picks a follower).
func (c *spCluster) either(p *spPeer) *spPeer {
	if c.rng.Intn(2) == 0 {
		return nil
	}
	return p
}

// resend has the leader send one of its stored snapshots (its newest, or
// an older one its file store keeps) to a follower (to, or a random one
// when to is nil or leads) over the raw transport: what a leader does when
// its replication falls back past its log, or a delayed copy of an earlier
// send. After a success it sometimes goes on as the leader then does, with
// appends from the snapshot's point in batches of at most MaxAppendEntries
// (or all at once), each with the leader's commit index. A refusal of
// those in the same term is a failure: the leader would walk back and send
// the snapshot again, for ever.
func (c *spCluster) resend(why string, to *spPeer) {
	c.t.Helper()
	up := c.up()
	l := c.leader(up)
	if to == nil || to == l || to.cut {
		var fs []*spPeer
		for _, p := range up {
			if p != l {
				fs = append(fs, p)
			}
		}
		if len(fs) == 0 {
			return
		}
		to = fs[c.rng.Intn(len(fs))]
	}
	list, err := l.snaps.List()
	if err != nil || len(list) == 0 {
		c.note("resend %s: leader %s lists no snapshot (%v)", why, l.id, err)
		return
	}
	meta := list[c.rng.Intn(len(list))]
	_, rc, err := l.snaps.Open(meta.ID)
	if err != nil {
		c.note("resend %s: open %s on %s: %v", why, meta.ID, l.id, err)
		return
	}
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		c.fail("read snapshot %s on %s: %v", meta.ID, l.id, err)
	}
	term := l.r.CurrentTerm()
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(l.id), Addr: []byte(l.raw.LocalAddr())}
	req := snapshotRequest(l.id, l.raw.LocalAddr(), term, meta, len(data))
	// A leader's heartbeats and appends reach a follower before any snapshot
	// (a leader sends one only after its appends were refused, at its term),
	// so the follower is at the leader's term by then. A snapshot of a
	// higher term the guard leaves to raft, which installs it even when the
	// state machine is past it.
	var hb raft.AppendEntriesResponse
	if err := l.raw.AppendEntries(to.id, to.raw.LocalAddr(), &raft.AppendEntriesRequest{
		RPCHeader: header, Term: term,
	}, &hb); err != nil || hb.Term != term {
		c.note("resend %s: heartbeat to %s at term %d: answered at %d, %v", why, to.id, term, hb.Term, err)
		c.seen["resend: not delivered"]++
		return
	}
	own, _, _ := lastSnapshotOf(to.r)
	applied := to.r.AppliedIndex()
	c.seen["resend "+why]++
	if meta.Index < own {
		c.seen["resend: older than the follower's snapshot"]++
	}
	if newest := list[0]; meta.ID != newest.ID {
		c.seen["resend: older than the leader's newest"]++
	}
	if theirs, err := to.snaps.List(); err == nil && meta.Index < own {
		for _, m := range theirs {
			if m.Index == meta.Index {
				c.seen["resend: older, and the follower lists it"]++
			}
		}
	}
	installs := to.installs()
	var resp raft.InstallSnapshotResponse
	err = l.raw.InstallSnapshot(to.id, to.raw.LocalAddr(), req, &resp, bytes.NewReader(data))
	installed := to.installs() - installs
	to.resent += installed
	c.note("resend %s: %s sends %s snapshot %d/%d (applied %d, own snapshot %d): success %v, installs %d, error %v",
		why, l.id, to.id, meta.Index, meta.Term, applied, own, resp.Success, installed, err)
	switch {
	case err != nil:
		c.seen["resend: not delivered"]++
		return
	case !resp.Success:
		c.seen["resend: refused"]++
		return
	case installed > 0:
		c.seen["resend: installed"]++
	default:
		c.seen["resend: answered"]++
	}
	if c.rng.Intn(3) == 0 {
		return
	}
	batch := c.maxAppend
	if c.rng.Intn(2) == 0 {
		batch = 1 << 20
	}
	prev, prevTerm := meta.Index, meta.Term
	last, err := l.logs.LastIndex()
	if err != nil {
		c.fail("leader %s last index: %v", l.id, err)
	}
	for sent := 0; prev < last; sent++ {
		entries, err := storedEntries(l.logs, prev+1, min(last, prev+uint64(batch)))
		if err != nil {
			c.note("resend %s: leader %s lacks an entry (%v): appends stop", why, l.id, err)
			return
		}
		areq := &raft.AppendEntriesRequest{
			RPCHeader: header, Term: term,
			PrevLogEntry: prev, PrevLogTerm: prevTerm, Entries: entries, LeaderCommitIndex: l.r.CommitIndex(),
		}
		var aresp raft.AppendEntriesResponse
		if err := l.raw.AppendEntries(to.id, to.raw.LocalAddr(), areq, &aresp); err != nil {
			c.note("resend %s: append after %d to %s: %v", why, prev, to.id, err)
			return
		}
		if !aresp.Success {
			if aresp.Term == term && to.r.CurrentTerm() == term {
				c.fail("%s refused the append after %d/%d (%d entries) that follows snapshot %d/%d it %s, in the same term %d",
					to.id, prev, prevTerm, len(entries), meta.Index, meta.Term, map[bool]string{true: "installed", false: "was answered for"}[installed > 0], term)
			}
			c.note("resend %s: append after %d refused at term %d", why, prev, aresp.Term)
			return
		}
		if sent == 0 {
			c.seen["resend: append from the point"]++
		}
		e := entries[len(entries)-1]
		prev, prevTerm = e.Index, e.Term
	}
}

// stressRound runs one cluster through 1-3 cycles.
func stressRound(t *testing.T, seed int64, seen map[string]int) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	c := &spCluster{t: t, seed: seed, rng: rng, maxAppend: int(pickOf(rng, 64, 4, 16)), oracle: make(map[uint64]raft.Log), seen: seen}
	files := rng.Intn(2) == 0 // snapshots in files, several kept, as node.New has them
	var servers []raft.Server
	for i := range 3 {
		addr, raw := raft.NewInmemTransport("")
		p := &spPeer{id: raft.ServerID("s" + strconv.Itoa(i)), raw: raw, dir: t.TempDir(),
			snaps: raft.NewInmemSnapshotStore(), fsm: &chainFSM{}, trailing: 1024}
		if files {
			snaps, err := raft.NewFileSnapshotStoreWithLogger(p.dir, 2, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			p.snaps = snaps
		}
		c.peers = append(c.peers, p)
		servers = append(servers, raft.Server{ID: p.id, Address: addr, Suffrage: raft.Voter})
	}
	if files {
		seen["rounds with file snapshots"]++
	}
	for _, p := range c.peers {
		c.link(p, true)
	}
	for _, p := range c.peers {
		c.start(p)
	}
	defer func() {
		for _, p := range c.peers {
			_ = p.r.Shutdown().Error()
			_ = p.store.Close()
		}
	}()
	c.note("max append %d, file snapshots %v", c.maxAppend, files)
	if err := c.peers[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	c.write(1 + rng.Intn(10))
	c.record(c.caughtUp())
	for range 1 + rng.Intn(3) {
		c.cycle()
	}
	all := c.logs.String()
	seen["guard: appends handed over"] += strings.Count(all, "handed to raft without its previous entry")
	seen["guard: snapshots answered"] += strings.Count(all, "snapshot not installed")
	seen["guard: entries dropped"] += strings.Count(all, "dropped log entries")
}

// logLines is how much of the rafts' logs a failure prints
// (PERPD_SNAPPOINT_LOG=n, for a replay).
func logLines() int {
	n := 60
	if v := os.Getenv("PERPD_SNAPPOINT_LOG"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	return n
}

func pickOf(rng *rand.Rand, choices ...uint64) uint64 { return choices[rng.Intn(len(choices))] }
