package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// Group commit. Every write the leader applies (its own clients' and those
// forwarded to it) joins a queue; one goroutine takes what has queued,
// stamps each command with the leader's clock in queue order, and hands
// them to raft as one entry (fsm.EncodeGroup; a lone command goes as a
// plain entry). There is no timer: a group is whatever arrived while the
// earlier groups were in flight, so a lone write at low load goes at once,
// and under load groups grow by themselves. The machine applies a group's
// commands in order, each with its own answer, refusal and idempotency
// record, at the group's index (X-Min-Index works unchanged).
const (
	// DefaultGroupMax bounds the commands of one group (Config.GroupMax).
	DefaultGroupMax = 256
	// GroupMaxBytes bounds a group's encoded commands; a command that
	// would pass it starts the next group.
	GroupMaxBytes = 1 << 20
	// GroupsInFlight is how many groups may be in raft at once; while all
	// are, arrivals queue and the next group takes them together.
	GroupsInFlight = 4
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

// committer batches the leader's writes into raft entries.
type committer struct {
	n     *Node
	in    chan *queued
	slots chan struct{}
	max   int
}

func newCommitter(n *Node) *committer {
	max := n.cfg.GroupMax
	if max <= 0 {
		max = DefaultGroupMax
	}
	return &committer{n: n, in: make(chan *queued, groupQueue), slots: make(chan struct{}, GroupsInFlight), max: min(max, fsm.GroupMax)}
}

// run is the committer's loop; it ends when the node stops.
func (c *committer) run() {
	defer c.n.wg.Done()
	var backlog []*queued
	for {
		if len(backlog) == 0 {
			select {
			case <-c.n.stop:
				return
			case q := <-c.in:
				backlog = append(backlog, q)
			}
		}
		select {
		case <-c.n.stop:
			c.answerAll(backlog, nil, ErrUnavailable)
			return
		case c.slots <- struct{}{}:
		}
	take:
		for len(backlog) < c.max {
			select {
			case q := <-c.in:
				backlog = append(backlog, q)
			default:
				break take
			}
		}
		k := min(len(backlog), c.max)
		sent := c.launch(backlog[:k])
		backlog = append(backlog[:0:0], backlog[sent:]...)
	}
}

// launch stamps and encodes the head of batch and hands it to raft as one
// entry, delivering the answers when raft has applied it. It returns how
// many commands it took: it stops before one that would take the group
// past GroupMaxBytes (that one starts the next group, stamped then: stamps
// follow log order).
func (c *committer) launch(batch []*queued) int {
	n := c.n
	if !n.IsLeader() {
		c.answerAll(batch, nil, errNotLeader)
		<-c.slots
		return len(batch)
	}
	var data [][]byte
	var members []*queued
	size, taken := 0, 0
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
		<-c.slots
		return taken
	}
	entry := data[0]
	if len(members) > 1 {
		var err error
		if entry, err = fsm.EncodeGroup(data); err != nil {
			c.answerAll(members, nil, err)
			<-c.slots
			return taken
		}
	}
	if o := n.observer(); o != nil {
		o.Grouped(len(members))
	}
	f := n.Raft.Apply(entry, time.Second)
	go func() {
		defer func() { <-c.slots }()
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
	return taken
}

func (c *committer) answerAll(qs []*queued, res *fsm.Result, err error) {
	for _, q := range qs {
		q.done <- queuedAnswer{res: res, err: err}
	}
}
