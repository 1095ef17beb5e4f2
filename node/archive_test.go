package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

func archiveNoops(t *testing.T, from, to uint64) []*raft.Log {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		key := fmt.Sprintf("k%d", i)
		c := &fsm.Command{Type: fsm.CmdNoop, TsMs: int64(1000 + i), IdemKey: key, ReqHash: fsm.RequestHash([]byte(key))}
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		l := &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: b}
		if i%10 == 0 {
			l = &raft.Log{Index: i, Term: 2, Type: raft.LogNoop}
		}
		logs = append(logs, l)
	}
	return logs
}

func readArchive(t *testing.T, path string) []ArchiveRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ArchiveRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r ArchiveRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// The archive keeps every applied entry in order and the state hash at
// every multiple of ArchiveHashEvery, whatever batches raft hands over;
// those hashes are the ones a machine that applied the same entries one by
// one reaches.
func TestApplyArchiveRecordsEntriesAndHashesAtFixedIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive.jsonl")
	a, err := openApplyArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	f := newRaftFSM(fsm.NewMachine(fsm.Options{}), nil)
	f.archive = a
	logs := archiveNoops(t, 1, 40)
	// Batches that straddle the hash points.
	for _, b := range [][2]int{{0, 5}, {5, 21}, {21, 22}, {22, 40}} {
		if out := f.ApplyBatch(logs[b[0]:b[1]]); len(out) != b[1]-b[0] {
			t.Fatalf("batch %v: %d answers", b, len(out))
		}
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}

	ref := fsm.NewMachine(fsm.Options{})
	want := map[uint64]string{}
	for _, l := range logs {
		var d []byte
		if l.Type == raft.LogCommand {
			d = l.Data
		}
		ref.ApplyBatch([]uint64{l.Index}, [][]byte{d})
		if l.Index%ArchiveHashEvery == 0 {
			_, want[l.Index], _ = ref.StateHash()
		}
	}
	var next uint64 = 1
	hashes := 0
	for _, r := range readArchive(t, path) {
		if r.Hash != "" {
			if want[r.Index] != r.Hash || r.Index != next-1 {
				t.Fatalf("hash record %+v after entry %d, want hash %s", r, next-1, want[r.Index])
			}
			hashes++
			continue
		}
		if r.Index != next || r.Term != 2 {
			t.Fatalf("entry record %+v, want index %d", r, next)
		}
		if l := logs[next-1]; uint8(l.Type) != r.Kind || string(l.Data) != string(r.Data) {
			t.Fatalf("entry %d recorded as %+v", next, r)
		}
		next++
	}
	if next != 41 || hashes != 2 {
		t.Fatalf("%d entries and %d hashes recorded, want 40 and 2", next-1, hashes)
	}
}

func TestArchiveCutsAfterHashPoints(t *testing.T) {
	logs := archiveNoops(t, 14, 50)
	var got [][2]uint64
	for _, run := range archiveCuts(logs) {
		got = append(got, [2]uint64{run[0].Index, run[len(run)-1].Index})
	}
	want := [][2]uint64{{14, 16}, {17, 32}, {33, 48}, {49, 50}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cuts %v, want %v", got, want)
	}
}

// A kill -9 can cut the archive's last line short. The next start appends
// on a line of its own, so its first record (here the restore that begins
// the incarnation) reads, instead of being glued to the torn line and lost
// with it.
func TestApplyArchiveStartsAfterATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive")
	if err := os.WriteFile(path, []byte(`{"i":1,"t":2,"k":0,"d":"YQ=="}`+"\n"+`{"i":2,"t":`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := openApplyArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	a.restored(5)
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	var last ArchiveRecord
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || !last.Restore || last.Index != 5 {
		t.Fatalf("the record written after the torn line reads %+v (%v); the archive is %q", last, err, raw)
	}
}
