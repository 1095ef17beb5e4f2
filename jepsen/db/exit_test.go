package db

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakePerpd writes an executable that ignores its arguments and sleeps, in
// place of perpd serve.
func fakePerpd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "perpd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// A node whose process ends without the harness asking (found by a 10m
// jepsen run: something outside the run sent n1 SIGTERM) is reported with
// how it ended, and can be started again: before, Start refused it as
// "already running" for the rest of the run, the final heal could not
// bring it back and every replica comparison ended unknown.
func TestANodeThatExitsOnItsOwnIsReportedAndRestartable(t *testing.T) {
	dir := t.TempDir()
	exits := make(chan string, 4)
	c, err := New(Config{Bin: fakePerpd(t), Nodes: 1, DataDir: filepath.Join(dir, "data"), LogDir: dir,
		Token: "t", OnExit: func(n *Node, status string) { exits <- n.ID + ": " + status }})
	if err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[0]
	defer c.StopAll()
	if err := c.Start(n, ""); err != nil {
		t.Fatal(err)
	}
	// A signal from outside the harness.
	n.mu.Lock()
	pid := n.cmd.Process.Pid
	n.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-exits:
		if got != "n1: signal: terminated" {
			t.Fatalf("OnExit got %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnExit not called for a process that ended on its own")
	}
	if n.Running() {
		t.Fatal("Running after the process ended")
	}
	if err := c.Start(n, ""); err != nil {
		t.Fatalf("restart after an unexpected exit: %v", err)
	}
	if !n.Running() {
		t.Fatal("not running after the restart")
	}
	if err := c.Start(n, ""); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start of a live process: %v", err)
	}

	// Exits the harness causes are not reported.
	if err := c.Kill(n); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(n, ""); err != nil {
		t.Fatal(err)
	}
	c.Stop(n)
	select {
	case got := <-exits:
		t.Fatalf("OnExit called for an exit the harness caused: %q", got)
	case <-time.After(200 * time.Millisecond):
	}
	log, err := os.ReadFile(n.Log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "(NOT stopped by the harness): signal: terminated") ||
		!strings.Contains(string(log), "(stopped by the harness): signal: killed") {
		t.Fatalf("node log does not say how each process ended:\n%s", log)
	}
}
