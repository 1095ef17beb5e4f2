package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cluster"
)

func devnetCmd() *cobra.Command {
	var cfg cluster.DevnetConfig
	var clockOffset time.Duration
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "Run a local N-node cluster as child processes until Ctrl-C",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked here, not only by each child: a bad name fails at once.
			if _, err := deploymentProfile(cfg.Deployment); err != nil {
				return err
			}
			extra, err := devnetClockArgs(cfg.Deployment, clockOffset)
			if err != nil {
				return err
			}
			cfg.ExtraArgs = append(cfg.ExtraArgs, extra...)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
				return err
			}
			d, err := cluster.StartDevnet(ctx, cfg)
			if err != nil {
				return err
			}
			defer d.Stop()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "devnet: %d nodes up (logs in %s/<id>.log)\n", len(d.Nodes), cfg.Dir)
			for _, n := range d.Nodes {
				fmt.Fprintf(out, "  %-6s http=%s raft=%s admin=%s\n", n.ID, n.HTTP, n.Raft, n.Admin)
			}
			fmt.Fprintf(out, "raft and admin run over mutual TLS (throwaway CA in %s)\n", filepath.Dir(d.Admin.CA))
			fmt.Fprintf(out, "try: %s\n", devnetAdminCommand(d))
			fmt.Fprintln(out, "Ctrl-C stops every node.")
			<-ctx.Done()
			fmt.Fprintln(out, "devnet: stopping")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Nodes, "nodes", 3, "number of nodes")
	fl.StringVar(&cfg.Dir, "dir", "./devnet", "directory for the nodes' data and logs")
	fl.IntVar(&cfg.HTTPBase, "http-base", 8080, "HTTP port of node1; node i uses base+i-1 (raft base-1000, admin base+1000)")
	fl.IntVar(&cfg.RaftBase, "raft-base", 0, "raft port of node1 (default http-base-1000)")
	fl.IntVar(&cfg.AdminBase, "admin-base", 0, "admin port of node1 (default http-base+1000)")
	fl.DurationVar(&clockOffset, "clock-offset", 0, "passed to every node's serve --clock-offset: a fresh devnet starts its log time that far from the calendar, e.g. to cross a funding boundary soon (not on prod)")
	fl.StringVar(&cfg.Host, "host", "127.0.0.1", "listen host")
	fl.StringVar(&cfg.Deployment, "deployment", "testnet", "deployment profile of every node: testnet, local or bench (raised rate budgets for perpd bench)")
	return cmd
}

// devnetClockArgs are the children's arguments for --clock-offset, checked
// here as serve checks them, so that a bad value fails before any child
// starts rather than in each child's log.
func devnetClockArgs(deployment string, off time.Duration) ([]string, error) {
	switch {
	case off == 0:
		return nil, nil
	case deployment == "prod":
		return nil, fmt.Errorf("--clock-offset is a test setting, refused on prod")
	case off < -maxClockOffset || off > maxClockOffset:
		return nil, fmt.Errorf("--clock-offset %v: within ±%v", off, maxClockOffset)
	}
	return []string{"--clock-offset", off.String()}, nil
}

// devnetAdminCommand is the admin command an operator runs against node1:
// the token is read from node1's data directory, so no secret is printed.
func devnetAdminCommand(d *cluster.Devnet) string {
	args := append([]string{"perpd", "admin", "status", "--human", "--addr", d.Nodes[0].Admin, "--data", d.Nodes[0].Data}, d.Admin.Args()...)
	return strings.Join(args, " ")
}
