package node

import (
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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
		s, err := newTLSStream("127.0.0.1:0", peer(name), fingerprint)
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
