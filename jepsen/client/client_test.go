package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/history"
)

func TestAnswersAreSortedIntoOkFailAndInfo(t *testing.T) {
	// /hang never answers (until the client gives up, or the test ends),
	// so the client's timeout can be long enough for the answered paths
	// on a loaded machine: only /hang ever runs into it.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Raft-Index", "42")
		switch r.URL.Path {
		case "/created", "/v1/faucet":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"creditedMsat":"1000","grantsRemainingThisHour":2}`))
		case "/unavailable":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"no leader","code":"unavailable"}`))
		case "/not-started":
			w.Header().Set(HeaderNotApplied, "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"this node is starting","code":"unavailable"}`))
		case "/limited":
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"slow down","code":"rate_limited"}`))
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	addr := srv.Listener.Addr().String()
	c := New(time.Second)
	ctx := context.Background()
	for _, tc := range []struct {
		path  string
		write bool
		want  history.Type
	}{
		{"/created", true, history.OK},
		{"/unavailable", true, history.Info}, // the write may have committed
		{"/unavailable", false, history.Fail},
		{"/not-started", true, history.Fail}, // refused before proposing
		{"/not-started", false, history.Fail},
		{"/limited", true, history.Fail},
		{"/hang", true, history.Info}, // sent, never answered
		{"/hang", false, history.Fail},
	} {
		res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: tc.path, IsWrite: tc.write})
		if res.Type != tc.want {
			t.Fatalf("%s (write %v): %s, want %s (%s)", tc.path, tc.write, res.Type, tc.want, res.Error)
		}
		if res.Status != 0 && res.RaftIndex != 42 {
			t.Fatalf("%s: X-Raft-Index not parsed", tc.path)
		}
	}
	if res, credited := c.Faucet(ctx, addr, "key", "idem"); res.Type != history.OK || credited != 1000 {
		t.Fatalf("faucet answer: %s credited %d", res.Type, credited)
	}
}

func TestARefusedConnectionIsACertainFailureEvenForWrites(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := New(time.Second).Do(context.Background(), Request{Method: http.MethodPost, Addr: addr, Path: "/v1/faucet", IsWrite: true})
	if res.Type != history.Fail {
		t.Fatalf("refused connection: %s, want fail (%s)", res.Type, res.Error)
	}
}

// A write with an idempotency-key that reached the node on a kept-alive
// connection, whose node then died before answering, is retried by Go's
// transport; the retry's refused dial must not make the write a certain
// failure: it may have been applied (a faucet grant "from nowhere" in a
// Jepsen run before this was fixed).
func TestAWriteThatReachedADyingNodeIsIndeterminate(t *testing.T) {
	// The second request arrives whole, then the node dies: no answer,
	// and nobody listens any more.
	addr := dyingNode(t, func(ln net.Listener, conn net.Conn) {
		ln.Close()
		conn.Close()
	})
	res := secondWrite(t, addr)
	if res.Type != history.Info {
		t.Fatalf("a write the dying node received: %s (%s), want info", res.Type, res.Error)
	}
}

// X-Not-Applied speaks for the copy of the request it answers. When Go's
// transport resent a write (the first copy reached a node on a kept-alive
// connection, which then died without answering), a restarted node's
// "not applied" refusal of the resent copy says nothing of the first: the
// write stays indeterminate.
func TestNotAppliedAfterATransportResendIsIndeterminate(t *testing.T) {
	addr := dyingNode(t, func(ln net.Listener, conn net.Conn) {
		conn.Close()
		// The restarted node refuses the resent copy before proposing.
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		if req, err := http.ReadRequest(br); err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
			body := `{"error":"this node is starting","code":"unavailable"}`
			_, _ = fmt.Fprintf(conn, "HTTP/1.1 503 Service Unavailable\r\nX-Not-Applied: 1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
	})
	res := secondWrite(t, addr)
	if res.Status != http.StatusServiceUnavailable {
		t.Fatalf("the resent copy was not answered by the restarted node: %d %s %s", res.Status, res.Type, res.Error)
	}
	if res.Type != history.Info {
		t.Fatalf("a write resent after reaching a dying node, refused as not applied: %s, want info", res.Type)
	}
}

// dyingNode plays a node on a loopback listener: on its first connection
// it answers one request and reads the second whole without answering
// (answerOneThenTakeOne), then hands the listener and the connection to
// then, which drops the connection (a restart, or nothing listening any
// more). It returns the listener's address; the test's end closes it.
func dyingNode(t *testing.T, then func(ln net.Listener, conn net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		answerOneThenTakeOne(conn)
		then(ln, conn)
	}()
	return ln.Addr().String()
}

// answerOneThenTakeOne plays a node on conn: it answers the first request
// (200, keeping the connection alive) and reads the second whole without
// answering it.
func answerOneThenTakeOne(conn net.Conn) {
	br := bufio.NewReader(conn)
	if req, err := http.ReadRequest(br); err == nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"))
	}
	if req, err := http.ReadRequest(br); err == nil {
		_, _ = io.Copy(io.Discard, req.Body)
	}
}

// secondWrite sends two faucet writes (keys k1, k2) on one client, so the
// second can ride the connection the first kept alive; the first must
// succeed, and the second's result is returned.
func secondWrite(t *testing.T, addr string) Result {
	t.Helper()
	c := New(2 * time.Second)
	hdr := map[string]string{"idempotency-key": "k1"}
	if res := c.Do(context.Background(), Request{Method: http.MethodPost, Addr: addr, Path: "/v1/faucet", Header: hdr, Body: struct{}{}, IsWrite: true}); res.Type != history.OK {
		t.Fatalf("first write: %s %s", res.Type, res.Error)
	}
	hdr["idempotency-key"] = "k2"
	return c.Do(context.Background(), Request{Method: http.MethodPost, Addr: addr, Path: "/v1/faucet", Header: hdr, Body: struct{}{}, IsWrite: true})
}
