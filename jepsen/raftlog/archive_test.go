package raftlog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/node"
)

// writeArchive writes records as a node's archive would.
func writeArchive(t *testing.T, dir, id string, recs []node.ArchiveRecord) string {
	t.Helper()
	var b []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	p := filepath.Join(dir, id+".jsonl")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func entry(i uint64, data string) node.ArchiveRecord {
	return node.ArchiveRecord{Index: i, Term: 2, Kind: uint8(raft.LogCommand), Data: []byte(data)}
}

func state(i uint64, hash string, seq uint64) node.ArchiveRecord {
	return node.ArchiveRecord{Index: i, Hash: hash, Seq: seq, NowMs: 1000}
}

func TestArchivesAgreeAcrossRestartsAndRestores(t *testing.T) {
	dir := t.TempDir()
	full := []node.ArchiveRecord{entry(1, "a"), entry(2, "b"), state(2, "h2", 5), entry(3, "c")}
	// n2 restarted and replayed from entry 1; n3 was wiped and restored a
	// snapshot at 2.
	restarted := append(append([]node.ArchiveRecord{}, full[:2]...), full...)
	restored := []node.ArchiveRecord{{Index: 2, Restore: true}, entry(3, "c")}
	res := CheckArchives(map[string]string{
		"n1": writeArchive(t, dir, "n1", full),
		"n2": writeArchive(t, dir, "n2", restarted),
		"n3": writeArchive(t, dir, "n3", restored),
	})
	if res.Verdict != checker.Valid {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
	if last := res.Details[len(res.Details)-1]; !strings.Contains(last, "6 entries and 1 states matched") {
		t.Fatalf("summary %q", last)
	}
}

func TestArchivesNameTheFirstDifferingEntry(t *testing.T) {
	dir := t.TempDir()
	res := CheckArchives(map[string]string{
		"n1": writeArchive(t, dir, "n1", []node.ArchiveRecord{entry(1, "a"), entry(2, "b"), state(2, "h2", 5)}),
		"n2": writeArchive(t, dir, "n2", []node.ArchiveRecord{entry(1, "a"), entry(2, "x"), state(2, "h9", 5)}),
	})
	if res.Verdict != checker.Violation || !strings.Contains(strings.Join(res.Details, "\n"), "entry 2 differs") ||
		!strings.Contains(strings.Join(res.Details, "\n"), "an entry before it already differs") {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
}

// Equal entries, different states: the machine is not deterministic, and
// a replica that restarted and replayed counts as a witness of its own.
func TestArchivesTellANondeterministicMachine(t *testing.T) {
	dir := t.TempDir()
	res := CheckArchives(map[string]string{
		"n1": writeArchive(t, dir, "n1", []node.ArchiveRecord{entry(1, "a"), entry(2, "b"), state(2, "h2", 5),
			entry(1, "a"), entry(2, "b"), state(2, "h2", 7)}),
	})
	all := strings.Join(res.Details, "\n")
	if res.Verdict != checker.Violation || !strings.Contains(all, "n1#0 has hash h2 seq 5") ||
		!strings.Contains(all, "n1#1 has hash h2 seq 7") || !strings.Contains(all, "not deterministic") {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
}
