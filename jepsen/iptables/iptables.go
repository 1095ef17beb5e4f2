package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Chain names. Nothing else in the firewall is ever changed.
const (
	FilterChain = "PERPD-JEPSEN"
	NatChain    = "PERPD-JEPSEN-SNAT"
)

// cmdTimeout bounds one iptables invocation (it can wait for the xtables
// lock held by another program).
const cmdTimeout = 20 * time.Second

// Host is one node as the firewall sees it.
type Host struct {
	ID   string
	Addr string // loopback IP, e.g. 127.0.0.11
	UID  int    // the uid the node's process runs as
}

// Firewall owns the two chains.
type Firewall struct {
	mu    sync.Mutex
	hosts map[string]Host
	bin   string
	// Grudge is the current set of cut (src, dst) pairs, for the history.
	grudge [][2]string
}

// ErrUnusable says the machine cannot make partitions: not root, no
// iptables binary, or a kernel without the owner/nat matches.
var ErrUnusable = errors.New("iptables unusable")

// Check reports why partitions cannot be made here, or nil.
func Check(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: partitions need root (running as uid %d)", ErrUnusable, os.Geteuid())
	}
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return fmt.Errorf("%w: no iptables binary on PATH (apt-get install iptables)", ErrUnusable)
	}
	if _, err := run(ctx, bin, "-w", "-S", "INPUT"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	if _, err := run(ctx, bin, "-w", "-t", "nat", "-S", "POSTROUTING"); err != nil {
		return fmt.Errorf("%w: nat table: %v", ErrUnusable, err)
	}
	return nil
}

// Setup removes any chains a crashed earlier run left behind, creates both
// chains, adds the per-node SNAT rules and the jumps. Call Close to undo.
func Setup(ctx context.Context, hosts []Host) (*Firewall, error) {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	f := &Firewall{hosts: map[string]Host{}, bin: bin}
	for _, h := range hosts {
		f.hosts[h.ID] = h
	}
	Cleanup(ctx)
	steps := [][]string{
		{"-N", FilterChain},
		{"-I", "INPUT", "1", "-j", FilterChain},
		{"-t", "nat", "-N", NatChain},
		{"-t", "nat", "-I", "POSTROUTING", "1", "-j", NatChain},
	}
	for _, h := range hosts {
		steps = append(steps, []string{"-t", "nat", "-A", NatChain, "-m", "owner", "--uid-owner", strconv.Itoa(h.UID),
			"-d", "127.0.0.0/8", "-j", "SNAT", "--to-source", h.Addr})
	}
	for _, s := range steps {
		if _, err := f.ipt(ctx, s...); err != nil {
			Cleanup(ctx)
			return nil, fmt.Errorf("%w: %v", ErrUnusable, err)
		}
	}
	return f, nil
}

// Partition cuts the network into the given components: nodes in different
// components cannot exchange a packet in either direction. Nodes not named
// keep their links with everyone. It replaces any earlier partition.
func (f *Firewall) Partition(ctx context.Context, components [][]string) error {
	var pairs [][2]string
	for i, a := range components {
		for j, b := range components {
			if i == j {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					pairs = append(pairs, [2]string{x, y})
				}
			}
		}
	}
	return f.Cut(ctx, pairs)
}

// Cut drops every packet from the first host of each pair to the second
// (both directions must be listed for a symmetric cut). It replaces any
// earlier rules.
func (f *Firewall) Cut(ctx context.Context, pairs [][2]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.ipt(ctx, "-F", FilterChain); err != nil {
		return err
	}
	f.grudge = nil
	for _, p := range pairs {
		src, ok1 := f.hosts[p[0]]
		dst, ok2 := f.hosts[p[1]]
		if !ok1 || !ok2 {
			return fmt.Errorf("unknown host in cut %v", p)
		}
		if _, err := f.ipt(ctx, "-A", FilterChain, "-s", src.Addr, "-d", dst.Addr, "-j", "DROP"); err != nil {
			return err
		}
		f.grudge = append(f.grudge, p)
	}
	return nil
}

// Heal removes every cut.
func (f *Firewall) Heal(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grudge = nil
	_, err := f.ipt(ctx, "-F", FilterChain)
	return err
}

// Describe lists the current cuts, e.g. "n1->n2 n2->n1".
func (f *Firewall) Describe() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	for _, p := range f.grudge {
		s = append(s, p[0]+"->"+p[1])
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// Rules returns the filter chain as iptables prints it, for the report.
func (f *Firewall) Rules(ctx context.Context) string {
	out, _ := f.ipt(ctx, "-S", FilterChain)
	return out
}

// Close heals and deletes both chains and their jumps. Safe to call twice.
func (f *Firewall) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*cmdTimeout)
	defer cancel()
	Cleanup(ctx)
}

// Cleanup deletes the harness's chains and jumps if they exist, without a
// Firewall: for the start of a run and for `jepsen -cleanup` after a
// harness killed with SIGKILL. Errors are ignored: each step is undone
// only if present.
func Cleanup(ctx context.Context) {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return
	}
	// Delete every jump (there is one, unless someone added more).
	for i := 0; i < 16; i++ {
		if _, err := run(ctx, bin, "-w", "-D", "INPUT", "-j", FilterChain); err != nil {
			break
		}
	}
	for i := 0; i < 16; i++ {
		if _, err := run(ctx, bin, "-w", "-t", "nat", "-D", "POSTROUTING", "-j", NatChain); err != nil {
			break
		}
	}
	_, _ = run(ctx, bin, "-w", "-F", FilterChain)
	_, _ = run(ctx, bin, "-w", "-X", FilterChain)
	_, _ = run(ctx, bin, "-w", "-t", "nat", "-F", NatChain)
	_, _ = run(ctx, bin, "-w", "-t", "nat", "-X", NatChain)
}

// Present reports whether either chain exists (used by tests to prove the
// cleanup ran).
func Present(ctx context.Context) bool {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return false
	}
	_, e1 := run(ctx, bin, "-w", "-S", FilterChain)
	_, e2 := run(ctx, bin, "-w", "-t", "nat", "-S", NatChain)
	return e1 == nil || e2 == nil
}

func (f *Firewall) ipt(ctx context.Context, args ...string) (string, error) {
	return run(ctx, f.bin, append([]string{"-w"}, args...)...)
}

func run(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
