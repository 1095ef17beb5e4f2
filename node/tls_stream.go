package node

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// tlsHandshakeTimeout bounds an incoming raft handshake, so a peer that
// connects and says nothing holds no goroutine for long.
const tlsHandshakeTimeout = 10 * time.Second

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
	ln        net.Listener
	advertise net.Addr
	server    *tls.Config
	client    *tls.Config
}

// raftProtocol is the TLS application protocol (ALPN) of this cluster's
// raft transport.
func raftProtocol(fingerprint string) string { return "perpd-raft/" + fingerprint }

func newTLSStream(bind string, p *PeerTLS, fingerprint string) (*tlsStream, error) {
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
	return &tlsStream{ln: ln, advertise: ln.Addr(), server: server, client: client}, nil
}

func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(c, s.server)}, nil
}

func (s *tlsStream) Close() error   { return s.ln.Close() }
func (s *tlsStream) Addr() net.Addr { return s.advertise }

func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), s.client)
}

// handshakeConn completes the server handshake on first use, under a
// deadline, in raft's per-connection goroutine rather than its accept loop.
type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		c.err = c.Conn.Handshake()
		_ = c.Conn.SetDeadline(time.Time{})
		if c.err != nil {
			_ = c.Conn.Close()
		}
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
