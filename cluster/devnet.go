package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/perpd/perpd/node"
)

// DevnetNode is one child process of a local cluster.
type DevnetNode struct {
	ID    string `json:"id"`
	HTTP  string `json:"http"`
	Raft  string `json:"raft"`
	Admin string `json:"admin"`
	Data  string `json:"data"`
	cmd   *exec.Cmd
	log   string        // its log file, "" when DevnetConfig.Stdout took it
	done  chan struct{} // closed once the process has ended; exit says how
	exit  error
}

// Devnet is a local N-node cluster of child processes, over mutual TLS.
type Devnet struct {
	Nodes []*DevnetNode
	Token string // operator admin token, the same on every node
	// Admin are the operator's certificate files (clientAuth only).
	Admin    node.CertFiles
	adminTLS *tls.Config
	mu       sync.Mutex
}

// DevnetConfig says where to put a devnet.
type DevnetConfig struct {
	Binary     string // perpd executable (default: this one)
	Nodes      int
	Dir        string
	Host       string // listen host, default 127.0.0.1
	HTTPBase   int    // node i (0-based) serves HTTP on HTTPBase+i
	RaftBase   int    // default HTTPBase-1000
	AdminBase  int    // default HTTPBase+1000
	Deployment string
	Token      string // operator admin token (random when empty); written to files, never on argv
	ExtraArgs  []string
	Stdout     io.Writer // children's logs (default: per-node file in Dir)
}

// StartDevnet launches the children: node1 bootstraps, the others join
// through node1's admin listener. Children die with the parent (Pdeathsig),
// so a killed launcher leaves no orphans.
//
// It makes a throwaway CA in Dir/tls (a new one every start), a node
// certificate per child and an operator certificate, and writes the
// admin token and the cluster secret (kept from node1's data directory
// when it has them) into every node's data directory: the children's
// command lines name files, never a secret.
func StartDevnet(ctx context.Context, cfg DevnetConfig) (*Devnet, error) {
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("need at least one node")
	}
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Binary = exe
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.RaftBase == 0 {
		cfg.RaftBase = cfg.HTTPBase - 1000
	}
	if cfg.AdminBase == 0 {
		cfg.AdminBase = cfg.HTTPBase + 1000
	}
	if cfg.Deployment == "" {
		cfg.Deployment = "testnet"
	}
	if err := checkDevnetPorts(cfg); err != nil {
		return nil, err
	}
	node1 := filepath.Join(cfg.Dir, "node1")
	if cfg.Token == "" {
		if t, err := node.ReadSecretFile(filepath.Join(node1, "admin-token")); err == nil {
			cfg.Token = t
		} else {
			var b [24]byte
			_, _ = rand.Read(b[:])
			cfg.Token = hex.EncodeToString(b[:])
		}
	}
	secret, err := node.ReadSecretFile(filepath.Join(node1, "cluster-secret"))
	if err != nil {
		secret = node.NewClusterSecret()
	}
	ca, err := node.NewCA("perpd devnet CA")
	if err != nil {
		return nil, err
	}
	tlsDir := filepath.Join(cfg.Dir, "tls")
	d := &Devnet{Token: cfg.Token}
	if d.Admin, err = ca.WriteFiles(tlsDir, "admin", false); err != nil {
		return nil, err
	}
	pt, err := node.LoadPeerTLS(d.Admin.Cert, d.Admin.Key, d.Admin.CA)
	if err != nil {
		return nil, err
	}
	d.adminTLS = pt.ClientConfig()
	hostport := func(p int) string { return net.JoinHostPort(cfg.Host, strconv.Itoa(p)) }
	for i := 0; i < cfg.Nodes; i++ {
		n := &DevnetNode{
			ID:    fmt.Sprintf("node%d", i+1),
			HTTP:  hostport(cfg.HTTPBase + i),
			Raft:  hostport(cfg.RaftBase + i),
			Admin: hostport(cfg.AdminBase + i),
		}
		n.Data = filepath.Join(cfg.Dir, n.ID)
		d.Nodes = append(d.Nodes, n)
	}
	for i, n := range d.Nodes {
		if err := os.MkdirAll(n.Data, 0o700); err != nil {
			return nil, err
		}
		if err := node.WriteSecretFile(filepath.Join(n.Data, "admin-token"), cfg.Token); err != nil {
			return nil, err
		}
		if err := node.WriteSecretFile(filepath.Join(n.Data, "cluster-secret"), secret); err != nil {
			return nil, err
		}
		files, err := ca.WriteFiles(tlsDir, n.ID, true)
		if err != nil {
			return nil, err
		}
		args := []string{"serve", "--id", n.ID, "--data", n.Data, "--http", n.HTTP, "--raft", n.Raft,
			"--admin", n.Admin, "--deployment", cfg.Deployment,
			// One simulated payment network for all the children: a payout a
			// dead leader made is not made again by the next.
			"--sim-rail-dir", filepath.Join(cfg.Dir, "simrail")}
		args = append(args, files.Args()...)
		if i == 0 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", d.Nodes[0].Admin)
		}
		args = append(args, cfg.ExtraArgs...)
		if err := d.start(n, cfg, args); err != nil {
			d.Stop()
			return nil, err
		}
		if i == 0 {
			// Let node1 elect itself before the others ask to join.
			if err := d.WaitLeader(ctx, 1); err != nil {
				d.Stop()
				return nil, err
			}
		}
	}
	if err := d.WaitLeader(ctx, cfg.Nodes); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// checkDevnetPorts refuses port ranges a child could not bind: the
// children would otherwise fail one by one after node1 had bootstrapped,
// and StartDevnet would wait a minute for a leader before saying so.
func checkDevnetPorts(cfg DevnetConfig) error {
	ranges := []struct {
		flag string
		base int
	}{{"--http-base", cfg.HTTPBase}, {"--raft-base", cfg.RaftBase}, {"--admin-base", cfg.AdminBase}}
	for i, r := range ranges {
		if r.base < 1 || r.base+cfg.Nodes-1 > 65535 {
			return fmt.Errorf("%s %d: %d nodes need ports %d to %d, each from 1 to 65535 (raft defaults to http-base-1000, admin to http-base+1000)",
				r.flag, r.base, cfg.Nodes, r.base, r.base+cfg.Nodes-1)
		}
		for _, o := range ranges[:i] {
			if r.base < o.base+cfg.Nodes && o.base < r.base+cfg.Nodes {
				return fmt.Errorf("%s %d and %s %d: their %d ports each overlap; set them at least %d apart",
					r.flag, r.base, o.flag, o.base, cfg.Nodes, cfg.Nodes)
			}
		}
	}
	return nil
}

func (d *Devnet) start(n *DevnetNode, cfg DevnetConfig, args []string) error {
	if err := os.MkdirAll(n.Data, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(cfg.Binary, args...)
	out := cfg.Stdout
	n.log = ""
	if out == nil {
		n.log = filepath.Join(cfg.Dir, n.ID+".log")
		f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		out = f
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	d.mu.Lock()
	n.cmd, n.done = cmd, done
	d.mu.Unlock()
	go func() { n.exit = cmd.Wait(); close(done) }()
	return nil
}

// exited returns an error naming how n's process ended and the last line
// it wrote, or nil while it runs: a child that cannot start (a taken
// port, a bad flag) ends at once, and waiting a minute for a leader it
// will never report would hide why.
func (d *Devnet) exited(n *DevnetNode) error {
	d.mu.Lock()
	done := n.done
	d.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
	default:
		return nil
	}
	last := ""
	if b, err := os.ReadFile(n.log); n.log != "" && err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		last = ": " + lines[len(lines)-1]
	}
	return fmt.Errorf("devnet: %s ended (%v)%s", n.ID, n.exit, last)
}

// WaitLeader waits until node1 reports a leader and at least `members`
// members, and every started node knows the leader.
func (d *Devnet) WaitLeader(ctx context.Context, members int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		ok := true
		for i, n := range d.Nodes {
			if i >= members {
				break
			}
			if err := d.exited(n); err != nil {
				return err
			}
			c := d.AdminClient(n.Admin)
			c.HTTP.Timeout = time.Second
			st, err := c.Status(ctx)
			if err != nil || st.Leader.ID == "" || st.Leader.HTTP == "" || len(st.Members) < members {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devnet: no leader with %d members in time", members)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// AdminClient is an operator's client of the admin listener at addr.
func (d *Devnet) AdminClient(addr string) *AdminClient {
	return NewAdminClient(addr, d.Token).UseTLS(d.adminTLS)
}

// Pid is node id's process id (0 when it is not running).
func (d *Devnet) Pid(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.Nodes {
		if n.ID == id && n.cmd != nil && n.cmd.Process != nil {
			return n.cmd.Process.Pid
		}
	}
	return 0
}

// Stop sends SIGTERM to every child and waits; a child still running after
// ten seconds is killed.
func (d *Devnet) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range d.Nodes {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		wg.Add(1)
		go func(c *exec.Cmd, done <-chan struct{}) {
			defer wg.Done()
			_ = c.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}(n.cmd, n.done)
		n.cmd = nil
	}
	wg.Wait()
}
