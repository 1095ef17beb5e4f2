package iptables

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests change the machine's firewall (only the harness's own
// chains), so they need root and iptables, and take the run lock.
func needFirewall(t *testing.T) context.Context {
	t.Helper()
	ctx := context.Background()
	if err := Check(ctx); err != nil {
		t.Skip(err)
	}
	unlock, err := Lock(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	return ctx
}

func TestSetupPartitionHealAndCloseLeaveNothingBehind(t *testing.T) {
	ctx := needFirewall(t)
	fw, err := Setup(ctx, []Host{{ID: "a", Addr: "127.0.0.31", UID: 47901}, {ID: "b", Addr: "127.0.0.32", UID: 47902}})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	if !Present(ctx) {
		t.Fatal("chains missing after Setup")
	}
	if err := fw.Partition(ctx, [][]string{{"a"}, {"b"}}); err != nil {
		t.Fatal(err)
	}
	rules := fw.Rules(ctx)
	for _, want := range []string{"-s 127.0.0.31/32 -d 127.0.0.32/32 -j DROP", "-s 127.0.0.32/32 -d 127.0.0.31/32 -j DROP"} {
		if !strings.Contains(rules, want) {
			t.Fatalf("rule %q missing from:\n%s", want, rules)
		}
	}
	if got := fw.Describe(); got != "a->b b->a" {
		t.Fatalf("Describe = %q", got)
	}
	if err := fw.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fw.Rules(ctx), "DROP") {
		t.Fatal("rules left after Heal")
	}
	fw.Close()
	if Present(ctx) {
		t.Fatal("chains left after Close")
	}
}

// A process running as a node's uid really cannot reach a cut peer, and can
// reach it again after the heal.
func TestCutDropsTrafficBetweenNodeUIDs(t *testing.T) {
	ctx := needFirewall(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 runs the dialing child under another uid")
	}
	ln, err := net.Listen("tcp", "127.0.0.32:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fw, err := Setup(ctx, []Host{{ID: "a", Addr: "127.0.0.31", UID: 47901}, {ID: "b", Addr: "127.0.0.32", UID: 47902}})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	dial := func() bool {
		port := ln.Addr().(*net.TCPAddr).Port
		script := "import os,socket\nos.setgid(47901)\nos.setuid(47901)\ns=socket.socket()\ns.settimeout(1)\ns.connect(('127.0.0.32'," + strconv.Itoa(port) + "))\n"
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return exec.CommandContext(cctx, "python3", "-c", script).Run() == nil
	}
	if !dial() {
		t.Fatal("cannot connect before any cut")
	}
	if err := fw.Partition(ctx, [][]string{{"a"}, {"b"}}); err != nil {
		t.Fatal(err)
	}
	if dial() {
		t.Fatal("connected across the cut")
	}
	if err := fw.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !dial() {
		t.Fatal("cannot connect after the heal")
	}
}

func TestCheckExplainsWhyPartitionsAreImpossible(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: Check only fails for others")
	}
	if err := Check(context.Background()); err == nil || !strings.Contains(err.Error(), "root") {
		t.Fatalf("Check as non-root = %v, want an error naming root", err)
	}
}
