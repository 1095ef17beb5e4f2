package hugepages

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// heapWindow bounds the addresses taken for the heap around one heap
// object: Go reserves its arenas upward from a first hint, far from the
// kernel's mmap area where the runtime keeps its own metadata (which it
// keeps off huge pages on purpose).
const (
	heapWindowBelow = 1 << 38
	heapWindowAbove = 1 << 40
)

// ReserveBytes is how much fresh heap Run has the runtime map ahead of the
// heap's growth, at the start and each time the heap outgrows it; under a
// soft memory limit below 1 GiB, a sixteenth of the limit.
const ReserveBytes = 64 << 20

// reserveBytes is ReserveBytes within the soft memory limit: a reservation
// counts as allocation until collected, and near a small limit that would
// make the collector work harder than the faults it saves.
func reserveBytes() int {
	limit := debug.SetMemoryLimit(-1)
	if limit/16 < ReserveBytes {
		return int(limit / 16 &^ (hugePage - 1))
	}
	return ReserveBytes
}

const hugePage = 2 << 20

// heapProbe is a heap object whose address locates the heap.
var heapProbe = new([64]byte)

// MachineMode reads the machine's setting.
func MachineMode() Mode {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ModeUnknown
	}
	return ParseMode(b)
}

// Advisor advises the heap's mappings with MADV_HUGEPAGE.
type Advisor struct {
	lo, hi  uintptr
	mu      sync.Mutex
	advised map[Span]bool // the mappings advised as of the last scan
	count   int           // mappings advised since start
	refused int           // madvise calls the kernel refused
}

// NewAdvisor locates the heap.
func NewAdvisor() *Advisor {
	p := uintptr(unsafe.Pointer(heapProbe))
	lo := uintptr(0)
	if p > heapWindowBelow {
		lo = p - heapWindowBelow
	}
	return &Advisor{lo: lo, hi: p + heapWindowAbove, advised: map[Span]bool{}}
}

// Scan advises every heap mapping not advised as of the previous scan and
// returns how many it advised. A mapping the kernel merged with an advised
// neighbour shows up with new bounds and is advised again, which is
// harmless.
func (a *Advisor) Scan() (int, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	spans := HeapSpans(maps, a.lo, a.hi)
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := make(map[Span]bool, len(spans))
	n := 0
	for _, s := range spans {
		seen[s] = true
		if a.advised[s] {
			continue
		}
		if !madviseHuge(s.Start, s.End) {
			a.refused++
			continue
		}
		n++
	}
	a.advised = seen
	a.count += n
	return n, nil
}

// Reserve has the runtime map n bytes of fresh heap, advises them and lets
// them go. A fresh allocation this large gets a new mapping, which the
// runtime does not zero, so nothing is touched; once collected, its pages
// are free heap that later allocations fill, and their first touches take
// huge pages. A mapping advised only after a scan found it has usually had
// its first half touched already.
func (a *Advisor) Reserve(n int) { a.reserve(n, nil) }

func (a *Advisor) reserve(n int, at func(uintptr)) {
	b := make([]byte, n)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if !madviseHuge(start, start+uintptr(n)) {
		a.mu.Lock()
		a.refused++
		a.mu.Unlock()
	}
	if at != nil {
		at(start)
	}
	runtime.KeepAlive(b)
}

// madviseHuge advises the whole huge pages inside [start, end).
func madviseHuge(start, end uintptr) bool {
	start = (start + hugePage - 1) &^ (hugePage - 1)
	end &^= hugePage - 1
	if end <= start {
		return true
	}
	_, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_HUGEPAGE)
	return e == 0
}

// Advised is how many mappings were advised since start, and how many
// madvise calls the kernel refused.
func (a *Advisor) Advised() (advised, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count, a.refused
}

// Run advises the heap as it is, reserves ahead, then scans every interval
// until stop is closed; when a scan finds the heap grew past the
// reservation, it reserves ahead again.
func (a *Advisor) Run(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	if _, err := a.Scan(); err != nil {
		return
	}
	reserve := reserveBytes()
	if reserve > 0 {
		a.Reserve(reserve)
	}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		n, err := a.Scan()
		if err != nil {
			return
		}
		if n > 0 && reserve > 0 {
			a.Reserve(reserve)
			_, _ = a.Scan() // take the reservation into the advised set
		}
	}
}
