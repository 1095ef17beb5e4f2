package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/internal/testdisk"
)

// After a compaction frees thousands of pages, a log append writes only
// its own pages: the freelist is not rewritten at every commit. With bolt's
// defaults the append below also wrote the freelist (an 8-byte id per free
// page), and the store must still reopen with every kept entry and append
// after it.
func TestLogAppendAfterCompactionWritesNoFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 13_000) // a group of about 64 orders
	var idx uint64
	for range 30 {
		batch := make([]*raft.Log, 100)
		for j := range batch {
			idx++
			batch[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
		}
		if err := s.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	appendOne := func() int64 { // the bytes of pages one append allocates
		st := s.Stats()
		before := st.TxStats.GetPageAlloc()
		idx++
		if err := s.StoreLog(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}); err != nil {
			t.Fatal(err)
		}
		st = s.Stats()
		return st.TxStats.GetPageAlloc() - before
	}
	base := appendOne()
	if err := s.DeleteRange(1, 2_000); err != nil { // a snapshot's compaction
		t.Fatal(err)
	}
	appendOne() // the freed pages leave the pending list
	free := s.Stats().FreePageN
	if free < 5_000 {
		t.Fatalf("%d free pages after the compaction; the test needs a long freelist", free)
	}
	if grown := appendOne() - base; grown > int64(free)*8/2 {
		t.Fatalf("an append after the compaction allocated %d bytes more than before it, with %d free pages: the freelist (8 bytes a page) is written at every commit", grown, free)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 2_001 || last != idx {
		t.Fatalf("reopened store holds %d..%d, want 2001..%d", first, last, idx)
	}
	var l raft.Log
	if err := s.GetLog(2_500, &l); err != nil || len(l.Data) != len(data) {
		t.Fatalf("entry 2500 after reopening: %v, %d bytes", err, len(l.Data))
	}
	idx++
	if err := s.StoreLog(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
}

// TestDataDirectoryInUseIsRefused: a second `perpd serve` on a running
// node's data directory (a unit started twice, a copied command line)
// waited for the raft log's file lock forever, saying nothing. It is
// refused after a short wait, naming the directory and what to do.
func TestDataDirectoryInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		s2, err := openLogStore(filepath.Join(dir, "raft.db"))
		if err == nil {
			s2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "another process") {
			t.Fatalf("a second open of a held raft log: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second open of a held raft log waits for the lock forever")
	}
}

// A node whose disk filled answered /healthz "behind the leader" (a
// follower) or nothing special at all (a leader that stepped down): raft
// only logs a failed append. The store now remembers its last failed
// write until one succeeds, and StoreProblem (what /healthz and
// perpd_raft_store_failing report) names a full disk, without the path.
func TestStoreProblemNamesAFullDiskUntilAWriteSucceeds(t *testing.T) {
	dir := t.TempDir()
	testdisk.MountTmpfs(t, dir, "4m")
	bs, err := openLogStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	n := &Node{store: &watchedStore{BoltStore: bs}}
	data := make([]byte, 64<<10)
	var idx uint64
	appendOne := func() error {
		idx++
		err := n.store.StoreLogs([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})
		if err != nil {
			idx--
		}
		return err
	}
	if err := appendOne(); err != nil {
		t.Fatal(err)
	}
	if p := n.StoreProblem(); p != "" || !n.StoreHealthy() {
		t.Fatalf("a healthy store: %q", p)
	}
	filler := testdisk.Fill(t, dir)
	var failed error
	for range 100 {
		if failed = appendOne(); failed != nil {
			break
		}
	}
	if !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("appends on a full disk: %v, want ENOSPC", failed)
	}
	p := n.StoreProblem()
	if n.StoreHealthy() || !strings.Contains(p, "disk is full") || strings.Contains(p, dir) {
		t.Fatalf("a store whose append failed on a full disk: %q (healthy %v)", p, n.StoreHealthy())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := appendOne(); err != nil {
		t.Fatalf("an append after the disk was freed: %v", err)
	}
	if p := n.StoreProblem(); p != "" || !n.StoreHealthy() {
		t.Fatalf("after a successful append: %q", p)
	}
	if got, err := bs.LastIndex(); err != nil || got != idx {
		t.Fatalf("last index %d %v, want %d", got, err, idx)
	}
}
