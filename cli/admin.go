package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/node"
)

type adminFlags struct {
	addr, token, tokenFile, data string
	tlsFlags
	human       bool
	timeout     time.Duration
	tokenOnArgv bool
}

// client is an admin client with the operator's token (--admin-token-file,
// else PERPD_ADMIN_TOKEN, else --data/admin-token) and, with the TLS flags,
// the operator's certificate.
func (f *adminFlags) client() (*cluster.AdminClient, error) {
	if f.tokenOnArgv {
		return nil, errTokenOnArgv
	}
	// An expired context fails the call before it is sent, with a bare
	// "context deadline exceeded" that reads like a node not answering.
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: give a positive duration, e.g. 30s", f.timeout)
	}
	tok := f.token // PERPD_ADMIN_TOKEN, through applyEnv
	if f.tokenFile != "" {
		t, err := node.ReadSecretFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-token-file: %w", err)
		}
		tok = t
	}
	if tok == "" {
		t, err := node.ReadSecretFile(filepath.Join(f.data, "admin-token"))
		if err != nil {
			return nil, fmt.Errorf("no admin token: pass --admin-token-file, set PERPD_ADMIN_TOKEN, or point --data at the node's data directory (%v)", err)
		}
		tok = t
	}
	pt, err := f.load()
	if err != nil {
		return nil, err
	}
	c := cluster.NewAdminClient(f.addr, tok)
	// --timeout bounds each call (f.ctx); the client's own 30 s default
	// would otherwise cut a longer one short (a replicas check at scale).
	c.HTTP.Timeout = f.timeout
	if pt != nil {
		c.UseTLS(pt.ClientConfig())
	}
	return c, nil
}

func (f *adminFlags) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), f.timeout)
}

// humanOutput is true with --human or when stdout is a terminal.
func (f *adminFlags) humanOutput() bool {
	return f.human || isatty.IsTerminal(os.Stdout.Fd())
}

func adminCmd() *cobra.Command {
	f := &adminFlags{}
	var persistent *pflag.FlagSet // the connection settings, set below
	cmd := &cobra.Command{Use: "admin", Short: "Operate a cluster through a node's admin listener",
		// This hook replaces the root's, so it applies the environment too,
		// to the connection settings only (the flags below): what a command
		// acts on (--id, --raft, --in) and its overrides (--force,
		// --replace, --unverified) are given on its command line. A shell
		// with a node's env file sourced holds PERPD_ID, and `admin remove`
		// without --id removed that node instead of refusing.
		PersistentPreRunE: func(c *cobra.Command, args []string) error {
			f.tokenOnArgv = c.Flags().Changed("admin-token")
			return applyEnvTo(c, func(fl *pflag.Flag) bool { return persistent.Lookup(fl.Name) == fl })
		}}
	pf := cmd.PersistentFlags()
	persistent = pf
	pf.StringVar(&f.addr, "addr", "127.0.0.1:9080", "admin listener of any node")
	addTokenFlags(pf, &f.token, &f.tokenFile, "file holding the node's admin token (default: PERPD_ADMIN_TOKEN, else --data/admin-token)")
	pf.StringVar(&f.data, "data", "./data", "data directory to read the admin token from when none is given")
	addTLSFlags(pf, &f.tlsFlags, "the operator's client certificate, when the cluster runs TLS")
	pf.BoolVar(&f.human, "human", false, "print tables instead of JSON (status, state, replicas, transfer-leadership, market list)")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the node")
	cmd.AddCommand(adminStatusCmd(f), adminStateCmd(f), adminReplicasCmd(f), adminJoinCmd(f), adminRemoveCmd(f),
		adminTransferCmd(f), adminSnapshotCmd(f), adminRestoreCmd(f))
	for _, extra := range adminExtras {
		cmd.AddCommand(extra(f))
	}
	return cmd
}

// adminExtras are domain admin commands (market, oracle, rail).
var adminExtras []func(f *adminFlags) *cobra.Command

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// adminShowCmd is an admin command that reads one view from the node and
// prints it: as JSON, or through human with --human. check, when set, may
// fail the command after printing (a non-zero exit for scripts).
func adminShowCmd[V any](f *adminFlags, use, short string, fetch func(*cluster.AdminClient, context.Context) (V, error),
	human func(io.Writer, V) error, check func(V) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.ctx()
			defer cancel()
			v, err := fetch(c, ctx)
			if err != nil {
				return err
			}
			if f.humanOutput() {
				err = human(cmd.OutOrStdout(), v)
			} else {
				err = printJSON(cmd.OutOrStdout(), v)
			}
			if err == nil && check != nil {
				err = check(v)
			}
			return err
		},
	}
}

func adminStatusCmd(f *adminFlags) *cobra.Command {
	return adminShowCmd(f, "status", "Show a node's view of the cluster: leader, members, indexes, state hash",
		(*cluster.AdminClient).Status, printStatusTable, func(st *node.Status) error {
			if st.Halted != "" {
				return errors.New(st.Halted) // a non-zero exit, for scripts
			}
			return nil
		})
}

func printStatusTable(w io.Writer, st *node.Status) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	if st.Halted != "" {
		fmt.Fprintf(tw, "HALTED\t%s\n", st.Halted)
	}
	fmt.Fprintf(tw, "node\t%s (%s)\n", st.ID, st.State)
	if st.Leader.ID == "" {
		fmt.Fprintf(tw, "leader\tnone known\n")
	} else {
		fmt.Fprintf(tw, "leader\t%s raft=%s http=%s\n", st.Leader.ID, st.Leader.Raft, st.Leader.HTTP)
	}
	if !slices.ContainsFunc(st.Members, func(m node.Member) bool { return m.ID == st.ID }) {
		fmt.Fprintf(tw, "member\tno: %s is not in the configuration it holds (removed, or not joined yet)\n", st.ID)
	}
	fmt.Fprintf(tw, "applied/commit\t%s / %s\n", st.AppliedIndex, st.CommitIndex)
	fmt.Fprintf(tw, "last snapshot\t%s\n", st.LastSnapshotIndex)
	fmt.Fprintf(tw, "state hash\t%s\n\n", st.StateHash)
	fmt.Fprintln(tw, "MEMBER\tRAFT\tSUFFRAGE")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.ID, m.Raft, m.Suffrage)
	}
	return tw.Flush()
}

func adminStateCmd(f *adminFlags) *cobra.Command {
	return adminShowCmd(f, "state", "Print the node's applied index and state hash, for comparing replicas",
		(*cluster.AdminClient).State, func(w io.Writer, st *cluster.StateView) error {
			_, err := fmt.Fprintf(w, "applied %s  hash %s\n", st.AppliedIndex, st.StateHash)
			return err
		}, nil)
}

// errReplicasDiffer makes `admin replicas` exit non-zero, for scripts.
var errReplicasDiffer = errors.New("the replicas do not agree, or a member did not answer: docs/deploy.md, \"When a node dies\" " +
	"(a member down) and its \"Diverged replica\" (hashes that differ), say what to do")

func adminReplicasCmd(f *adminFlags) *cobra.Command {
	return adminShowCmd(f, "replicas", "Compare every member's state hash at the lowest applied index among them; exit 1 unless they agree",
		(*cluster.AdminClient).Replicas, func(w io.Writer, v *cluster.ReplicasView) error {
			for _, m := range v.Members {
				if _, err := fmt.Fprintf(w, "%-8s applied %-8s hash at %s: %s%s\n", m.ID, m.AppliedIndex, v.Index, m.StateHash, m.Error); err != nil {
					return err
				}
			}
			return nil
		}, func(v *cluster.ReplicasView) error {
			if !v.Agree {
				return errReplicasDiffer
			}
			return nil
		})
}

func adminJoinCmd(f *adminFlags) *cobra.Command {
	var id, raftAddr string
	var replace, force bool
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Add a voting member (any node relays it to the leader)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" || raftAddr == "" {
				return fmt.Errorf("--id and --raft are required")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.ctx()
			defer cancel()
			out, err := c.JoinWith(ctx, cluster.JoinRequest{ID: id, Raft: raftAddr, Replace: replace, Force: force})
			if err != nil {
				return err
			}
			return printRaw(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "id of the node to add")
	cmd.Flags().StringVar(&raftAddr, "raft", "", "raft address of the node to add")
	cmd.Flags().BoolVar(&replace, "replace", false, "move a member already in the cluster to this raft address (refused without it)")
	cmd.Flags().BoolVar(&force, "force", false, "add it even if a majority of the voters would then not answer (refused without it: the cluster would stop)")
	return cmd
}

func printRaw(w io.Writer, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return printJSON(w, v)
}

func adminRemoveCmd(f *adminFlags) *cobra.Command {
	var id string
	var force bool
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Remove a member from the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				return fmt.Errorf("--id is required")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.ctx()
			defer cancel()
			out, err := c.RemoveWith(ctx, cluster.RemoveRequest{ID: id, Force: force})
			if err != nil {
				return err
			}
			return printRaw(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "id of the member to remove")
	cmd.Flags().BoolVar(&force, "force", false, "remove it even if a majority of the voters left would not answer (refused without it: the cluster would stop)")
	return cmd
}

func adminTransferCmd(f *adminFlags) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "transfer-leadership",
		Short: "Hand leadership to another member (--to ID, or any)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.ctx()
			defer cancel()
			st, err := c.TransferLeadership(ctx, to)
			if err != nil {
				return err
			}
			if f.humanOutput() {
				return printStatusTable(cmd.OutOrStdout(), st)
			}
			return printJSON(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "id of the member to lead (default: any up-to-date follower)")
	return cmd
}

// syncFile flushes a file to the disk (tests make it fail).
var syncFile = (*os.File).Sync

func adminSnapshotCmd(f *adminFlags) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take a consistent snapshot and download it to a file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			// Checked before the node is asked: the rename would replace an
			// earlier snapshot (and its checksum and manifest) without a word.
			// FILE and FILE.snap share a manifest (cluster.ManifestPath), so
			// the manifest is checked too: writing one over another's left
			// that snapshot unverifiable.
			for _, p := range []string{out, cluster.ManifestPath(out)} {
				switch _, err := os.Lstat(p); {
				case err == nil && !force:
					return fmt.Errorf("--out %s: %s exists: refusing to replace it (a snapshot, or the manifest of another); pass --force to overwrite", out, p)
				case err != nil && !errors.Is(err, os.ErrNotExist):
					return fmt.Errorf("--out %s: %w", out, err)
				}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			tmp := out + ".partial"
			// The whole venue's books: private, as a scheduled backup is
			// (Chmod too: a stale .partial keeps its mode through OpenFile).
			file, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			if err := file.Chmod(0o600); err != nil {
				file.Close()
				return err
			}
			defer os.Remove(tmp)
			var progress func(done, total int64)
			if isatty.IsTerminal(os.Stderr.Fd()) {
				progress = progressBar(os.Stderr)
			}
			meta, err := c.Snapshot(context.Background(), file, progress)
			if err == nil {
				// Synced before it is named: a power loss must not leave
				// --out (and its synced manifest) over missing data.
				err = syncFile(file)
			}
			if cerr := file.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Rename(tmp, out); err != nil {
				return err
			}
			// The checksum and manifest a scheduled backup has, so that
			// restore can refuse a copy that changed since.
			b, err := cluster.WriteSnapshotManifest(out, f.addr)
			if err != nil {
				return fmt.Errorf("%s was written but does not verify: %w", out, err)
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{
				"file": out, "index": fmt.Sprint(meta.Index), "term": fmt.Sprint(meta.Term), "bytes": fmt.Sprint(b.Bytes),
				"sha256": b.SHA256, "stateHash": b.StateHash, "manifest": cluster.ManifestPath(out),
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the snapshot to (FILE.sha256 and its manifest are written beside it); an existing FILE is refused")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing --out FILE and its FILE.sha256 and manifest")
	return cmd
}

// progressBar draws a one-line bar on a terminal.
func progressBar(w io.Writer) func(done, total int64) {
	last := time.Time{}
	return func(done, total int64) {
		if time.Since(last) < 100*time.Millisecond && done < total {
			return
		}
		last = time.Now()
		pct := 100
		if total > 0 {
			pct = int(done * 100 / total)
		}
		bar := strings.Repeat("#", pct/4) + strings.Repeat(".", 25-pct/4)
		fmt.Fprintf(w, "\r[%s] %3d%% %d/%d bytes", bar, pct, done, total)
		if done >= total {
			fmt.Fprintln(w)
		}
	}
}

func adminRestoreCmd(f *adminFlags) *cobra.Command {
	var in string
	var unverified bool
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Restore the whole cluster from a snapshot file (disaster recovery)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if in == "" {
				return fmt.Errorf("--in is required")
			}
			// A mistyped path is named as such, not as a file without a
			// manifest (which pointed the operator at --unverified).
			if _, err := os.Stat(in); err != nil {
				return fmt.Errorf("--in: %w", err)
			}
			// Check the file before the cluster sees it: a snapshot that
			// changed since it was taken (a flipped byte in a stored answer
			// still decodes) must never be installed.
			var want string
			switch m, err := cluster.ReadManifest(in); {
			case err == nil:
				if err := cluster.VerifyBackup(m); err != nil {
					return fmt.Errorf("refusing to restore: %w", err)
				}
				want = m.StateHash
			case !errors.Is(err, os.ErrNotExist):
				return fmt.Errorf("refusing to restore: %w", err)
			case !unverified:
				return fmt.Errorf("refusing to restore: no manifest %s beside the file, so it cannot be checked against the snapshot that was taken; "+
					"`perpd admin snapshot` and scheduled backups write one. Pass --unverified to restore it anyway", cluster.ManifestPath(in))
			default:
				index, hash, err := cluster.DecodeSnapshotFile(in)
				if err != nil {
					return fmt.Errorf("refusing to restore: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "restoring an unverified snapshot: index %d, state hash %s; compare it with the source's\n", index, hash)
			}
			b, err := os.ReadFile(in)
			if err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			st, err := c.Restore(context.Background(), b)
			if err != nil {
				return err
			}
			if want != "" && st.RestoredStateHash != want {
				return fmt.Errorf("restored, but the cluster's state hash %s differs from the manifest's %s: investigate before serving", st.RestoredStateHash, want)
			}
			return printJSON(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "snapshot file written by perpd admin snapshot (its manifest FILE.json beside it)")
	cmd.Flags().BoolVar(&unverified, "unverified", false, "restore a file that has no manifest (only checked to decode)")
	return cmd
}
