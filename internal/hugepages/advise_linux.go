package hugepages

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
// small soft memory limit, a sixteenth of the limit.
const ReserveBytes = 16 << 20

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

// heapProbe holds a heap object whose address locates the heap. It is
// allocated in NewAdvisor, not in the variable's initializer, which the
// compiler may place among the program's static data instead.
var heapProbe *[64]byte

// MachineMode reads the machine's setting.
func MachineMode() Mode {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ModeUnknown
	}
	return ParseMode(b)
}

// stallCheckEvery is how many scans pass between two readings of the
// machine's stall counters.
const stallCheckEvery = 10

// Advisor advises the heap's mappings with MADV_HUGEPAGE.
type Advisor struct {
	lo, hi    uintptr
	stalls    func() (uint64, error) // the machine's direct compactions and reclaims
	mapped    func() uint64          // bytes the runtime has mapped, all classes
	readMaps  func() ([]byte, error) // the process's mappings (/proc/self/maps)
	advise    func(start, end uintptr) bool
	mu        sync.Mutex
	advised   map[Span]bool // the mappings advised as of the last scan
	count     int           // mappings advised since start
	refused   int           // madvise calls the kernel refused
	withdrawn bool
}

func machineStalls() (uint64, error) {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, err
	}
	return Stalls(b), nil
}

// runtimeMapped reads the runtime's count of the memory it has mapped. A
// new heap mapping raises it, and reading it costs no system call, unlike
// a scan of /proc/self/maps (about 0.6 ms on the VMs measured, so 20 scans
// a second were 1.2% of a core per node, idle or not).
func runtimeMapped() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	return func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
}

func readSelfMaps() ([]byte, error) { return os.ReadFile("/proc/self/maps") }

// NewAdvisor locates the heap.
func NewAdvisor() *Advisor {
	heapProbe = new([64]byte) // escapes to a global: on the heap
	p := uintptr(unsafe.Pointer(heapProbe))
	lo := uintptr(0)
	if p > heapWindowBelow {
		lo = p - heapWindowBelow
	}
	return &Advisor{lo: lo, hi: p + heapWindowAbove, stalls: machineStalls,
		mapped: runtimeMapped(), readMaps: readSelfMaps, advise: madviseHuge, advised: map[Span]bool{}}
}

// Scan advises every heap mapping not advised as of the previous scan and
// returns how many it advised. Once advised, a mapping next to an advised
// neighbour is merged with it by the kernel (their flags now match) and
// shows up with new bounds; such a mapping lies wholly within what was
// advised, so it is not advised or counted again (counting it made Run
// reserve fresh heap again, which grew the heap, which made a new mapping
// to advise and merge: a reservation every other scan).
func (a *Advisor) Scan() (int, error) {
	maps, err := a.readMaps()
	if err != nil {
		return 0, err
	}
	return a.scanListing(maps), nil
}

// scanListing is Scan over one /proc/self/maps listing.
func (a *Advisor) scanListing(maps []byte) int {
	spans := HeapSpans(maps, a.lo, a.hi)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.withdrawn {
		return 0
	}
	seen := make(map[Span]bool, len(spans))
	var known []Span // coalesced, once a span is not in advised
	n := 0
	for _, s := range spans {
		seen[s] = true
		if a.advised[s] {
			continue
		}
		if known == nil {
			known = Coalesce(a.advised)
		}
		if Covered(known, s) {
			continue
		}
		if !a.advise(s.Start, s.End) {
			a.refused++
			continue
		}
		n++
	}
	a.advised = seen
	a.count += n
	return n
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

// Withdraw takes the advice back from every heap mapping (MADV_NOHUGEPAGE:
// no new huge pages there, the ones made stay) and stops the advisor for
// good.
func (a *Advisor) Withdraw() error {
	a.mu.Lock()
	a.withdrawn = true
	a.mu.Unlock()
	maps, err := a.readMaps()
	if err != nil {
		return err
	}
	for _, s := range HeapSpans(maps, a.lo, a.hi) {
		madvise(s.Start, s.End, syscall.MADV_NOHUGEPAGE)
	}
	return nil
}

// Advising reports whether the advisor has not withdrawn.
func (a *Advisor) Advising() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.withdrawn
}

// madviseHuge advises the whole huge pages inside [start, end).
func madviseHuge(start, end uintptr) bool {
	return madvise(start, end, syscall.MADV_HUGEPAGE)
}

func madvise(start, end uintptr, advice int) bool {
	start = (start + hugePage - 1) &^ (hugePage - 1)
	end &^= hugePage - 1
	if end <= start {
		return true
	}
	_, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, uintptr(advice))
	return e == 0
}

// Advised is how many mappings were advised since start, and how many
// madvise calls the kernel refused.
func (a *Advisor) Advised() (advised, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count, a.refused
}

// Run advises the heap as it is and reserves ahead; then, until stop is
// closed, it scans at each interval in which the runtime mapped more
// memory; when a scan finds the heap grew past the
// reservation, it reserves ahead again. When the machine's count of direct
// compactions and reclaims rises (someone's page fault waited for the
// kernel to make room), it withdraws the advice, calls withdrawn and
// returns: a node's latency matters more than its page faults.
func (a *Advisor) Run(interval time.Duration, stop <-chan struct{}, withdrawn func(stalls uint64)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	base, err := a.stalls()
	if err != nil {
		return // no way to see stalls: do not advise
	}
	if _, err := a.Scan(); err != nil {
		return
	}
	reserve := reserveBytes()
	if reserve > 0 {
		a.Reserve(reserve)
		_, _ = a.Scan() // take the reservation into the advised set
	}
	last := a.mapped()
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if i%stallCheckEvery == 0 {
			if now, err := a.stalls(); err == nil && now > base {
				_ = a.Withdraw()
				if withdrawn != nil {
					withdrawn(now - base)
				}
				return
			}
		}
		// The heap gets a new mapping only when the runtime maps more
		// memory; until then a scan would find what the last one did.
		if now := a.mapped(); now == last {
			continue
		}
		n, err := a.Scan()
		if err != nil {
			return
		}
		if n > 0 && reserve > 0 {
			a.Reserve(reserve)
			_, _ = a.Scan()
		}
		last = a.mapped()
	}
}
