package nemesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/perpd/perpd/jepsen/db"
)

// ClockSteps are how far the clock nemesis steps a node's calendar clock
// from the run's base offset: behind and ahead, by less and by more than
// an hourly funding interval. Each fault takes the next of a shuffled
// round, so a run with a few clock faults sees steps both ways.
var ClockSteps = []time.Duration{-2 * time.Hour, -10 * time.Minute, 10 * time.Minute, 3 * time.Hour}

// clockFlag is the perpd serve flag that shifts a node's calendar clock.
const clockFlag = "--clock-offset"

// clock steps one node's calendar clock, as an operator or NTP stepping
// it would: it restarts the node (the leader every other time) with
// `--clock-offset` = base + a step, and two times in three then hands it
// leadership, so that the stepped clock is the one stamping entries. Log
// time must not jump or go back whatever the step (node/clock.go); the
// checkers judge that from the records' timestamps (checker/logtime.go).
// Heal restarts it on the base offset.
type clock struct {
	env     *Env
	mu      sync.Mutex
	round   int
	order   []int
	stepped *db.Node
}

func (c *clock) Name() string { return "clock" }

func (c *clock) Start(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.round++
	var n *db.Node
	role := "follower"
	if c.round%2 == 1 {
		l, err := c.env.leader(ctx)
		if err != nil {
			return "", err
		}
		n, role = l, "leader"
	} else {
		n = c.env.pick(c.env.running())
		if l, _ := c.env.DB.Leader(ctx); l == n {
			role = "leader"
		}
	}
	if n == nil {
		return "", fmt.Errorf("no running node to step")
	}
	if len(c.order) == 0 {
		c.order = c.env.Rand.Perm(len(ClockSteps))
	}
	step := ClockSteps[c.order[0]]
	c.order = c.order[1:]
	transfer := c.env.Rand.Intn(3) != 0
	off := c.env.ClockOffset + step
	c.stepped = n
	desc := fmt.Sprintf("restarted %s (%s) with %s %v (base %v, step %v)", n.ID, role, clockFlag, off, c.env.ClockOffset, step)
	if err := c.restartAt(ctx, n, off); err != nil {
		return desc, err
	}
	if !transfer {
		return desc, nil
	}
	before, err := c.env.leader(ctx)
	if err != nil {
		return desc, err
	}
	if before == n {
		return desc + ", it leads already", nil
	}
	if err := c.awaitCaughtUp(ctx, n, 20*time.Second); err != nil {
		return desc, err
	}
	if _, err := c.env.admin(ctx, n.Admin, "transfer-leadership", "--to", n.ID); err != nil {
		return desc + ", transfer-leadership to it", err
	}
	after, err := c.env.leader(ctx)
	if err != nil {
		return desc + ", transfer-leadership to it", err
	}
	return fmt.Sprintf("%s, then transfer-leadership: %s -> %s", desc, before.ID, after.ID), nil
}

func (c *clock) Heal(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.stepped
	if n == nil {
		return "", nil
	}
	if err := c.restartAt(ctx, n, c.env.ClockOffset); err != nil {
		return "", err
	}
	c.stepped = nil
	return fmt.Sprintf("restarted %s with %s %v (base)", n.ID, clockFlag, c.env.ClockOffset), nil
}

// restartAt stops n (SIGTERM, SIGKILL after a grace) and starts it again
// on its data with its calendar clock off the system's by off.
func (c *clock) restartAt(ctx context.Context, n *db.Node, off time.Duration) error {
	c.env.DB.Stop(n)
	n.SetFlag(clockFlag, off.String())
	return c.env.restart(ctx, n)
}

// awaitCaughtUp waits until n has applied what the leader had applied a
// moment before (a transfer to a node far behind would wait on raft).
func (c *clock) awaitCaughtUp(ctx context.Context, n *db.Node, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		l, err := c.env.DB.Leader(ctx)
		if err == nil {
			ls, err1 := c.env.DB.State(ctx, l)
			ns, err2 := c.env.DB.State(ctx, n)
			if err1 == nil && err2 == nil && ns.Applied() >= ls.Applied() {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not catch up with the leader within %v of its restart", n.ID, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
