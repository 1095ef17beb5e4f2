package raftlog

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/jepsen/checker"
)

// noopLogs are n noop commands; salt changes their idempotency keys.
func noopLogs(t *testing.T, n int, salt string) []*raft.Log {
	t.Helper()
	var logs []*raft.Log
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("%s-%d", salt, i)
		if i < n {
			key = fmt.Sprintf("k-%d", i) // only the last entry carries the salt
		}
		c := &fsm.Command{Type: fsm.CmdNoop, TsMs: int64(1000 + i), IdemKey: key, ReqHash: fsm.RequestHash([]byte(key))}
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: b})
	}
	return logs
}

// dataDir writes logs into a node data directory's raft store.
func dataDir(t *testing.T, logs []*raft.Log) string {
	t.Helper()
	dir := t.TempDir()
	s, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hashOf(t *testing.T, logs []*raft.Log) string {
	t.Helper()
	m := fsm.NewMachine(fsm.Options{})
	for _, l := range logs {
		m.ApplyBatch([]uint64{l.Index}, [][]byte{l.Data})
	}
	_, h, err := m.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestStoresOfOneLogPassBothChecks(t *testing.T) {
	logs := noopLogs(t, 5, "same")
	h := hashOf(t, logs)
	samples := map[string][]checker.StateSample{"n1": {{Applied: 5, Hash: h}}, "n2": {{Applied: 3, Hash: "x"}, {Applied: 5, Hash: h}}}
	lm, rp, _ := Check(map[string]string{"n1": dataDir(t, logs), "n2": dataDir(t, logs)}, samples)
	if lm.Verdict != checker.Valid || rp.Verdict != checker.Valid {
		t.Fatalf("log matching %s %v; replay %s %v", lm.Verdict, lm.Details, rp.Verdict, rp.Details)
	}
	if !strings.Contains(lm.Details[0], "5 committed entries alike") {
		t.Fatalf("details %v", lm.Details)
	}
}

func TestStoresThatDifferAreNamed(t *testing.T) {
	a, b := noopLogs(t, 5, "a"), noopLogs(t, 5, "b")
	samples := map[string][]checker.StateSample{"n1": {{Applied: 5, Hash: hashOf(t, a)}}, "n2": {{Applied: 5, Hash: hashOf(t, a)}}}
	lm, rp, _ := Check(map[string]string{"n1": dataDir(t, a), "n2": dataDir(t, b)}, samples)
	if lm.Verdict != checker.Violation || !strings.Contains(strings.Join(lm.Details, "\n"), "differ at index 5") {
		t.Fatalf("log matching %s %v", lm.Verdict, lm.Details)
	}
	// n2's own log does not give the hash it was said to report.
	if rp.Verdict != checker.Violation || !strings.Contains(strings.Join(rp.Details, "\n"), "n2: replaying its store to index 5") {
		t.Fatalf("replay %s %v", rp.Verdict, rp.Details)
	}
	// Entries past what both applied are not compared: a tail that raft
	// may still replace.
	if lm, _, _ := Check(map[string]string{"n1": dataDir(t, a), "n2": dataDir(t, b)},
		map[string][]checker.StateSample{"n1": {{Applied: 4}}, "n2": {{Applied: 5}}}); lm.Verdict != checker.Valid {
		t.Fatalf("an uncommitted tail: %s %v", lm.Verdict, lm.Details)
	}
}

// storeWithSnapshot writes logs and a snapshot's metadata (index, term)
// into a node data directory.
func storeWithSnapshot(t *testing.T, logs []*raft.Log, index, term uint64) string {
	t.Helper()
	dir := dataDir(t, logs)
	snaps, err := raft.NewFileSnapshotStore(dir, 3, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A node that installed a leader's snapshot over a log ending before it
// keeps the entries below (hashicorp/raft#697): the 2026-11-27 run, where
// n3 had led and was deposed with an uncommitted entry. Log matching
// compares what each node could apply from its log; the entries below are
// the below-snapshot check's, and one that is not the committed entry is a
// violation there.
func TestEntriesBelowAnInstalledSnapshot(t *testing.T) {
	committed := noopLogs(t, 12, "c")
	for _, l := range committed[5:] {
		l.Term = 3
	}
	// n2: entries 1-5 alike, 6 of the deposed leader's term 2, then the
	// snapshot at 8 and the log after it.
	stale := noopLogs(t, 6, "stale")
	stale[5].Term = 2
	var n2 []*raft.Log
	n2 = append(n2, stale...)
	n2 = append(n2, committed[8:]...)
	samples := map[string][]checker.StateSample{"n1": {{Applied: 12}}, "n2": {{Applied: 12}}}

	check := func(n2dir string) (checker.Result, checker.Result) {
		s, err := Open(n2dir)
		if err != nil {
			t.Fatal(err)
		}
		if s.From != 9 || s.Below != 8 {
			t.Fatalf("n2 from %d below %d, want 9 and 8", s.From, s.Below)
		}
		s.Close()
		lm, _, below := Check(map[string]string{"n1": dataDir(t, committed), "n2": n2dir}, samples)
		return lm, below
	}
	for name, dir := range map[string]string{
		"a gap":                               dataDir(t, n2),
		"a snapshot whose index it lacks":     storeWithSnapshot(t, n2, 8, 3),
		"a snapshot it holds at another term": storeWithSnapshot(t, append(append(append([]*raft.Log{}, stale...), &raft.Log{Index: 7, Term: 2}, &raft.Log{Index: 8, Term: 2}), committed[8:]...), 8, 3),
	} {
		lm, below := check(dir)
		if lm.Verdict != checker.Valid || !strings.Contains(strings.Join(lm.Details, "\n"), "n1 and n2: 4 committed entries alike") {
			t.Errorf("%s: log matching %s %v", name, lm.Verdict, lm.Details)
		}
		if below.Verdict != checker.Violation || !strings.Contains(strings.Join(below.Details, "\n"), "not the committed ones, first at index 6: term 2") {
			t.Errorf("%s: below-snapshot %s %v", name, below.Verdict, below.Details)
		}
	}

	// Entries below a snapshot that are the committed ones are no finding.
	var clean []*raft.Log
	clean = append(clean, committed[:6]...)
	clean = append(clean, committed[8:]...)
	lm, below := check(dataDir(t, clean))
	if lm.Verdict != checker.Valid || below.Verdict != checker.Valid || !strings.Contains(strings.Join(below.Details, "\n"), "6 compared, all the committed ones") {
		t.Fatalf("log matching %s %v; below-snapshot %s %v", lm.Verdict, lm.Details, below.Verdict, below.Details)
	}
}

// A node whose stale entries went on past an installed snapshot keeps the
// snapshot's point in its log (node.dropUnvouched): a no-op of the
// snapshot's term standing for the committed entry. Both checks start after
// it; below-snapshot compares only its term.
func TestASnapshotPointStandsForTheEntry(t *testing.T) {
	committed := noopLogs(t, 12, "c")
	for _, l := range committed[5:] {
		l.Term = 3
	}
	samples := map[string][]checker.StateSample{"n1": {{Applied: 12}}, "n2": {{Applied: 12}}}
	withPoint := func(term uint64) string {
		point := &raft.Log{Index: 8, Term: term, Type: raft.LogNoop, Data: []byte("perpd: snapshot point")}
		return storeWithSnapshot(t, append([]*raft.Log{point}, committed[8:]...), 8, 3)
	}
	dir := withPoint(3)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.From != 9 || s.Below != 8 {
		t.Fatalf("from %d below %d, want 9 and 8", s.From, s.Below)
	}
	s.Close()
	lm, _, below := Check(map[string]string{"n1": dataDir(t, committed), "n2": dir}, samples)
	if lm.Verdict != checker.Valid || !strings.Contains(strings.Join(lm.Details, "\n"), "n1 and n2: 4 committed entries alike") {
		t.Errorf("log matching %s %v", lm.Verdict, lm.Details)
	}
	if below.Verdict != checker.Valid || !strings.Contains(strings.Join(below.Details, "\n"), "1 compared, all the committed ones") {
		t.Errorf("below-snapshot %s %v", below.Verdict, below.Details)
	}
	// A point of another term than the committed entry's is a finding.
	_, _, below = Check(map[string]string{"n1": dataDir(t, committed), "n2": withPoint(2)}, samples)
	if below.Verdict != checker.Violation {
		t.Errorf("a point of the wrong term: below-snapshot %s %v", below.Verdict, below.Details)
	}
}
