package cli

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cluster"
)

func init() { adminExtras = append(adminExtras, adminFeatureLevelCmd, adminVerifyBackupCmd) }

// adminFeatureLevelCmd shows the cluster's feature level and what each
// member advertises, or raises it (docs/deploy.md, rolling upgrades).
func adminFeatureLevelCmd(f *adminFlags) *cobra.Command {
	var raise uint32
	cmd := &cobra.Command{
		Use:   "feature-level",
		Short: "Show the cluster feature level and each member's, or raise it (--raise N) once every member runs a build that implements N",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.ctx()
			defer cancel()
			raising := cmd.Flags().Changed("raise")
			if raising {
				if err := c.Do(ctx, http.MethodPost, "/admin/feature-level", cluster.FeatureLevelRequest{Level: raise}, nil); err != nil {
					return err
				}
			}
			// The raise applied on the leader; wait until this node has
			// applied it too before showing its view.
			for {
				var v cluster.FeatureLevelView
				if err := c.Do(ctx, http.MethodGet, "/admin/feature-level", nil, &v); err != nil {
					return err
				}
				if !raising || v.FeatureLevel >= raise {
					return printJSON(cmd.OutOrStdout(), v)
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("the raise applied on the leader but not yet on %s", f.addr)
				case <-time.After(100 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().Uint32Var(&raise, "raise", 0, "the level to raise the cluster to")
	return cmd
}

// adminVerifyBackupCmd checks backups on this machine: size, SHA-256 and
// that the snapshot decodes to the state hash its manifest records.
func adminVerifyBackupCmd(f *adminFlags) *cobra.Command {
	var dir string
	var all bool
	cmd := &cobra.Command{
		Use:   "verify-backup",
		Short: "Verify the backups in --dir (the newest, or --all) against their manifests; prints the verified ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return fmt.Errorf("--dir is required")
			}
			list, err := cluster.ListBackups(dir, "")
			if err != nil {
				return err
			}
			if len(list) == 0 {
				return fmt.Errorf("no complete backup in %s", dir)
			}
			if !all {
				list = list[:1]
			}
			var out []map[string]any
			for _, b := range list {
				if err := cluster.VerifyBackup(b); err != nil {
					return err
				}
				out = append(out, map[string]any{"file": b.File, "node": b.Node, "index": fmt.Sprint(b.Index),
					"stateHash": b.StateHash, "sha256": b.SHA256, "created": b.Created})
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "backup directory (serve --backup-dir)")
	cmd.Flags().BoolVar(&all, "all", false, "verify every backup, not only the newest")
	return cmd
}
