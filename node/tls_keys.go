package node

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/perpd/perpd/node/rail"
)

// Labels of the keys derived from the cluster secret. Each purpose has its
// own, so learning one key (a bearer in a log, say) reveals no other.
const (
	labelPeerBearer  = "perpd/peer-bearer/v1"
	labelFingerprint = "perpd/cluster-fingerprint/v1"
	labelConfirmMAC  = "perpd/withdraw-confirm/v1"
	labelRaftStream  = "perpd/raft-stream/v1"
	// the rail node key's label lives in rail.NodeKeyFromSecret
)

// ClusterSecretBytes is the size of a generated cluster secret.
const ClusterSecretBytes = 32

// MinClusterSecretLen is the fewest characters a cluster secret file may
// hold (a generated one has 64: ClusterSecretBytes in hex). Two values
// derived from the secret are public by design, the fingerprint (in the
// raft handshake, in clear) and the MAC of every withdrawal confirm token a
// trader is given, so a short or human secret could be guessed offline
// against either.
const MinClusterSecretLen = 32

// ClusterHeader carries the caller's cluster fingerprint on node-to-node
// calls, so a refusal can say that the two secrets differ.
const ClusterHeader = "X-Perpd-Cluster"

// keys are the per-purpose keys a node derives from the cluster secret.
type keys struct {
	peerBearer  string // bearer of /internal/* and relayed admin calls
	fingerprint string // public: names the secret without revealing it
	confirmMAC  []byte // withdrawal confirm tokens
	raftStream  []byte // the plain raft stream's authentication (secretStream)
	railNode    []byte // the simulated rail's Lightning node key
}

func deriveKeys(secret string) (*keys, error) {
	if secret == "" {
		return nil, errors.New("node: cluster secret is empty")
	}
	derive := func(label string, n int) []byte {
		k, err := hkdf.Key(sha256.New, []byte(secret), nil, label, n)
		if err != nil {
			panic(err) // only for n beyond 255*32 bytes
		}
		return k
	}
	rk, err := rail.NodeKeyFromSecret(secret)
	if err != nil {
		return nil, err
	}
	return &keys{
		peerBearer:  hex.EncodeToString(derive(labelPeerBearer, 32)),
		fingerprint: hex.EncodeToString(derive(labelFingerprint, 8)),
		confirmMAC:  derive(labelConfirmMAC, sha256.Size),
		raftStream:  derive(labelRaftStream, sha256.Size),
		railNode:    rk,
	}, nil
}

// NewClusterSecret draws a fresh cluster secret (hex).
func NewClusterSecret() string {
	b := make([]byte, ClusterSecretBytes)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ReadSecretFile reads a secret file written by WriteSecretFile. It refuses
// a file other users may read, since whoever reads it can act as a member.
func ReadSecretFile(path string) (string, error) {
	if err := checkPrivate(path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// checkPrivate refuses a secret file that users other than its owner may
// read or write.
func checkPrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is readable by other users (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	return nil
}

// WriteSecretFile writes a secret with mode 0600.
func WriteSecretFile(path, secret string) error {
	return writePrivate(path, []byte(secret+"\n"))
}

// writePrivate writes b with mode 0600, also when path already exists
// with a wider mode. It writes a temporary file and renames it over path,
// so a reader sees the old content or the new, never a truncated file: a
// devnet rewrites the shared tls/ca.pem for each node it starts while the
// ones already started read it ("the CA file holds no PEM certificate").
// The file is synced before the rename and the directory after it: a
// rename that reaches the disk before the data leaves, after a power
// loss, an empty cluster secret or node-id mark, which cannot be made
// again.
func writePrivate(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = syncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncFile syncs a file or directory; tests make it fail.
var syncFile = (*os.File).Sync

// RailNodeKey is the simulated rail's node key, the same on every member.
func (n *Node) RailNodeKey() []byte { return n.keys.railNode }

// ConfirmKey is the MAC key of withdrawal confirm tokens, the same on
// every member.
func (n *Node) ConfirmKey() []byte { return n.keys.confirmMAC }

// ClusterFingerprint names the cluster secret without revealing it.
func (n *Node) ClusterFingerprint() string { return n.keys.fingerprint }

// SetPeerAuth marks req as a node-to-node call of this cluster.
func (n *Node) SetPeerAuth(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+n.keys.peerBearer)
	req.Header.Set(ClusterHeader, n.keys.fingerprint)
}

// CheckPeer reports whether r carries this cluster's peer bearer; when it
// does not, the error says why, naming a cluster secret mismatch.
func (n *Node) CheckPeer(r *http.Request) error {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(n.keys.peerBearer)) == 1 {
		return nil
	}
	if fp := r.Header.Get(ClusterHeader); fp != "" && fp != n.keys.fingerprint {
		return fmt.Errorf("cluster secret mismatch: the caller's cluster secret (fingerprint %.16s) differs from this cluster's (%s); "+
			"give the caller the members' cluster secret (its --cluster-secret-file, else DATA/cluster-secret)", fp, n.keys.fingerprint)
	}
	return errors.New("node-to-node call without this cluster's peer credential")
}
