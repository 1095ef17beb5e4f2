package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/node"
)

// opsFlags are serve's operations flags (issue 16): log format, the
// read-only metrics token, scheduled backups, the scheduled replica check.
type opsFlags struct {
	logFormat        string
	metricsTokenFile string
	backupDir        string
	backupEvery      time.Duration
	backupKeep       int
	gcPercent        int
	memoryLimitMB    int64
	hugePages        bool
	replicaCheck     time.Duration

	// backupEverySet and backupKeepSet: the operator gave the flag, on the
	// command line or as its PERPD_ variable (only then is it an error
	// without --backup-dir).
	backupEverySet, backupKeepSet bool
}

func addOpsFlags(fl *pflag.FlagSet, f *opsFlags) {
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text (human) or json (one object per line, for a log shipper)")
	fl.StringVar(&f.metricsTokenFile, "metrics-token-file", "", "file (mode 0600) holding a read-only bearer token accepted by GET /metrics on the admin listener beside the admin token (default: none, the admin token only)")
	fl.StringVar(&f.backupDir, "backup-dir", "", "directory for scheduled backups: consistent, checked snapshots with a SHA-256 and a manifest each (default: no backups)")
	fl.DurationVar(&f.backupEvery, "backup-every", time.Hour, "interval between scheduled backups (at least 1m; refused without --backup-dir)")
	fl.IntVar(&f.backupKeep, "backup-keep", 24, "backups of this node kept in --backup-dir; older ones are deleted (refused without --backup-dir)")
	fl.IntVar(&f.gcPercent, "gc-percent", DefaultGCPercent, "garbage collector pace (Go's GOGC; the GOGC environment variable wins): heap growth in percent of the live heap before a collection")
	fl.DurationVar(&f.replicaCheck, "replica-check-interval", cluster.DefaultReplicaCheckInterval, "while this node leads, compare every member's state hash at one index this often and export the outcome as perpd_replicas_check_* metrics (at least 10s; 0: off)")
	fl.BoolVar(&f.hugePages, "huge-pages", true, "ask Linux for transparent huge pages for the heap when the machine leaves them to each program (transparent_hugepage madvise); fewer page faults as the state grows")
	fl.Int64Var(&f.memoryLimitMB, "memory-limit-mb", -1, "soft memory limit in MiB (Go's GOMEMLIMIT, which wins): the collector works harder near it; -1 is three quarters of the machine's memory, 0 none")
}

// validate checks the flags before anything starts.
func (f *opsFlags) validate() error {
	switch f.logFormat {
	case "text", "json":
	default:
		return fmt.Errorf("--log-format %q: want text or json", f.logFormat)
	}
	if f.gcPercent < 10 {
		return fmt.Errorf("--gc-percent %d: at least 10", f.gcPercent)
	}
	if f.memoryLimitMB < -1 {
		return fmt.Errorf("--memory-limit-mb %d: -1 (three quarters of the machine), 0 (none) or a size", f.memoryLimitMB)
	}
	if f.replicaCheck != 0 && f.replicaCheck < cluster.MinReplicaCheckInterval {
		return fmt.Errorf("--replica-check-interval %v: at least %v, or 0 to switch the check off", f.replicaCheck, cluster.MinReplicaCheckInterval)
	}
	// Without --backup-dir no backup runs: an operator who gave either
	// believed otherwise, and would learn it when a restore needed one.
	if f.backupDir == "" && f.backupEverySet {
		return fmt.Errorf("--backup-every needs --backup-dir (no backups are taken without it)")
	}
	if f.backupDir == "" && f.backupKeepSet {
		return fmt.Errorf("--backup-keep needs --backup-dir (no backups are taken without it)")
	}
	if f.backupDir != "" {
		if f.backupEvery < time.Minute {
			return fmt.Errorf("--backup-every %v: at least 1m", f.backupEvery)
		}
		if f.backupKeep < 1 {
			return fmt.Errorf("--backup-keep %d: at least 1", f.backupKeep)
		}
		// The first backup runs --backup-every after the start: a directory
		// it cannot write would go unnoticed until then.
		if err := checkWritableDir(f.backupDir); err != nil {
			return fmt.Errorf("--backup-dir %s: %w; give a directory this node's user can write", f.backupDir, err)
		}
	}
	return nil
}

// checkWritableDir makes dir (0700) when missing and writes and removes a
// file in it.
func checkWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".perpd-write-check-*")
	if err != nil {
		return err
	}
	_ = tmp.Close()
	return os.Remove(tmp.Name())
}

// logger is the node's root logger in the chosen format, writing to out.
func (f *opsFlags) logger(level, id string, out io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name: "perpd", Level: hclog.LevelFromString(level), JSONFormat: f.logFormat == "json", Output: out,
	}).With("node", id)
}

// metricsToken reads --metrics-token-file ("" when unset).
func (f *opsFlags) metricsToken() (string, error) {
	if f.metricsTokenFile == "" {
		return "", nil
	}
	t, err := node.ReadSecretFile(f.metricsTokenFile)
	if err != nil {
		return "", fmt.Errorf("--metrics-token-file: %w", err)
	}
	return t, nil
}

// startBackups runs scheduled backups until ctx ends, when --backup-dir is
// set, and exports what they do on asm's /metrics.
func (f *opsFlags) startBackups(ctx context.Context, n *node.Node, asm *Assembly, log hclog.Logger) {
	if f.backupDir == "" {
		return
	}
	log.Info("scheduled backups", "dir", f.backupDir, "every", f.backupEvery, "keep", f.backupKeep)
	status := cluster.NewBackupStatus(f.backupDir, n.Config().ID)
	asm.WatchBackups(status, f.backupEvery)
	go cluster.RunBackups(ctx, n, cluster.BackupConfig{Dir: f.backupDir, Every: f.backupEvery, Keep: f.backupKeep,
		Log: log.Named("backup"), Status: status})
}
