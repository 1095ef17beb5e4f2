package node

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/internal/boundedlog"
	"github.com/perpd/perpd/internal/testlog"
)

// TestRaftStreamRefusesAnotherClusterSecret: two nodes with certificates
// from one CA but different cluster secrets (a node started on another
// cluster's data directory) cannot carry raft traffic either way; the
// same secret can; a dialer that names no cluster (a build before the
// check) is still served.
func TestRaftStreamRefusesAnotherClusterSecret(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	peer := func(name string) *PeerTLS {
		p, err := ca.PeerTLS(name, true)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	stream := func(name, fingerprint string) *tlsStream {
		s, err := newTLSStream("127.0.0.1:0", peer(name), fingerprint, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	// serve echoes one byte on every accepted connection, like raft would
	// read an RPC and answer it.
	serve := func(s *tlsStream) {
		go func() {
			for {
				c, err := s.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					b := make([]byte, 1)
					if _, err := io.ReadFull(c, b); err == nil {
						_, _ = c.Write(b)
					}
				}()
			}
		}()
	}
	roundTrip := func(c interface {
		Write([]byte) (int, error)
		Read([]byte) (int, error)
	}) error {
		if _, err := c.Write([]byte{7}); err != nil {
			return err
		}
		b := make([]byte, 1)
		_, err := io.ReadFull(c, b)
		return err
	}
	a1, a2, b := stream("a1", "aaaaaaaaaaaaaaaa"), stream("a2", "aaaaaaaaaaaaaaaa"), stream("b", "bbbbbbbbbbbbbbbb")
	serve(a1)
	serve(b)
	dial := func(from, to *tlsStream) error {
		c, err := from.Dial(raft.ServerAddress(to.Addr().String()), 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		return roundTrip(c)
	}
	if err := dial(a2, a1); err != nil {
		t.Fatalf("same cluster: %v", err)
	}
	if err := dial(a2, b); err == nil || !strings.Contains(err.Error(), "application protocol") {
		t.Fatalf("dialing another cluster's node: %v", err)
	}
	if err := dial(b, a1); err == nil {
		t.Fatal("another cluster's node dialed in")
	}
	// A build before the check names no protocol: it is served, and a
	// dial to it goes through.
	old := stream("old-server", "aaaaaaaaaaaaaaaa")
	old.server.NextProtos = nil
	serve(old)
	if err := dial(b, old); err != nil {
		t.Fatalf("dialing a build before the check: %v", err)
	}
	legacy := peer("old").ClientConfig()
	c, err := tls.Dial("tcp", a1.Addr().String(), legacy)
	if err != nil {
		t.Fatalf("legacy dialer: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if err := roundTrip(c); err != nil {
		t.Fatalf("legacy dialer: %v", err)
	}
}

// Anyone who reaches the raft port without a node certificate gets bounded
// log lines and a bounded share of descriptors. Before, raft logged every
// failed handshake ("failed to decode incoming command") and the listener
// held any number of connections for the handshake timeout.
func TestRaftListenerBoundsStrangers(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.PeerTLS("n1", true)
	if err != nil {
		t.Fatal(err)
	}
	var buf testlog.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true})
	limits := raftConnLimits()
	limits.Total = 8 // small enough to test; loopback counts toward it
	s, err := newLimitedTLSStream("127.0.0.1:0", p, "aaaaaaaaaaaaaaaa", log, limits)
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithLogger(s, 3, time.Second, log.Named("transport"))
	t.Cleanup(func() { _ = tr.Close() })
	addr := s.Addr().String()
	testlog.HandshakeFlood(t, addr, 300)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "\n") < boundedlog.Burst && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	out := buf.String()
	if n := strings.Count(out, "\n"); n < 1 || n > boundedlog.Burst+1 {
		t.Fatalf("300 failed handshakes logged %d lines, want 1 to %d:\n%s", n, boundedlog.Burst+1, out)
	}
	if strings.Contains(out, "failed to decode incoming command") || !strings.Contains(out, "TLS handshake failed") || !strings.Contains(out, `"remote":"127.0.0.1:`) {
		t.Fatalf("want only the stream's own bounded lines, with the remote address:\n%s", out)
	}
	// Silent strangers hold connections until the handshake times out:
	// no more than the total.
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	for i := 0; i < limits.Total; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for deadline := time.Now().Add(5 * time.Second); s.ln.Open() < limits.Total && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection past the total of %d was held: %v", limits.Total, err)
	}
	if s.ln.Open() != limits.Total || s.ln.Refused() == 0 {
		t.Fatalf("open %d refused %d, want %d and at least 1", s.ln.Open(), s.ln.Refused(), limits.Total)
	}
}
