package node

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/internal/boundedlog"
	"github.com/perpd/perpd/internal/connlimit"
)

// secretStream is the raft.StreamLayer of a node without TLS (its raft
// address is loopback, node.New): plain TCP, but every connection opens
// with a mutual challenge-response keyed by the cluster secret before raft
// reads or writes a byte of it. Loopback is reachable by every user of the
// host, and raft believes whatever a connection says: without this, any
// local process could send AppendEntries with a higher term and have its
// entries (a deposit, a market change) committed and applied.
//
// The exchange (K = the secret's raft-stream key, deriveKeys):
//
//	dialer -> acceptor: streamMagic, the dialer's cluster fingerprint (16
//	                    hex characters), a 32-byte nonce Nc
//	acceptor -> dialer: a 32-byte nonce Ns, HMAC-SHA256(K, "acceptor" Nc Ns)
//	dialer -> acceptor: HMAC-SHA256(K, "dialer" Nc Ns)
//
// Each side proves it holds K over the other side's fresh nonce, so a
// recorded exchange replays to nothing, and the two proofs carry
// different labels, so one side's proof is never the other's. A
// fingerprint that differs is refused before any proof is made, and both
// fingerprints are logged (a node started on another cluster's data, as
// with TLS, raftProtocol). What follows is raft in clear and without
// integrity: the stream keeps other users' processes from speaking raft,
// not an on-path attacker, which on loopback needs the host's root. Between
// hosts raft runs mutual TLS (tlsStream).
type secretStream struct {
	ln          *connlimit.Listener
	advertise   net.Addr
	key         []byte
	fingerprint string
	refusals    *boundedlog.Logger
}

// streamMagic opens a dialer's hello; a build before the authenticated
// stream sends raft's own first byte instead and is refused.
const streamMagic = "perpd-raft-auth1"

const (
	streamNonceLen       = 32
	streamFingerprintLen = 16 // fingerprint: 8 bytes in hex
	streamHelloLen       = len(streamMagic) + streamFingerprintLen + streamNonceLen
	streamReplyLen       = streamNonceLen + sha256.Size
)

// streamAuthTimeout bounds an incoming connection's authentication, so a
// peer that connects and says nothing holds no goroutine for long.
const streamAuthTimeout = tlsHandshakeTimeout

// errStreamAuth is what raft sees of a dial whose peer failed the exchange.
var errStreamAuth = errors.New("raft peer failed the cluster-secret authentication (a different cluster secret, or not a perpd node)")

func newSecretStream(bind string, key []byte, fingerprint string, log hclog.Logger) (*secretStream, error) {
	if len(fingerprint) != streamFingerprintLen {
		return nil, fmt.Errorf("cluster fingerprint %q is not %d characters", fingerprint, streamFingerprintLen)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &secretStream{ln: connlimit.Listen(ln, raftConnLimits()), advertise: ln.Addr(), key: key,
		fingerprint: fingerprint, refusals: boundedlog.New(log, "raft connection refused: cluster-secret authentication failed")}, nil
}

func (s *secretStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &firstUseConn{Conn: c, handshake: func() error { return s.acceptorExchange(c) },
		timeout: streamAuthTimeout, refusals: s.refusals}, nil
}

func (s *secretStream) Close() error   { return s.ln.Close() }
func (s *secretStream) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and runs the dialer's side of the exchange
// within timeout.
func (s *secretStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	if err := s.dialerExchange(c); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

func (s *secretStream) dialerExchange(c net.Conn) error {
	hello := make([]byte, streamHelloLen)
	copy(hello, streamMagic)
	copy(hello[len(streamMagic):], s.fingerprint)
	nc := hello[len(streamMagic)+streamFingerprintLen:]
	if _, err := rand.Read(nc); err != nil {
		return err
	}
	if _, err := c.Write(hello); err != nil {
		return err
	}
	reply := make([]byte, streamReplyLen)
	if _, err := io.ReadFull(c, reply); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errStreamAuth // the acceptor refused us
		}
		return err
	}
	ns := reply[:streamNonceLen]
	if !hmac.Equal(reply[streamNonceLen:], s.proof("acceptor", nc, ns)) {
		return errStreamAuth
	}
	_, err := c.Write(s.proof("dialer", nc, ns))
	return err
}

// proof is HMAC-SHA256(key, role || nc || ns).
func (s *secretStream) proof(role string, nc, ns []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(role))
	m.Write(nc)
	m.Write(ns)
	return m.Sum(nil)
}

// acceptorExchange runs the acceptor's side; the error says why it
// refused, for the log.
func (s *secretStream) acceptorExchange(c net.Conn) error {
	hello := make([]byte, streamHelloLen)
	if _, err := io.ReadFull(c, hello); err != nil {
		return fmt.Errorf("no complete hello: %v", err)
	}
	if string(hello[:len(streamMagic)]) != streamMagic {
		return errors.New("not a perpd raft hello (a build without the authenticated stream, or not a perpd node)")
	}
	rest := hello[len(streamMagic):]
	if fp := string(rest[:streamFingerprintLen]); fp != s.fingerprint {
		return fmt.Errorf("the peer's cluster fingerprint is %q, this node's %q: another cluster's secret", fp, s.fingerprint)
	}
	nc := rest[streamFingerprintLen:]
	reply := make([]byte, streamNonceLen, streamReplyLen)
	if _, err := rand.Read(reply); err != nil {
		return err
	}
	ns := reply[:streamNonceLen]
	reply = append(reply, s.proof("acceptor", nc, ns)...)
	if _, err := c.Write(reply); err != nil {
		return err
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("no proof: %v", err)
	}
	if !hmac.Equal(got, s.proof("dialer", nc, ns)) {
		return errors.New("wrong proof: the peer does not hold this cluster's secret")
	}
	return nil
}
