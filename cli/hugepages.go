package cli

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/internal/hugepages"
)

// hugePageScan is how often a node looks for heap mappings the runtime
// added. A scan reads /proc/self/maps (tens of µs), so 20 a second cost
// well under 0.1% of a core; most growth lands in the advisor's
// reservation anyway, advised before it is touched.
const hugePageScan = 50 * time.Millisecond

// adviseHugePages starts the heap's huge-page advisor when asked and when
// the machine's setting leaves huge pages to each program; the returned
// func stops it (docs/decisions.md, "Huge pages for the heap").
func adviseHugePages(on bool, log hclog.Logger) (stop func()) {
	mode := hugepages.MachineMode()
	if !on || mode != hugepages.ModeMadvise {
		log.Debug("heap huge pages: not advised", "asked", on, "machine", string(mode))
		return func() {}
	}
	done := make(chan struct{})
	go hugepages.NewAdvisor().Run(hugePageScan, done)
	log.Info("heap huge pages: advising the heap (the machine's transparent huge pages are madvise; --huge-pages=false to stop)")
	return func() { close(done) }
}
