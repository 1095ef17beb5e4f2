package cli

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/internal/hugepages"
)

// hugePageScan is how often a node looks for heap mappings the runtime
// added. Each look reads the runtime's count of mapped memory, and only
// when that grew does it read /proc/self/maps (about 0.6 ms on the VMs
// measured); most growth lands in the advisor's reservation anyway,
// advised before it is touched.
const hugePageScan = 50 * time.Millisecond

// adviseHugePages starts the heap's huge-page advisor when asked and when
// the machine's setting leaves huge pages to each program; advising
// reports whether it is on and has not withdrawn, and stop stops it
// (docs/decisions.md, "Huge pages for the heap").
func adviseHugePages(on bool, log hclog.Logger) (advising func() bool, stop func()) {
	mode := hugepages.MachineMode()
	if !on || mode != hugepages.ModeMadvise {
		log.Debug("heap huge pages: not advised", "asked", on, "machine", string(mode))
		return func() bool { return false }, func() {}
	}
	a := hugepages.NewAdvisor()
	done := make(chan struct{})
	go a.Run(hugePageScan, done, func(stalls uint64) {
		log.Warn("heap huge pages: advice withdrawn: the machine's page faults began to wait for memory compaction or reclaim (/proc/vmstat compact_stall, allocstall_*); restart the node to advise again, or set --huge-pages=false",
			"stalls", stalls)
	})
	log.Info("heap huge pages: advising the heap (the machine's transparent huge pages are madvise; --huge-pages=false to stop)")
	return a.Advising, func() { close(done) }
}
