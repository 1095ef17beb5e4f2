package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/node"
)

type serveFlags struct {
	id, data, httpAddr, raftAddr, adminAddr, join, deployment, token, logLevel string
	bootstrap, checkInvariants                                                 bool
	snapThreshold, trailingLogs                                                uint64
	faucetGrants                                                               int
	faucetGrantSats                                                            int64
}

func serveCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one perpd node (REST, WebSocket, raft and admin listeners)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServe(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "node1", "this node's unique id in the cluster")
	fl.StringVar(&f.data, "data", "./data", "data directory (raft log, snapshots, admin token)")
	fl.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "REST and WebSocket listen address")
	fl.StringVar(&f.raftAddr, "raft", "127.0.0.1:7080", "raft transport address (bind and advertise)")
	fl.StringVar(&f.adminAddr, "admin", "127.0.0.1:9080", "admin listener address (loopback by default)")
	fl.BoolVar(&f.bootstrap, "bootstrap", false, "form a new cluster if the data directory has no raft state")
	fl.StringVar(&f.join, "join", "", "join an existing cluster through any member's admin listener HOST:PORT")
	fl.StringVar(&f.deployment, "deployment", "testnet", "deployment profile: testnet, prod or local")
	fl.StringVar(&f.token, "admin-token", "", "cluster admin token (generated into the data directory when empty)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fl.Uint64Var(&f.snapThreshold, "snapshot-threshold", node.DefaultSnapshotThreshold, "log entries between snapshots")
	fl.Uint64Var(&f.trailingLogs, "trailing-logs", node.DefaultTrailingLogs, "log entries kept after a snapshot")
	fl.IntVar(&f.faucetGrants, "faucet-grants-per-hour", 0, "faucet grants per account per rolling hour, fixed at genesis (0: default 3)")
	fl.Int64Var(&f.faucetGrantSats, "faucet-grant-sats", 0, "sats per faucet grant, fixed at genesis (0: default 1000000)")
	fl.BoolVar(&f.checkInvariants, "check-invariants", false, "check ledger conservation after every entry (slow; for tests)")
	return cmd
}

func runServe(parent context.Context, f serveFlags) error {
	switch f.deployment {
	case "testnet", "prod", "local":
	default:
		return fmt.Errorf("--deployment must be testnet, prod or local, not %q", f.deployment)
	}
	if f.bootstrap && f.join != "" {
		return errors.New("--bootstrap and --join are exclusive")
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "perpd", Level: hclog.LevelFromString(f.logLevel)}).With("node", f.id)
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return err
	}
	token, err := adminToken(f.data, f.token)
	if err != nil {
		return err
	}
	n, err := node.New(node.Config{
		ID: f.id, DataDir: f.data, RaftAddr: f.raftAddr, HTTPAddr: f.httpAddr, AdminAddr: f.adminAddr,
		Bootstrap: f.bootstrap, Deployment: f.deployment, AdminToken: token,
		SnapshotThreshold: f.snapThreshold, TrailingLogs: f.trailingLogs,
		CheckInvariants: f.checkInvariants, Logger: log,
		FaucetGrantsPerHour: f.faucetGrants, FaucetGrantMsat: f.faucetGrantSats * 1000,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	asm, err := Build(n, log)
	if err != nil {
		_ = n.Shutdown()
		return err
	}
	n.Start()
	asm.Run(ctx)
	servers, err := listen(log, map[string]http.Handler{f.adminAddr: asm.Admin, f.httpAddr: asm.API})
	if err != nil {
		_ = n.Shutdown()
		return err
	}
	log.Info("perpd node started", "http", f.httpAddr, "raft", f.raftAddr, "admin", f.adminAddr, "deployment", f.deployment)

	// Join whenever this node is not yet in the cluster's configuration, not
	// only on the first start: a join that failed (leader down, say) is
	// retried on the next start instead of leaving the node outside for good.
	if f.join != "" && !n.InConfiguration() {
		go func() {
			jctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := cluster.JoinOnStart(jctx, f.join, token, f.id, f.raftAddr); err != nil {
				log.Error("join failed", "via", f.join, "err", err)
				return
			}
			log.Info("joined cluster", "via", f.join)
		}()
	}
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
	return n.Shutdown()
}

// listen binds every address before serving any, so a port clash fails the
// start instead of leaving a half-up node.
func listen(log hclog.Logger, handlers map[string]http.Handler) ([]*http.Server, error) {
	var servers []*http.Server
	var lns []net.Listener
	for addr, h := range handlers {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		lns = append(lns, ln)
		servers = append(servers, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second})
	}
	for i, s := range servers {
		go func(s *http.Server, ln net.Listener) {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "addr", ln.Addr().String(), "err", err)
			}
		}(s, lns[i])
	}
	return servers, nil
}

// adminToken returns the given token (and records it), or the one stored in
// the data directory, or a new random one written there with mode 0600.
func adminToken(dataDir, given string) (string, error) {
	path := filepath.Join(dataDir, "admin-token")
	if given != "" {
		return given, os.WriteFile(path, []byte(given+"\n"), 0o600)
	}
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t := hex.EncodeToString(raw[:])
	return t, os.WriteFile(path, []byte(t+"\n"), 0o600)
}
