package cli

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// DefaultGCPercent is the collector's pace on a node unless GOGC or
// --gc-percent says otherwise. An order allocates short-lived request and
// answer objects over a live heap that is mostly the state; at Go's default
// of 100 the collector once took a fifth of the leader's CPU, so the pace
// was 400. Orders now allocate a third of what they did, and a heap that
// grows five times as fast as the state paid for it in page faults: at 150
// a 3-node cluster on 2 cores carried about 10-20% more orders a second
// than at 400, for a heap of up to two and a half times the live state
// (docs/decisions.md, "The collector's pace on a node"). The soft memory
// limit below keeps it within the machine.
const DefaultGCPercent = 150

// tuneGC applies --gc-percent and --memory-limit-mb unless the operator set
// GOGC or GOMEMLIMIT in the environment (which the runtime has already
// applied and which win). memLimitMB < 0 means three quarters of the
// machine's memory; 0 means no limit.
func tuneGC(gcPercent int, memLimitMB int64, log hclog.Logger) {
	if env := os.Getenv("GOGC"); env != "" {
		log.Debug("garbage collector pace from the environment", "GOGC", env)
	} else {
		debug.SetGCPercent(gcPercent)
	}
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Debug("soft memory limit from the environment", "GOMEMLIMIT", env)
		return
	}
	limit := memLimitMB << 20
	if memLimitMB < 0 {
		total, err := machineMemory()
		if err != nil {
			log.Warn("no soft memory limit: cannot read the machine's memory", "error", err)
			return
		}
		limit = total / 4 * 3
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		log.Debug("soft memory limit", "bytes", limit)
	}
}

// machineMemory is MemTotal from /proc/meminfo, in bytes.
func machineMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("MemTotal %q", rest)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}
