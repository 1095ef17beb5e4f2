package node

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// Group commit. Every write the leader applies (its own clients' and those
// forwarded to it) joins a queue; one goroutine takes what has queued,
// stamps each command with the leader's clock in queue order, and hands
// them to raft as one entry (fsm.EncodeGroup; a lone command goes as a
// plain entry). There is no timer: a group is whatever arrived while the
// group before it was in flight, so a lone write at low load goes at once,
// and under load groups grow by themselves. One group is in flight at a
// time unless a full group (GroupMax) is waiting, which may start beside
// it, up to GroupsInFlight: each entry costs a log append and an fsync on
// every node and a replication round, so fewer, fuller entries carry more
// orders on the same cores (docs/performance.md measured 4 groups always
// in flight against this rule: 15-20% fewer orders a second, a higher
// p99). The machine applies a group's commands in order, each with its
// own answer, refusal and idempotency record, at the group's index
// (X-Min-Index works unchanged).
//
// Linger: under load the callers a group answers come straight back with
// their next write, while the ones that queued behind it are already
// waiting. Launching at once would send only those, and the answered ones
// would wait for the group after: two half-size cohorts alternating, each
// paying its own fsyncs. So after a group of at least LingerFrom finishes,
// the committer waits until as many writes are queued as were queued then
// plus the ones it answered, for at most Config.GroupLinger, and no longer
// than LingerGap after the last arrival: the callers come back one by one
// at the pace the leader serves their requests, which on a slow or busy
// machine takes longer than a fixed short bound, while a caller that does
// not come back stops the wait one gap after the last one that did. A full
// group never waits, and at low load (groups smaller than LingerFrom)
// nothing does. docs/performance.md has the A/B.
const (
	// DefaultGroupMax bounds the commands of one group (Config.GroupMax).
	DefaultGroupMax = 256
	// GroupMaxBytes bounds a group's encoded commands; a command that
	// would pass it starts the next group.
	GroupMaxBytes = 1 << 20
	// GroupsInFlight bounds the groups in raft at once; a second one
	// starts only while a full group waits (see above). Meanwhile
	// arrivals queue and the next group takes them together.
	GroupsInFlight = 4
	// DefaultGroupLinger is Config.GroupLinger's default.
	DefaultGroupLinger = 5 * time.Millisecond
	// LingerGap ends a linger once no write has joined for this long.
	LingerGap = time.Millisecond
	// MaxGroupLinger bounds Config.GroupLinger: a longer wait would cost
	// more latency than any fsync it saves.
	MaxGroupLinger = 50 * time.Millisecond
	// LingerFrom is the smallest finished group that makes the committer
	// wait for its callers' next writes.
	LingerFrom = 8
	// groupQueue bounds waiting writes; a full queue makes callers wait
	// (their context bounds it).
	groupQueue = 8192
)

type queued struct {
	cmd  *fsm.Command
	done chan queuedAnswer
}

type queuedAnswer struct {
	res *fsm.Result
	err error
}

// committer batches the leader's writes into raft entries (batchLoop's
// rule: one group in flight unless a full one waits).
type committer struct {
	*batchLoop[*queued]
	n *Node
	// groups and peak count launched groups and the most in flight at
	// once (GroupStats).
	groups, peak atomic.Int64
}

// GroupStats reports how many groups this node's committer handed raft
// and the most it had in flight at once.
func (n *Node) GroupStats() (groups, peakInFlight int64) {
	return n.committer.groups.Load(), n.committer.peak.Load()
}

func newCommitter(n *Node) *committer {
	size := n.cfg.GroupMax
	if size <= 0 {
		size = DefaultGroupMax
	}
	c := &committer{n: n, batchLoop: newBatchLoop[*queued](groupQueue, min(size, fsm.GroupMax), GroupsInFlight, n.stop)}
	c.batchLoop.launch = c.launch
	c.batchLoop.linger = max(n.cfg.GroupLinger, 0)
	c.batchLoop.lingerGap = LingerGap
	c.batchLoop.launched = func(inFlight int) {
		c.groups.Add(1)
		if int64(inFlight) > c.peak.Load() {
			c.peak.Store(int64(inFlight))
		}
	}
	c.batchLoop.stopped = func(backlog []*queued) { c.answerAll(backlog, nil, ErrUnavailable) }
	return c
}

// run is the committer's loop; it ends when the node stops.
func (c *committer) run() {
	defer c.n.wg.Done()
	c.batchLoop.run()
}

// launch stamps and encodes the head of batch and hands it to raft as one
// entry, delivering the answers when raft has applied it. It returns how
// many commands it took: it stops before one that would take the group
// past GroupMaxBytes (that one starts the next group, stamped then: stamps
// follow log order), and whether it handed raft an entry, in which case
// c.finish is called once the answers are out.
func (c *committer) launch(batch []*queued) (taken int, launched bool) {
	n := c.n
	if !n.IsLeader() {
		c.answerAll(batch, nil, errNotLeader)
		return len(batch), false
	}
	if err := n.awaitInheritedLog(); err != nil {
		c.answerAll(batch, nil, fmt.Errorf("%w: %v", errNotLeader, err))
		return len(batch), false
	}
	var data [][]byte
	var members []*queued
	size := 0
	for _, q := range batch {
		stamped := *q.cmd
		stamped.TsMs = n.stamp()
		b, err := stamped.Encode()
		if err != nil {
			q.done <- queuedAnswer{err: err}
			taken++
			continue
		}
		if len(members) > 0 && size+len(b) > GroupMaxBytes {
			break
		}
		size += len(b)
		data = append(data, b)
		members = append(members, q)
		taken++
	}
	if len(members) == 0 {
		return taken, false
	}
	entry := data[0]
	if len(members) > 1 {
		var err error
		if entry, err = fsm.EncodeGroup(data); err != nil {
			c.answerAll(members, nil, err)
			return taken, false
		}
	}
	if o := n.observer(); o != nil {
		o.Grouped(len(members))
	}
	f := n.Raft.Apply(entry, time.Second)
	go func() {
		defer c.finish("", len(members))
		err := f.Error()
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
				errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrEnqueueTimeout) {
				err = fmt.Errorf("%w: %v", errNotLeader, err)
			}
			c.answerAll(members, nil, err)
			return
		}
		res, ok := f.Response().(*fsm.Result)
		switch {
		case !ok:
			c.answerAll(members, nil, fmt.Errorf("unexpected apply response %T", f.Response()))
		case len(members) == 1:
			members[0].done <- queuedAnswer{res: res}
		case len(res.Group) != len(members):
			// The machine refused the group whole (it never does for a
			// group this committer built): every caller sees that answer.
			c.answerAll(members, res, nil)
		default:
			for i, q := range members {
				q.done <- queuedAnswer{res: res.Group[i]}
			}
		}
	}()
	return taken, true
}

func (c *committer) answerAll(qs []*queued, res *fsm.Result, err error) {
	for _, q := range qs {
		q.done <- queuedAnswer{res: res, err: err}
	}
}

// awaitInheritedLog returns once this node, leading, has applied every
// entry it inherited from the terms before its own (a raft barrier, once per
// term). Until then its state is older than the log, or empty: a node
// restarted without a snapshot and elected before replaying its log has no
// log time at all, and its first stamp would have taken its calendar, as a
// new cluster's does, dragging log time to a stepped clock a minute an
// entry (the Jepsen clock nemesis found it). Stamps, and the answers that
// read the state, wait for it.
func (n *Node) awaitInheritedLog() error {
	term := n.Raft.CurrentTerm()
	if n.appliedTerm.Load() == term {
		return nil
	}
	if err := n.Raft.Barrier(n.cfg.ProposeTimeout).Error(); err != nil {
		return err
	}
	n.appliedTerm.Store(term)
	return nil
}
