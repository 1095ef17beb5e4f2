package nemesis

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/perpd/perpd/jepsen/db"
	"github.com/perpd/perpd/jepsen/iptables"
)

// Env is what the faults act on.
type Env struct {
	DB  *db.Cluster
	FW  *iptables.Firewall // nil when partitions are not possible
	Bin string             // perpd, for `perpd admin ...`
	// Rand must only be used by one goroutine (the schedule).
	Rand *rand.Rand
	// ClockFlag says perpd takes `serve --clock-offset`, and ClockOffset
	// is the one every node runs with (the run's base; 0 when none is
	// passed): the clock nemesis steps a node away from it.
	ClockFlag   bool
	ClockOffset time.Duration
}

// New builds the nemeses named (see Parse).
func New(names []string, env *Env) ([]Nemesis, error) {
	var out []Nemesis
	for _, name := range names {
		switch name {
		case "kill":
			out = append(out, &kill{env: env})
		case "pause":
			out = append(out, &pause{env: env})
		case "partition":
			if env.FW == nil {
				return nil, fmt.Errorf("partition nemesis selected but no firewall is available")
			}
			out = append(out, &partition{env: env})
		case "membership":
			out = append(out, &membership{env: env})
		case "transfer":
			out = append(out, &transfer{env: env})
		case "clock":
			if !env.ClockFlag {
				return nil, fmt.Errorf("clock nemesis selected but perpd has no serve --clock-offset")
			}
			out = append(out, &clock{env: env})
		default:
			return nil, fmt.Errorf("unknown nemesis %q", name)
		}
	}
	return out, nil
}

func (e *Env) leader(ctx context.Context) (*db.Node, error) {
	return e.DB.WaitLeader(ctx, 20*time.Second)
}

func (e *Env) running() []*db.Node {
	var out []*db.Node
	for _, n := range e.DB.Nodes {
		if n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	return out
}

func (e *Env) pick(nodes []*db.Node) *db.Node {
	if len(nodes) == 0 {
		return nil
	}
	return nodes[e.Rand.Intn(len(nodes))]
}

// joinVia is the admin address of a running node other than n.
func (e *Env) joinVia(n *db.Node) string {
	for _, m := range e.running() {
		if m != n {
			return m.Admin
		}
	}
	return e.DB.Nodes[0].Admin
}

// admin runs `perpd admin ARGS` against addr.
func (e *Env) admin(ctx context.Context, addr string, args ...string) (string, error) {
	full := append([]string{"admin"}, args...)
	full = append(full, "--addr", addr, "--timeout", "30s")
	full = append(full, e.DB.AdminArgs()...)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, e.Bin, full...)
	cmd.Env = append(os.Environ(), "PERPD_ADMIN_TOKEN="+e.DB.Token()) // never on argv
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	s := strings.TrimSpace(out.String())
	if err != nil {
		return s, fmt.Errorf("perpd admin %s --addr %s: %v: %s", strings.Join(args, " "), addr, err, s)
	}
	return s, nil
}

// restart starts a stopped node on its existing data and waits until its
// admin listener answers.
func (e *Env) restart(ctx context.Context, n *db.Node) error {
	if n.Running() {
		return nil
	}
	if err := e.DB.Start(n, e.joinVia(n)); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := e.DB.Status(ctx, n); err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer within 30s of its restart", n.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kill sends SIGKILL to the leader or a random node, alternately, and
// restarts it on the same data directory at heal.
type kill struct {
	env     *Env
	mu      sync.Mutex
	round   int
	victims []*db.Node
}

func (k *kill) Name() string { return "kill" }

func (k *kill) Start(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.round++
	var n *db.Node
	role := "random node"
	if k.round%2 == 1 {
		l, err := k.env.leader(ctx)
		if err != nil {
			return "", err
		}
		n, role = l, "leader"
	} else {
		n = k.env.pick(k.env.running())
	}
	if n == nil {
		return "", fmt.Errorf("no running node to kill")
	}
	k.victims = append(k.victims, n)
	if err := k.env.DB.Kill(n); err != nil {
		return "", err
	}
	return fmt.Sprintf("kill -9 %s (%s)", n.ID, role), nil
}

func (k *kill) Heal(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var done []string
	for _, n := range k.victims {
		if err := k.env.restart(ctx, n); err != nil {
			return strings.Join(done, ", "), err
		}
		done = append(done, "restarted "+n.ID)
	}
	k.victims = nil
	return strings.Join(done, ", "), nil
}

// pause freezes the leader with SIGSTOP and thaws it at heal.
type pause struct {
	env    *Env
	mu     sync.Mutex
	paused []*db.Node
}

func (p *pause) Name() string { return "pause" }

func (p *pause) Start(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, err := p.env.leader(ctx)
	if err != nil {
		return "", err
	}
	p.paused = append(p.paused, l)
	if err := p.env.DB.Pause(l); err != nil {
		return "", err
	}
	return "SIGSTOP " + l.ID + " (leader)", nil
}

func (p *pause) Heal(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var done []string
	for _, n := range p.paused {
		if n.Running() {
			if err := p.env.DB.Resume(n); err != nil {
				return strings.Join(done, ", "), err
			}
			done = append(done, "SIGCONT "+n.ID)
		}
	}
	p.paused = nil
	return strings.Join(done, ", "), nil
}

// partition cuts the network in one of three shapes, in turn.
type partition struct {
	env   *Env
	mu    sync.Mutex
	round int
	cut   bool
}

func (p *partition) Name() string { return "partition" }

func (p *partition) Start(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, n := range p.env.DB.Nodes {
		ids = append(ids, n.ID)
	}
	p.env.Rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	p.round++
	p.cut = true
	var shape string
	var err error
	switch p.round % 3 {
	case 1:
		l, lerr := p.env.leader(ctx)
		if lerr != nil {
			return "", lerr
		}
		var rest []string
		for _, id := range ids {
			if id != l.ID {
				rest = append(rest, id)
			}
		}
		shape = fmt.Sprintf("isolate leader %s from %v", l.ID, rest)
		err = p.env.FW.Partition(ctx, [][]string{{l.ID}, rest})
	case 2:
		minority := ids[:len(ids)/2]
		majority := ids[len(ids)/2:]
		shape = fmt.Sprintf("split majority %v / minority %v", majority, minority)
		err = p.env.FW.Partition(ctx, [][]string{majority, minority})
	default:
		// Bridge: two halves that cannot talk, and one node that talks
		// to both (Jepsen's bridge). Every node still sees a majority.
		half := len(ids) / 2
		left, bridge, right := ids[:half], ids[half], ids[half+1:]
		var pairs [][2]string
		for _, a := range left {
			for _, b := range right {
				pairs = append(pairs, [2]string{a, b}, [2]string{b, a})
			}
		}
		shape = fmt.Sprintf("bridge %v <-> %s <-> %v", left, bridge, right)
		err = p.env.FW.Cut(ctx, pairs)
	}
	return shape + " [" + p.env.FW.Describe() + "]", err
}

func (p *partition) Heal(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return "", nil
	}
	if err := p.env.FW.Heal(ctx); err != nil {
		return "", err
	}
	p.cut = false
	return "network healed", nil
}

// membership removes a follower, wipes its data, forces a snapshot on the
// leader (compacting the log, so the newcomer needs the snapshot) and, at
// heal, restarts it empty with --join so it re-joins and catches up.
type membership struct {
	env     *Env
	mu      sync.Mutex
	removed *db.Node
}

func (m *membership) Name() string { return "membership" }

func (m *membership) Start(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.env.leader(ctx)
	if err != nil {
		return "", err
	}
	var followers []*db.Node
	for _, n := range m.env.running() {
		if n != l {
			followers = append(followers, n)
		}
	}
	n := m.env.pick(followers)
	if n == nil {
		return "", fmt.Errorf("no running follower to remove")
	}
	m.removed = n
	if _, err := m.env.admin(ctx, l.Admin, "remove", "--id", n.ID); err != nil {
		return "remove " + n.ID, err
	}
	if err := m.env.DB.Kill(n); err != nil {
		return "removed " + n.ID, err
	}
	if err := m.env.DB.Wipe(n); err != nil {
		return "removed and killed " + n.ID, err
	}
	desc := fmt.Sprintf("removed %s via leader %s, wiped its data", n.ID, l.ID)
	if err := m.env.DB.Snapshot(ctx, l); err != nil {
		return desc, err
	}
	return desc + ", snapshot forced on " + l.ID, nil
}

func (m *membership) Heal(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.removed
	if n == nil {
		return "", nil
	}
	if n.Running() {
		// The removal failed before the kill: nothing to re-join.
		m.removed = nil
		return "", nil
	}
	if err := m.env.DB.Start(n, m.env.joinVia(n)); err != nil {
		return "", err
	}
	// Wait until it is a member again and has caught up with the leader.
	deadline := time.Now().Add(90 * time.Second)
	for {
		ids, err := m.env.DB.Members(ctx)
		member := err == nil && contains(ids, n.ID)
		if member {
			if caught, _ := m.caughtUp(ctx, n); caught {
				m.removed = nil
				return fmt.Sprintf("%s re-joined empty and caught up", n.ID), nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.removed = nil
			return "", fmt.Errorf("%s did not re-join and catch up within 90s (member=%v)", n.ID, member)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// caughtUp reports whether n has applied at least the index the leader had
// applied a moment ago.
func (m *membership) caughtUp(ctx context.Context, n *db.Node) (bool, error) {
	l, err := m.env.DB.Leader(ctx)
	if err != nil {
		return false, err
	}
	ls, err := m.env.DB.State(ctx, l)
	if err != nil {
		return false, err
	}
	ns, err := m.env.DB.State(ctx, n)
	if err != nil {
		return false, err
	}
	return ns.Applied() >= ls.Applied(), nil
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// transfer hands leadership away through `perpd admin transfer-leadership`
// on a random member (which relays to the leader), while clients write.
type transfer struct{ env *Env }

func (t *transfer) Name() string { return "transfer" }

func (t *transfer) Start(ctx context.Context) (string, error) {
	before, _ := t.env.DB.Leader(ctx)
	via := t.env.pick(t.env.running())
	if via == nil {
		return "", fmt.Errorf("no running node")
	}
	if _, err := t.env.admin(ctx, via.Admin, "transfer-leadership"); err != nil {
		return "transfer-leadership via " + via.ID, err
	}
	after, err := t.env.leader(ctx)
	if err != nil {
		return "transfer-leadership via " + via.ID, err
	}
	from := "?"
	if before != nil {
		from = before.ID
	}
	return fmt.Sprintf("transfer-leadership via %s: %s -> %s", via.ID, from, after.ID), nil
}

func (t *transfer) Heal(context.Context) (string, error) { return "", nil }
