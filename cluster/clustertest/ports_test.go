package clustertest

import (
	"net"
	"strconv"
	"testing"
)

// TestPortRangeKeepsPortsInside: with PortRangeEnv set, every address the
// harness picks lies in the range, and a malformed range is an error, not
// a silent fallback to the kernel's ports.
func TestPortRangeKeepsPortsInside(t *testing.T) {
	t.Setenv(PortRangeEnv, "31990-31999")
	for i := 0; i < 25; i++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, ps, _ := net.SplitHostPort(addr)
		if p, _ := strconv.Atoi(ps); p < 31990 || p > 31999 {
			t.Fatalf("picked %s outside 31990-31999", addr)
		}
	}
	ln, err := listenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if p := ln.Addr().(*net.TCPAddr).Port; p < 31990 || p > 31999 {
		t.Fatalf("listened on %d", p)
	}
	for _, bad := range []string{"31999", "31999-31990", "x-y", "0-10", "1-70000"} {
		t.Setenv(PortRangeEnv, bad)
		if addr, err := freeAddr(); err == nil {
			t.Errorf("range %q gave %s, want an error", bad, addr)
		}
	}
}
