package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/perpd/perpd/node"
)

// errTokenOnArgv refuses a secret on the command line, where every user of
// the machine reads it (ps, /proc/<pid>/cmdline).
var errTokenOnArgv = errors.New("--admin-token no longer takes the token on the command line, where every user can read it: " +
	"put it in a file (mode 0600) and pass --admin-token-file, or set PERPD_ADMIN_TOKEN")

// addTokenFlags adds --admin-token-file, and --admin-token hidden: it only
// carries PERPD_ADMIN_TOKEN in (applyEnv), and is refused on argv.
func addTokenFlags(fl *pflag.FlagSet, token, file *string, fileUsage string) {
	fl.StringVar(token, "admin-token", "", "")
	_ = fl.MarkHidden("admin-token")
	fl.StringVar(file, "admin-token-file", "", fileUsage)
}

// tlsFlags are the certificate files of one end of the cluster's mutual TLS.
type tlsFlags struct{ cert, key, ca string }

func addTLSFlags(fl *pflag.FlagSet, f *tlsFlags, certUsage string) {
	fl.StringVar(&f.cert, "tls-cert", "", "PEM certificate: "+certUsage)
	fl.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&f.ca, "tls-ca", "", "PEM certificate of the cluster CA that signs every node and operator certificate")
}

// load returns nil when no TLS flag is set.
func (f tlsFlags) load() (*node.PeerTLS, error) {
	if f.cert == "" && f.key == "" && f.ca == "" {
		return nil, nil
	}
	return node.LoadPeerTLS(f.cert, f.key, f.ca)
}

// serveAdminToken is the node's operator token: PERPD_ADMIN_TOKEN (also
// recorded in the data directory, for `perpd admin --data`), else the token
// file, else a new random token written to --data/admin-token.
func serveAdminToken(dataDir, file, fromEnv string) (string, error) {
	def := filepath.Join(dataDir, "admin-token")
	if fromEnv != "" {
		return fromEnv, node.WriteSecretFile(def, fromEnv)
	}
	if file != "" {
		return node.ReadSecretFile(file)
	}
	t, err := node.ReadSecretFile(def)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t = hex.EncodeToString(raw[:])
	return t, node.WriteSecretFile(def, t)
}

// clusterSecret reads the secret every member shares. Only a bootstrapping
// node on an empty data directory makes a new one: any other node must be
// given the cluster's (copied from a member), or its invoices, confirm
// tokens and peer calls would not verify on the others.
func clusterSecret(dataDir, file string, bootstrap bool) (string, error) {
	path := file
	if path == "" {
		path = filepath.Join(dataDir, "cluster-secret")
	}
	s, err := node.ReadSecretFile(path)
	if err == nil {
		return s, checkClusterSecret(path, s)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	_, statErr := os.Stat(filepath.Join(dataDir, "raft.db"))
	if bootstrap && errors.Is(statErr, os.ErrNotExist) {
		s = node.NewClusterSecret()
		return s, node.WriteSecretFile(path, s)
	}
	return "", fmt.Errorf("no cluster secret at %s: every member needs the secret of the cluster it belongs to; "+
		"copy the cluster-secret file from a member's data directory (mode 0600), or start a new cluster's first node with --bootstrap", path)
}

// checkClusterSecret refuses a secret too short to resist an offline
// guess: its fingerprint and the MACs of confirm tokens are public
// (node.MinClusterSecretLen).
func checkClusterSecret(path, s string) error {
	if len(s) < node.MinClusterSecretLen {
		return fmt.Errorf("the cluster secret in %s has %d characters, fewer than %d: values derived from it are public "+
			"(the cluster's fingerprint, withdrawal confirm tokens), so a short or chosen secret can be guessed offline. "+
			"Make one with `openssl rand -hex 32` (or let the first node's --bootstrap make it) and give every member the same file",
			path, len(s), node.MinClusterSecretLen)
	}
	return nil
}
