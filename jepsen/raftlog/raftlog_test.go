package raftlog

import (
	"fmt"
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
	lm, rp := Check(map[string]string{"n1": dataDir(t, logs), "n2": dataDir(t, logs)}, samples)
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
	lm, rp := Check(map[string]string{"n1": dataDir(t, a), "n2": dataDir(t, b)}, samples)
	if lm.Verdict != checker.Violation || !strings.Contains(strings.Join(lm.Details, "\n"), "differ at index 5") {
		t.Fatalf("log matching %s %v", lm.Verdict, lm.Details)
	}
	// n2's own log does not give the hash it was said to report.
	if rp.Verdict != checker.Violation || !strings.Contains(strings.Join(rp.Details, "\n"), "n2: replaying its store to index 5") {
		t.Fatalf("replay %s %v", rp.Verdict, rp.Details)
	}
	// Entries past what both applied are not compared: a tail that raft
	// may still replace.
	if lm, _ := Check(map[string]string{"n1": dataDir(t, a), "n2": dataDir(t, b)},
		map[string][]checker.StateSample{"n1": {{Applied: 4}}, "n2": {{Applied: 5}}}); lm.Verdict != checker.Valid {
		t.Fatalf("an uncommitted tail: %s %v", lm.Verdict, lm.Details)
	}
}
