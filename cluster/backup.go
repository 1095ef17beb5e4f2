package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// Scheduled backups. Every --backup-every a node with --backup-dir takes a
// consistent snapshot (the same one `perpd admin snapshot` downloads: the
// state at one applied index, checked for ledger conservation first) and
// writes three files, each atomically (temporary name, fsync, rename):
//
//	perpd-<node>-<UTC time>-<index>.snap         the backup file: exactly what
//	                                              `perpd admin snapshot` writes, so
//	                                              `perpd admin restore --in` takes it
//	perpd-<node>-<UTC time>-<index>.snap.sha256  its SHA-256, in sha256sum format
//	perpd-<node>-<UTC time>-<index>.json         manifest: node, index, term, bytes,
//	                                              SHA-256, state hash, time
//
// The manifest is written last: a backup without one is incomplete and is
// neither listed nor kept (pruning deletes it). Before the manifest is written the snapshot is
// read back and decoded, so a listed backup is known to restore; its state
// hash is the one `perpd admin state` shows for that index. Only the
// newest --backup-keep complete backups of this node are kept.

// Backup describes one complete backup (its manifest).
type Backup struct {
	Node      string    `json:"node"`
	Index     uint64    `json:"index,string"`
	Term      uint64    `json:"term,string"`
	Bytes     int64     `json:"bytes,string"`
	SHA256    string    `json:"sha256"`
	StateHash string    `json:"stateHash"`
	Created   time.Time `json:"created"`
	// File is the backup file's path (not stored in the manifest).
	File string `json:"-"`
}

// BackupConfig schedules backups.
type BackupConfig struct {
	Dir   string
	Every time.Duration
	Keep  int
	Log   hclog.Logger
	// Status, when set (NewBackupStatus), records what the schedule has
	// done, for /metrics.
	Status *BackupStatus
}

// BackupStatus is what a node's scheduled backups have done: a backup
// disk that filled or went read-only fails every backup while the ledger
// checks of snapshots still pass, and only the log said so.
type BackupStatus struct {
	lastOK   atomic.Int64 // Unix ms
	failures atomic.Uint64
}

// LastSuccess is when the newest complete backup of this node was
// written: found in the directory when scheduling began, or written
// since; when there was none, the time scheduling began.
func (s *BackupStatus) LastSuccess() time.Time { return time.UnixMilli(s.lastOK.Load()) }

// Failures counts scheduled backups that failed since the node started.
func (s *BackupStatus) Failures() uint64 { return s.failures.Load() }

// NewBackupStatus starts the status of nodeID's backups into dir: its
// LastSuccess is the newest complete backup there, or now.
func NewBackupStatus(dir, nodeID string) *BackupStatus {
	last := time.Now()
	if list, err := ListBackups(dir, nodeID); err == nil && len(list) > 0 {
		last = list[0].Created
	}
	s := &BackupStatus{}
	s.lastOK.Store(last.UnixMilli())
	return s
}

// backupName matches the files of complete backups' manifests.
var backupName = regexp.MustCompile(`^perpd-(.+)-(\d{8}T\d{6}(?:\.\d+)?Z)-(\d{20})\.json$`)

// backupPart matches every file a backup writes, temporary ones (writeAtomic)
// included: the node, the stem, and whether it is temporary.
var backupPart = regexp.MustCompile(`^(\.tmp-)?(perpd-(.+)-\d{8}T\d{6}(?:\.\d+)?Z-\d{20})\.(?:snap|snap\.sha256|json)(?:-\d+)?$`)

// RunBackups writes a backup every cfg.Every until ctx ends or n stops. A
// failed backup is logged and retried at the next interval.
func RunBackups(ctx context.Context, n *node.Node, cfg BackupConfig) {
	if cfg.Status == nil {
		cfg.Status = NewBackupStatus(cfg.Dir, n.Config().ID)
	}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.Done():
			return
		case <-t.C:
		}
		b, err := WriteBackup(n, cfg.Dir)
		if err != nil {
			cfg.Status.failures.Add(1)
			cfg.Log.Error("scheduled backup failed", "dir", cfg.Dir, "err", err)
			continue
		}
		cfg.Status.lastOK.Store(b.Created.UnixMilli())
		removed, err := PruneBackups(cfg.Dir, n.Config().ID, cfg.Keep)
		if err != nil {
			cfg.Log.Warn("pruning old backups failed", "dir", cfg.Dir, "err", err)
		}
		cfg.Log.Info("backup written", "file", b.File, "index", b.Index, "bytes", b.Bytes,
			"sha256", b.SHA256, "state_hash", b.StateHash, "pruned", removed)
	}
}

// WriteBackup takes a snapshot of n and writes it as a backup into dir.
func WriteBackup(n *node.Node, dir string) (*Backup, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	meta, rc, err := n.TakeSnapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer rc.Close()
	now := time.Now().UTC()
	stem := fmt.Sprintf("perpd-%s-%s-%020d", n.Config().ID, now.Format("20060102T150405.000Z"), meta.Index)
	file := filepath.Join(dir, stem+".snap")
	sum, size, err := writeAtomic(file, func(w io.Writer) error {
		mb, err := json.Marshal(meta)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\n%s\n", backupMagic, mb); err != nil {
			return err
		}
		got, err := io.Copy(w, rc)
		if err != nil {
			return err
		}
		if got != meta.Size {
			return fmt.Errorf("snapshot truncated: %d of %d bytes", got, meta.Size)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := writeChecksum(file, sum); err != nil {
		return nil, err
	}
	// Read it back: a listed backup is one that decodes.
	_, stateHash, err := readBackupFile(file, sum)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", file, err)
	}
	b := &Backup{Node: n.Config().ID, Index: meta.Index, Term: meta.Term, Bytes: size, SHA256: sum,
		StateHash: stateHash, Created: now, File: file}
	if err := writeManifest(filepath.Join(dir, stem+".json"), b); err != nil {
		return nil, err
	}
	return b, nil
}

// writeChecksum writes file's SHA-256 beside it, in sha256sum's format.
func writeChecksum(file, sum string) error {
	_, _, err := writeAtomic(file+".sha256", func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s  %s\n", sum, filepath.Base(file))
		return err
	})
	return err
}

// writeManifest writes a backup's manifest at path.
func writeManifest(path string, b *Backup) error {
	_, _, err := writeAtomic(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	})
	return err
}

// writeAtomic writes path through a temporary file in the same directory,
// synced before the rename and the directory synced after, and returns the
// content's SHA-256 and size.
func writeAtomic(path string, fill func(io.Writer) error) (string, int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, h)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", 0, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return hex.EncodeToString(h.Sum(nil)), cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ListBackups returns the complete backups in dir, newest first (by
// creation time, then index). node, when set, keeps only that node's.
func ListBackups(dir, nodeID string) ([]*Backup, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*Backup
	for _, e := range ents {
		m := backupName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() || (nodeID != "" && m[1] != nodeID) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var bk Backup
		if err := json.Unmarshal(b, &bk); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		bk.File = filepath.Join(dir, strings.TrimSuffix(e.Name(), ".json")+".snap")
		out = append(out, &bk)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.After(out[j].Created)
		}
		return out[i].Index > out[j].Index
	})
	return out, nil
}

// NewestBackup is the newest complete backup in dir (of any node), checked
// against its checksum.
func NewestBackup(dir string) (*Backup, error) {
	list, err := ListBackups(dir, "")
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("no complete backup in %s", dir)
	}
	if err := VerifyBackup(list[0]); err != nil {
		return nil, err
	}
	return list[0], nil
}

// PruneBackups deletes this node's complete backups beyond the newest
// keep, and returns how many it deleted.
func PruneBackups(dir, nodeID string, keep int) (int, error) {
	list, err := ListBackups(dir, nodeID)
	if err != nil {
		return 0, err
	}
	removed := 0
	for i, b := range list {
		if i < keep {
			continue
		}
		// The manifest goes first: a half-deleted backup is incomplete,
		// never listed as restorable.
		manifest := strings.TrimSuffix(b.File, ".snap") + ".json"
		for _, p := range []string{manifest, b.File + ".sha256", b.File} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return removed, err
			}
		}
		removed++
	}
	// What this node's failed or killed backups left: temporary files, and
	// snapshot files whose manifest was never written. Each can hold a
	// snapshot's worth of disk, and nothing lists them. Pruning runs after
	// a backup of this node completed, so none of them is being written.
	kept := map[string]bool{}
	for _, b := range list[:min(keep, len(list))] {
		kept[strings.TrimSuffix(filepath.Base(b.File), ".snap")] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return removed, err
	}
	for _, e := range ents {
		m := backupPart.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() || m[3] != nodeID || (m[1] == "" && kept[m[2]]) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, err
		}
	}
	return removed, nil
}

// ManifestPath is where the manifest of a snapshot file lives: FILE.snap
// has FILE.json (a scheduled backup's name), any other name gets .json
// added.
func ManifestPath(file string) string {
	if stem, ok := strings.CutSuffix(file, ".snap"); ok {
		return stem + ".json"
	}
	return file + ".json"
}

// WriteSnapshotManifest gives a snapshot file that `perpd admin snapshot`
// downloaded what a scheduled backup has: FILE.sha256 and the manifest
// (ManifestPath), written after the file is read back and decoded, so
// `perpd admin restore` can refuse a copy that changed since. node names
// where it came from.
func WriteSnapshotManifest(file, node string) (*Backup, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b := &Backup{Node: node, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Created: time.Now().UTC(), File: file}
	meta, stateHash, err := decodeBackup(file, data)
	if err != nil {
		return nil, err
	}
	b.Index, b.Term, b.StateHash = meta.Index, meta.Term, stateHash
	if err := writeChecksum(file, b.SHA256); err != nil {
		return nil, err
	}
	if err := writeManifest(ManifestPath(file), b); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadManifest reads the manifest beside a snapshot file (ManifestPath).
func ReadManifest(file string) (*Backup, error) {
	raw, err := os.ReadFile(ManifestPath(file))
	if err != nil {
		return nil, err
	}
	var b Backup
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestPath(file), err)
	}
	b.File = file
	return &b, nil
}

// DecodeSnapshotFile decodes a snapshot file without a manifest and
// returns its index and state hash, for an operator to compare with the
// source's. It proves the file is a decodable snapshot, not that it is
// the one that was taken.
func DecodeSnapshotFile(file string) (index uint64, stateHash string, err error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, "", err
	}
	meta, hash, err := decodeBackup(file, data)
	if err != nil {
		return 0, "", err
	}
	return meta.Index, hash, nil
}

// VerifyBackup checks a backup file against its manifest: size, SHA-256,
// and that the snapshot decodes to the recorded state hash.
func VerifyBackup(b *Backup) error {
	fi, err := os.Stat(b.File)
	if err != nil {
		return err
	}
	if fi.Size() != b.Bytes {
		return fmt.Errorf("%s: %d bytes, manifest says %d", b.File, fi.Size(), b.Bytes)
	}
	_, hash, err := readBackupFile(b.File, b.SHA256)
	if err != nil {
		return err
	}
	if hash != b.StateHash {
		return fmt.Errorf("%s: state hash %s, manifest says %s", b.File, hash, b.StateHash)
	}
	return nil
}

// readBackupFile reads a backup file, checks its SHA-256 against sum and
// decodes the snapshot, returning its metadata and state hash.
func readBackupFile(path, sum string) (*raft.SnapshotMeta, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != sum {
		return nil, "", fmt.Errorf("%s: SHA-256 %x does not match %s", path, got, sum)
	}
	return decodeBackup(path, data)
}

// decodeBackup decodes a backup file's bytes (read from path) and returns
// its metadata and state hash.
func decodeBackup(path string, data []byte) (*raft.SnapshotMeta, string, error) {
	meta, snap, err := SplitBackup(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	m := fsm.NewMachine(fsm.Options{})
	if err := m.Restore(snap); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	_, hash, err := m.StateHash()
	return meta, hash, err
}

// SplitBackup parses the backup format (magic line, metadata line,
// snapshot bytes).
func SplitBackup(data []byte) (*raft.SnapshotMeta, []byte, error) {
	magic, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok || string(magic) != backupMagic {
		return nil, nil, errors.New("not a perpd snapshot file")
	}
	mh, snap, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, nil, errors.New("snapshot file has no metadata line")
	}
	var meta raft.SnapshotMeta
	if err := json.Unmarshal(mh, &meta); err != nil {
		return nil, nil, fmt.Errorf("snapshot metadata: %w", err)
	}
	return &meta, snap, nil
}
