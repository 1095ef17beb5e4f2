package node

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/internal/testlog"
)

func newTestSecretStream(t *testing.T, secret string, log hclog.Logger) *secretStream {
	t.Helper()
	ks, err := deriveKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSecretStream("127.0.0.1:0", ks.raftStream, ks.fingerprint, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// accepted is the acceptor's side of the next connection, read in the
// background: what raft would read from it, and the error it got.
func accepted(t *testing.T, s *secretStream) <-chan readResult {
	t.Helper()
	out := make(chan readResult, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			out <- readResult{err: err}
			return
		}
		defer c.Close()
		b := make([]byte, 5)
		n, err := io.ReadFull(c, b)
		if err == nil {
			_, err = c.Write([]byte("pong!"))
		}
		out <- readResult{b: b[:n], err: err}
	}()
	return out
}

type readResult struct {
	b   []byte
	err error
}

func waitRead(t *testing.T, ch <-chan readResult) readResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the acceptor never returned")
		return readResult{}
	}
}

// TestSecretStreamCarriesRaftBetweenMembers: two members of one cluster
// (one secret) authenticate each other and then carry bytes both ways.
func TestSecretStreamCarriesRaftBetweenMembers(t *testing.T) {
	secret := NewClusterSecret()
	a, b := newTestSecretStream(t, secret, hclog.NewNullLogger()), newTestSecretStream(t, secret, hclog.NewNullLogger())
	got := accepted(t, b)
	c, err := a.Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("a member's dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping!")); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 5)
	if _, err := io.ReadFull(c, back); err != nil || string(back) != "pong!" {
		t.Fatalf("the answer: %q %v", back, err)
	}
	if r := waitRead(t, got); r.err != nil || string(r.b) != "ping!" {
		t.Fatalf("the acceptor read %q, %v", r.b, r.err)
	}
}

// TestSecretStreamRefusesWhoeverLacksTheSecret: a connection that speaks
// raft at once (any local process, or a build before the stream), another
// cluster's member, a hello with this cluster's fingerprint but a wrong
// proof, and a replay of a member's recorded exchange are each closed
// before raft reads a byte, and logged.
func TestSecretStreamRefusesWhoeverLacksTheSecret(t *testing.T) {
	secret := NewClusterSecret()
	var buf testlog.Buffer
	s := newTestSecretStream(t, secret, hclog.New(&hclog.LoggerOptions{Output: &buf}))
	lines := buf.String
	addr := s.Addr().String()

	refused := func(name string, talk func(c net.Conn), want string) {
		t.Helper()
		got := accepted(t, s)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		talk(c)
		r := waitRead(t, got)
		if !errors.Is(r.err, io.EOF) || len(r.b) != 0 {
			t.Fatalf("%s: raft read %q, %v; want nothing and io.EOF", name, r.b, r.err)
		}
		if !strings.Contains(lines(), want) {
			t.Fatalf("%s: the log does not say %q:\n%s", name, want, lines())
		}
	}

	// raft's own first byte (rpcAppendEntries) and an encoded request.
	refused("raw raft", func(c net.Conn) { _, _ = c.Write(bytes.Repeat([]byte{0}, streamHelloLen)) }, "not a perpd raft hello")

	other := newTestSecretStream(t, NewClusterSecret(), hclog.NewNullLogger())
	refused("another cluster", func(c net.Conn) {
		_ = other.dialerExchange(c)
	}, "another cluster's secret")

	// The right fingerprint (it is public) and a proof made without the key.
	refused("a guessed key", func(c net.Conn) {
		hello := append([]byte(streamMagic+s.fingerprint), bytes.Repeat([]byte{1}, streamNonceLen)...)
		_, _ = c.Write(hello)
		_, _ = io.ReadFull(c, make([]byte, streamReplyLen))
		_, _ = c.Write(bytes.Repeat([]byte{2}, 32))
	}, "wrong proof")

	// Record what a member sends, then send it again on a new connection.
	var sent bytes.Buffer
	got := accepted(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	member := newTestSecretStream(t, secret, hclog.NewNullLogger())
	if err := member.dialerExchange(&recorder{Conn: c, w: &sent}); err != nil {
		t.Fatalf("a member's exchange: %v", err)
	}
	_, _ = c.Write([]byte("ping!"))
	if r := waitRead(t, got); r.err != nil {
		t.Fatalf("the member was refused: %v", r.err)
	}
	c.Close()
	refused("a replay", func(c net.Conn) { _, _ = c.Write(sent.Bytes()) }, "wrong proof")
}

// recorder copies what is written to a connection.
type recorder struct {
	net.Conn
	w io.Writer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.w.Write(b)
	return r.Conn.Write(b)
}

// TestSecretStreamDialerRefusesAnImpostor: something else listening on a
// member's address (the member is down and another user took the port)
// cannot prove the secret, so the dial fails and raft sends it nothing.
func TestSecretStreamDialerRefusesAnImpostor(t *testing.T) {
	s := newTestSecretStream(t, NewClusterSecret(), hclog.NewNullLogger())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tail := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		hello := make([]byte, streamHelloLen)
		_, _ = io.ReadFull(c, hello)
		_, _ = c.Write(bytes.Repeat([]byte{7}, streamReplyLen))
		rest, _ := io.ReadAll(c)
		tail <- rest
	}()
	if _, err := s.Dial(raft.ServerAddress(ln.Addr().String()), 5*time.Second); !errors.Is(err, errStreamAuth) {
		t.Fatalf("a dial to an impostor: %v, want errStreamAuth", err)
	}
	if rest := <-tail; len(rest) != 0 {
		t.Fatalf("the impostor was sent %d bytes after its reply", len(rest))
	}
}

// TestRaftRefusesAnUnauthenticatedLeader is the attack the stream stops: a
// local process with raft's own transport sends a single-node cluster's
// leader an AppendEntries with a higher term and an entry. Before the
// stream, raft took it: the node stepped down, followed "evil" and could
// be made to commit the entry.
func TestRaftRefusesAnUnauthenticatedLeader(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	n, err := New(Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: addr, Bootstrap: true, AdminToken: "t",
		Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	deadline := time.Now().Add(10 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the node never led")
		}
		time.Sleep(20 * time.Millisecond)
	}
	term := n.Raft.CurrentTerm()
	last := n.Raft.LastIndex()

	evil, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(evil.LocalAddr())},
		Term:              term + 1,
		PrevLogEntry:      last,
		PrevLogTerm:       term,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 1, Type: raft.LogCommand, Data: []byte("x")}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	if err := evil.AppendEntries("n1", raft.ServerAddress(addr), req, &resp); err == nil {
		t.Fatalf("raft answered an unauthenticated AppendEntries: %+v", resp)
	}
	time.Sleep(300 * time.Millisecond)
	if got := n.Raft.CurrentTerm(); got != term || !n.IsLeader() {
		t.Fatalf("after the attempt: term %d (was %d), leader %v", got, term, n.IsLeader())
	}
	if got := n.Raft.LastIndex(); got != last {
		t.Fatalf("the log grew from %d to %d", last, got)
	}
}
