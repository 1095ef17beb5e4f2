package db

import (
	"reflect"
	"testing"
)

func TestWithFlagsReplacesOrAddsValues(t *testing.T) {
	args := []string{"--snapshot-threshold", "256", "--check-invariants", "--clock-offset", "30m0s"}
	got := withFlags(args, map[string]string{"--clock-offset": "-1h30m0s", "--log-level": "debug"})
	want := []string{"--snapshot-threshold", "256", "--check-invariants", "--clock-offset", "-1h30m0s", "--log-level", "debug"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("withFlags = %v, want %v", got, want)
	}
	if args[4] != "30m0s" {
		t.Fatalf("withFlags changed its input: %v", args)
	}
	if got := withFlags(args, nil); !reflect.DeepEqual(got, args) {
		t.Fatalf("no override: %v", got)
	}
	c := &Cluster{cfg: Config{ExtraArgs: args}}
	n := &Node{}
	n.SetFlag("--clock-offset", "3h0m0s")
	if got := c.Flag(n, "--clock-offset"); got != "3h0m0s" {
		t.Fatalf("Flag after SetFlag = %q", got)
	}
	n.SetFlag("--clock-offset", "")
	if got := c.Flag(n, "--clock-offset"); got != "30m0s" {
		t.Fatalf("Flag after reset = %q", got)
	}
}
