package node

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/internal/boundedlog"
	"github.com/perpd/perpd/internal/connlimit"
)

// tlsHandshakeTimeout bounds an incoming raft handshake, so a peer that
// connects and says nothing holds no goroutine for long.
const tlsHandshakeTimeout = 10 * time.Second

// The raft listener's connection caps. A peer's transport holds a pool of
// at most 3 connections to a member, one more for its replication pipeline
// and one for a snapshot being sent. RaftConnsPerAddress leaves room for
// many more: a partition leaves the peer's old connections open on this
// side until TCP keep-alive gives up on them (minutes), and the peer
// dials anew each time the network heals. Anyone who reaches the
// port (it should be firewalled to the members, docs/deploy.md) holds a
// descriptor and a goroutine until the handshake fails or times out;
// without caps they could take every descriptor the node has. Loopback is
// exempt per address (the members of a one-host cluster share it) but
// counts toward the total: a quarter of the descriptors the public listener
// leaves in reserve, at most raftConnsMax.
const (
	RaftConnsPerAddress = 128
	raftConnsMax        = 512
)

func raftConnLimits() connlimit.Limits {
	total := raftConnsMax
	if reserve := connlimit.Reserve(connlimit.OpenFileLimit()); reserve > 0 {
		total = min(total, reserve/4)
	}
	return connlimit.Limits{PerAddress: RaftConnsPerAddress, Total: total, Exempt: connlimit.Loopback}
}

// tlsStream is a raft.StreamLayer over mutual TLS: every accepted
// connection must present a node certificate from the cluster CA before raft
// reads a byte of it, and every dial presents this node's.
//
// Both sides also name their cluster secret's fingerprint as the TLS
// application protocol (raftProtocol). A certificate says a node belongs
// to the CA's clusters, not which data it holds: a node started on another
// cluster's data directory, with this cluster's certificate, would
// otherwise take this cluster's entries on top of the other's state and
// diverge. crypto/tls refuses a handshake whose offered protocols do not
// overlap the server's, so such a node can neither take nor send raft
// traffic, and both sides log the two fingerprints. A peer that offers no
// protocol (a build before this check, during a rolling upgrade) is still
// served; its connections are checked from its upgrade on.
type tlsStream struct {
	ln        *connlimit.Listener
	advertise net.Addr
	server    *tls.Config
	client    *tls.Config
	// refusals logs failed incoming handshakes, bounded: raft would log
	// each one, and anyone who reaches the port can make them.
	refusals *boundedlog.Logger
}

// raftProtocol is the TLS application protocol (ALPN) of this cluster's
// raft transport.
func raftProtocol(fingerprint string) string { return "perpd-raft/" + fingerprint }

func newTLSStream(bind string, p *PeerTLS, fingerprint string, log hclog.Logger) (*tlsStream, error) {
	return newLimitedTLSStream(bind, p, fingerprint, log, raftConnLimits())
}

func newLimitedTLSStream(bind string, p *PeerTLS, fingerprint string, log hclog.Logger, limits connlimit.Limits) (*tlsStream, error) {
	addr, err := net.ResolveTCPAddr("tcp", bind)
	if err != nil {
		return nil, err
	}
	if addr.IP == nil || addr.IP.IsUnspecified() {
		return nil, errors.New("raft address must be a specific address peers can reach, not a wildcard")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	proto := raftProtocol(fingerprint)
	server, client := p.raftServerConfig(), p.ClientConfig()
	server.NextProtos, client.NextProtos = []string{proto}, []string{proto}
	return &tlsStream{ln: connlimit.Listen(ln, limits), advertise: ln.Addr(), server: server, client: client,
		refusals: boundedlog.New(log, "raft connection refused: TLS handshake failed")}, nil
}

func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, s.server)
	return &firstUseConn{Conn: tc, handshake: tc.Handshake, timeout: tlsHandshakeTimeout, refusals: s.refusals}, nil
}

func (s *tlsStream) Close() error   { return s.ln.Close() }
func (s *tlsStream) Addr() net.Addr { return s.advertise }

func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), s.client)
}

// firstUseConn runs an accepted connection's handshake (TLS's, or the
// cluster-secret exchange) on first use, under a deadline, in raft's
// per-connection goroutine rather than its accept loop, so one peer that
// says nothing holds up no other. A failed handshake is logged here,
// bounded, and raft is told io.EOF, which it closes without a line of its
// own.
type firstUseConn struct {
	net.Conn
	handshake func() error
	timeout   time.Duration
	refusals  *boundedlog.Logger
	once      sync.Once
	err       error
}

func (c *firstUseConn) run() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(c.timeout))
		err := c.handshake()
		_ = c.Conn.SetDeadline(time.Time{})
		if err != nil {
			c.refusals.Warn(err.Error(), "remote", c.Conn.RemoteAddr().String())
			_ = c.Conn.Close()
			c.err = io.EOF
		}
	})
	return c.err
}

func (c *firstUseConn) Read(b []byte) (int, error) {
	if err := c.run(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *firstUseConn) Write(b []byte) (int, error) {
	if err := c.run(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
