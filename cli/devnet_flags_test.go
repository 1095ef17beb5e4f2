package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDevnetClockOffsetReachesEveryChild: devnet passes --clock-offset to
// each serve child (so a fresh devnet's log time can start minutes before
// a funding boundary), and refuses, before any child starts, what serve
// would refuse: prod, and more than a day either way.
func TestDevnetClockOffsetReachesEveryChild(t *testing.T) {
	if args, err := devnetClockArgs("testnet", 0); err != nil || args != nil {
		t.Fatalf("no offset: %v %v", args, err)
	}
	args, err := devnetClockArgs("testnet", -7*time.Minute)
	if err != nil || !reflect.DeepEqual(args, []string{"--clock-offset", "-7m0s"}) {
		t.Fatalf("offset: %v %v", args, err)
	}
	if args, err := devnetClockArgs("bench", maxClockOffset); err != nil || len(args) != 2 {
		t.Fatalf("a day exactly: %v %v", args, err)
	}
	for _, c := range []struct {
		dep  string
		off  time.Duration
		want string
	}{
		{"prod", time.Minute, "refused on prod"},
		{"testnet", maxClockOffset + time.Millisecond, "within"},
		{"local", -maxClockOffset - time.Millisecond, "within"},
	} {
		if _, err := devnetClockArgs(c.dep, c.off); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.dep, c.off, err, c.want)
		}
	}
}

// TestDevnetPortFlags: the raft and admin bases can be set, so a devnet
// fits in one port range (their defaults are http-base -1000 and +1000).
func TestDevnetPortFlags(t *testing.T) {
	cmd := devnetCmd()
	for _, name := range []string{"raft-base", "admin-base", "clock-offset"} {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("devnet has no --%s", name)
		}
	}
}
