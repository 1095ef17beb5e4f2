package hugepages

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// vmFlags is the VmFlags line of the mapping that holds addr, from
// /proc/self/smaps.
func vmFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	in := false
	for sc.Scan() {
		line := sc.Text()
		var start, end uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &start, &end); n == 2 && !strings.HasPrefix(line, "VmFlags") {
			in = start <= addr && addr < end
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return ""
}

func hasFlag(flags, f string) bool {
	for _, x := range strings.Fields(flags) {
		if x == f {
			return true
		}
	}
	return false
}

func needMadviseMode(t *testing.T) {
	t.Helper()
	if m := MachineMode(); m != ModeMadvise {
		t.Skipf("the machine's transparent huge pages are %q; the advisor only acts under madvise", m)
	}
}

var sink [][]byte

// The runtime maps a grown heap without the advice; a scan finds the new
// mapping and advises it.
func TestScanAdvisesANewHeapMapping(t *testing.T) {
	needMadviseMode(t)
	a := NewAdvisor()
	if _, err := a.Scan(); err != nil {
		t.Fatal(err)
	}
	// A fresh large allocation makes the runtime map new heap.
	b := make([]byte, 48<<20)
	sink = append(sink, b)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + 24<<20
	if hasFlag(vmFlags(t, addr), "hg") {
		t.Fatalf("the new heap mapping is advised before any scan: %s", vmFlags(t, addr))
	}
	n, err := a.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || !hasFlag(vmFlags(t, addr), "hg") {
		t.Fatalf("after a scan (%d advised) the mapping's flags are %q, want hg", n, vmFlags(t, addr))
	}
	if n2, _ := a.Scan(); n2 != 0 {
		t.Errorf("a second scan with nothing new advised %d mappings", n2)
	}
	if advised, refused := a.Advised(); advised < n || refused != 0 {
		t.Errorf("Advised() = %d, %d", advised, refused)
	}
}

// Reserve advises heap the runtime maps for it before anything touches it,
// and lets it go.
func TestReserveAdvisesBeforeTheFirstTouch(t *testing.T) {
	needMadviseMode(t)
	a := NewAdvisor()
	b := make([]byte, 1)
	sink = append(sink, b)
	before := len(sink)
	var addr uintptr
	a.reserve(32<<20, func(p uintptr) { addr = p + 16<<20 })
	if len(sink) != before {
		t.Fatal("reserve kept its memory")
	}
	if !hasFlag(vmFlags(t, addr), "hg") {
		t.Fatalf("reserved heap at %#x has flags %q, want hg", addr, vmFlags(t, addr))
	}
}

// Under a small soft memory limit the reservation shrinks with it, in
// whole huge pages, down to nothing.
func TestReserveFollowsTheMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	for limit, want := range map[int64]int{
		math.MaxInt64: ReserveBytes,
		16 << 30:      ReserveBytes,
		128 << 20:     min(ReserveBytes, 8<<20),
		100 << 20:     min(ReserveBytes, 6<<20),
		16 << 20:      0,
	} {
		debug.SetMemoryLimit(limit)
		if got := reserveBytes(); got != want {
			t.Errorf("limit %d: reserve %d, want %d", limit, got, want)
		}
	}
}

// At the machine's first direct compaction or reclaim the advisor takes its
// advice back from the heap and advises nothing more, whatever the heap
// does after.
func TestRunWithdrawsAtTheFirstStall(t *testing.T) {
	needMadviseMode(t)
	a := NewAdvisor()
	var calls atomic.Int64
	a.stalls = func() (uint64, error) {
		if calls.Add(1) < 3 {
			return 7, nil
		}
		return 9, nil
	}
	b := make([]byte, 48<<20)
	sink = append(sink, b)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + 24<<20
	var seen uint64
	done := make(chan struct{})
	go func() {
		a.Run(time.Millisecond, make(chan struct{}), func(n uint64) { seen = n })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not withdraw")
	}
	if seen != 2 || a.Advising() {
		t.Fatalf("withdrawn with %d stalls, advising %v; want 2, false", seen, a.Advising())
	}
	if f := vmFlags(t, addr); hasFlag(f, "hg") || !hasFlag(f, "nh") {
		t.Fatalf("after the withdrawal the heap's flags are %q, want nh and no hg", f)
	}
	later := make([]byte, 48<<20)
	sink = append(sink, later)
	if n, _ := a.Scan(); n != 0 {
		t.Fatalf("a scan after the withdrawal advised %d mappings", n)
	}
}

// Without the stall counters the advisor cannot see what its advice costs,
// so it advises nothing.
func TestRunWithoutStallCountersAdvisesNothing(t *testing.T) {
	a := NewAdvisor()
	a.stalls = func() (uint64, error) { return 0, os.ErrNotExist }
	a.Run(time.Millisecond, make(chan struct{}), nil)
	if n, _ := a.Advised(); n != 0 {
		t.Fatalf("advised %d mappings without stall counters", n)
	}
}
