package fsm

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/perpd/perpd/internal/hugepages"
)

// TestMain gives benchmarks the heap a node runs with: `perpd serve`
// advises its heap for transparent huge pages (cli/hugepages.go), and on a
// machine whose first touch of a page is dear that is a fifth of an
// order's apply. Tests run without it.
func TestMain(m *testing.M) {
	flag.Parse()
	if b := flag.Lookup("test.bench"); b != nil && b.Value.String() != "" && hugepages.MachineMode() == hugepages.ModeMadvise {
		stop := make(chan struct{})
		go hugepages.NewAdvisor().Run(50*time.Millisecond, stop, nil)
		code := m.Run()
		close(stop)
		os.Exit(code)
	}
	os.Exit(m.Run())
}
