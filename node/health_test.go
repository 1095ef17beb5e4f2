package node

import (
	"io"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
)

// A restore in progress (raft reading the snapshot, decoding it and
// installing it, seconds at 100k accounts) shows in the figures /healthz
// reads without the machine's lock, and the restored state's figures are
// published when it ends.
func TestStateFiguresShowARestore(t *testing.T) {
	src := fsm.NewMachine(fsm.Options{})
	if _, _ = src.Apply(7, nil); src.Applied() != 7 {
		t.Fatalf("source applied %d", src.Applied())
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f := newRaftFSM(fsm.NewMachine(fsm.Options{}), nil)
	if f.restoring.Load() || f.figures.Load().Applied != 0 {
		t.Fatalf("fresh: restoring %v, figures %+v", f.restoring.Load(), *f.figures.Load())
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- f.Restore(pr) }()
	deadline := time.Now().Add(5 * time.Second)
	for !f.restoring.Load() {
		if time.Now().After(deadline) {
			t.Fatal("a restore in progress does not show")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := pw.Write(snap); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.restoring.Load() || f.figures.Load().Applied != 7 {
		t.Fatalf("restored: restoring %v, figures %+v, want applied 7", f.restoring.Load(), *f.figures.Load())
	}
}
