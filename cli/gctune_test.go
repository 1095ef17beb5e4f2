package cli

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// tuneGC sets the pace and the soft limit from the flags, reads the
// machine's memory for the default limit, and leaves both alone when the
// environment set them.
func TestTuneGCFollowsFlagsUnlessTheEnvironmentSetsThem(t *testing.T) {
	pace, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(pace); debug.SetMemoryLimit(limit) })
	log := hclog.NewNullLogger()

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	tuneGC(250, 64, log)
	if got := debug.SetGCPercent(100); got != 250 {
		t.Errorf("pace %d, want 250 from the flag", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != 64<<20 {
		t.Errorf("limit %d, want 64 MiB from the flag", got)
	}

	total, err := machineMemory()
	if err != nil || total <= 0 {
		t.Fatalf("machine memory %d, %v", total, err)
	}
	tuneGC(DefaultGCPercent, -1, log)
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(math.MaxInt64); got != total/4*3 {
		t.Errorf("default limit %d, want three quarters of %d", got, total)
	}

	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	tuneGC(250, 64, log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("pace %d with GOGC set: tuneGC changed it", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("limit %d with GOMEMLIMIT set: tuneGC changed it", got)
	}
}
