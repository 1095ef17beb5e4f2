package cluster_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster"
)

// A backup that never got its manifest (the node was killed, or the disk
// filled, after the snapshot file was written) and a temporary file a kill
// left behind are not backups: no restore lists them, and pruning deletes
// them with the old backups, or every failed attempt keeps a snapshot's
// worth of disk for good and a backup disk once full stays full. Another
// node's files in a shared directory are its own to prune.
func TestPruneBackupsDeletesWhatFailedBackupsLeft(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(stem string, created time.Time) {
		t.Helper()
		m, err := json.Marshal(cluster.Backup{Node: "n1", Index: 7, Created: created})
		if err != nil {
			t.Fatal(err)
		}
		write(stem+".json", m)
		write(stem+".snap", []byte("snapshot"))
		write(stem+".snap.sha256", []byte("sum"))
	}
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	complete("perpd-n1-20250102T030405.000Z-00000000000000000007", t0)
	complete("perpd-n1-20250102T030505.000Z-00000000000000000009", t0.Add(time.Minute))
	keep := []string{}
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() {
			keep = append(keep, d.Name())
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// What failed backups of n1 left: a snapshot without its manifest
	// (with and without its checksum), and a kill's temporary files.
	write("perpd-n1-20250102T030435.000Z-00000000000000000008.snap", []byte("snapshot"))
	write("perpd-n1-20250102T030435.000Z-00000000000000000008.snap.sha256", []byte("sum"))
	write("perpd-n1-20250102T030535.000Z-00000000000000000010.snap", []byte("snapshot"))
	write(".tmp-perpd-n1-20250102T030605.000Z-00000000000000000011.snap-123456", []byte("snaps"))
	write(".tmp-perpd-n1-20250102T030405.000Z-00000000000000000007.json-99", []byte("{"))
	// n2 shares the directory and may be writing these right now.
	others := []string{"perpd-n2-20250102T030435.000Z-00000000000000000008.snap", ".tmp-perpd-n2-20250102T030605.000Z-00000000000000000011.snap-1"}
	for _, name := range others {
		write(name, []byte("snapshot"))
	}
	keep = append(keep, others...)

	if _, err := cluster.PruneBackups(dir, "n1", 2); err != nil {
		t.Fatal(err)
	}
	var left []string
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		left = append(left, e.Name())
	}
	slices.Sort(keep)
	if !slices.Equal(left, keep) {
		t.Fatalf("after pruning:\n%q\nwant:\n%q", left, keep)
	}
}
