package hugepages

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
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
	// The heap may have grown between the scans; what was advised is not
	// advised again.
	var again []Span
	a.advise = func(start, end uintptr) bool {
		if start <= addr && addr < end {
			again = append(again, Span{start, end})
		}
		return madviseHuge(start, end)
	}
	if _, err := a.Scan(); err != nil || len(again) != 0 {
		t.Errorf("a second scan advised the mapping again: %v (%v)", again, err)
	}
	if advised, refused := a.Advised(); advised < n || refused != 0 {
		t.Errorf("Advised() = %d, %d", advised, refused)
	}
}

// Each new heap mapping is advised once: after the advice the kernel
// merges it with an advised neighbour (their flags now match), and the
// merged mapping is not advised, or counted, again. It was, every time the
// heap grew next to advised heap, and each count made Run reserve fresh
// heap, which grew the heap again.
func TestMergedMappingIsNotAdvisedAgain(t *testing.T) {
	var calls []Span
	a := &Advisor{hi: ^uintptr(0), advised: map[Span]bool{},
		advise: func(start, end uintptr) bool { calls = append(calls, Span{start, end}); return true }}
	line := func(start, end uintptr) string {
		return fmt.Sprintf("%x-%x rw-p 00000000 00:00 0 \n", start, end)
	}
	const mb = 1 << 20
	steps := []struct {
		listing string
		want    []Span
	}{
		{line(64*mb, 68*mb), []Span{{64 * mb, 68 * mb}}},
		{line(64*mb, 68*mb) + line(68*mb, 72*mb), []Span{{68 * mb, 72 * mb}}}, // grown, not yet merged
		{line(64*mb, 72*mb), nil},                                             // merged after the advice
		{line(64*mb, 72*mb) + line(72*mb, 80*mb) + line(96*mb, 100*mb), []Span{{72 * mb, 80 * mb}, {96 * mb, 100 * mb}}},
		{line(64*mb, 80*mb) + line(96*mb, 100*mb), nil},
		{line(64*mb, 80*mb) + line(80*mb, 84*mb) + line(96*mb, 100*mb), []Span{{80 * mb, 84 * mb}}},
	}
	total := 0
	for i, st := range steps {
		calls = nil
		n := a.scanListing([]byte(st.listing))
		if n != len(st.want) || !slices.Equal(calls, st.want) {
			t.Fatalf("step %d: advised %d, calls %v, want %v", i, n, calls, st.want)
		}
		total += n
	}
	if got, _ := a.Advised(); got != total {
		t.Fatalf("Advised() = %d, want %d", got, total)
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

// A scan reads /proc/self/maps, which costs a node about 0.6 ms; Run scans
// only after the runtime has mapped more memory, the one way a new heap
// mapping appears, so an idle or steady node does not pay for a scan every
// interval.
func TestRunScansOnlyWhenTheRuntimeMappedMore(t *testing.T) {
	a := NewAdvisor()
	a.stalls = func() (uint64, error) { return 0, nil }
	a.advise = func(start, end uintptr) bool { return true }
	var mapped, reads, ticks atomic.Uint64
	mapped.Store(1 << 30)
	a.mapped = func() uint64 { ticks.Add(1); return mapped.Load() }
	a.readMaps = func() ([]byte, error) { reads.Add(1); return readSelfMaps() }
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { a.Run(time.Millisecond, stop, nil); close(done) }()
	defer func() { close(stop); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d reads, %d ticks)", what, reads.Load(), ticks.Load())
			}
		}
	}
	waitFor("the start-up scans", func() bool { return ticks.Load() >= 1 })
	atStart := reads.Load()
	waitFor("50 intervals", func() bool { return ticks.Load() >= 51 })
	if n := reads.Load(); n != atStart {
		t.Fatalf("%d scans over 50 intervals with nothing newly mapped; want none", n-atStart)
	}
	mapped.Add(4 << 20)
	waitFor("a scan after the runtime mapped more", func() bool { return reads.Load() > atStart })
	after := reads.Load()
	from := ticks.Load()
	waitFor("50 more intervals", func() bool { return ticks.Load() >= from+50 })
	if n := reads.Load(); n != after {
		t.Fatalf("%d scans after the one the new mapping asked for; want none", n-after)
	}
}

// With the runtime's own count of mapped memory as the gate, Run still
// finds and advises a heap mapping made while it runs.
func TestRunAdvisesHeapMappedWhileItRuns(t *testing.T) {
	needMadviseMode(t)
	a := NewAdvisor()
	a.stalls = func() (uint64, error) { return 0, nil }
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { a.Run(time.Millisecond, stop, nil); close(done) }()
	defer func() { close(stop); <-done }()
	time.Sleep(20 * time.Millisecond) // past the start-up scans and reservation
	b := make([]byte, 96<<20)
	sink = append(sink, b)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + 48<<20
	for deadline := time.Now().Add(10 * time.Second); !hasFlag(vmFlags(t, addr), "hg"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the new heap mapping was never advised: %s", vmFlags(t, addr))
		}
	}
}
