package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

type recordingTransport struct{ calls []string }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.calls = append(r.calls, req.URL.String())
	return nil, errors.New("recorded")
}

// Without TLS a node serves its admin listener on loopback only
// (node.RequireLoopback), so the operator's client speaking plain HTTP to
// another host is always a mistake: before, it sent the admin token there
// in clear and only then said "the admin listener runs TLS" (an attacks
// review, 2026-11-27). It refuses before a byte leaves.
func TestAdminClientSendsNoTokenInClearOffThisMachine(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{"192.0.2.1:9080", "[2001:db8::1]:9080"} {
		rt := &recordingTransport{}
		c := NewAdminClient(addr, "secret-token")
		c.HTTP.Transport = rt
		errs := []error{c.Do(ctx, http.MethodGet, "/admin/status", nil, nil)}
		_, err := c.Snapshot(ctx, io.Discard, nil)
		errs = append(errs, err)
		_, err = c.Restore(ctx, []byte(backupMagic+"\n{}\nx"))
		errs = append(errs, err)
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "--tls-cert") {
				t.Errorf("%s call %d: %v", addr, i, err)
			}
		}
		if len(rt.calls) != 0 {
			t.Errorf("%s: sent %v", addr, rt.calls)
		}
	}
	// Loopback stays plain.
	rt := &recordingTransport{}
	c := NewAdminClient("127.0.0.1:9", "secret-token")
	c.HTTP.Transport = rt
	_ = c.Do(ctx, http.MethodGet, "/admin/status", nil, nil)
	if len(rt.calls) != 1 {
		t.Fatalf("loopback: %v", rt.calls)
	}
}

// againstSilentNode runs call with an admin client of --timeout 300 ms
// whose node hands each connection to serve (which never answers), and
// returns call's error, failing if call succeeds or is still waiting 5 s
// later.
func againstSilentNode(t *testing.T, serve func(net.Conn), call func(*AdminClient) error) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(conn)
		}
	}()
	c := NewAdminClient(ln.Addr().String(), "t")
	c.HTTP.Timeout = 300 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- call(c) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an answer from a node that never answered")
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting for a silent node 5 s into a 300 ms --timeout")
		return nil
	}
}

// readsNeverAnswers reads the request and never answers.
func readsNeverAnswers(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) }

// `admin snapshot --timeout` bounds the wait for the node to answer (it
// answers once the snapshot is taken), not the download after it: before,
// the download's lifted bound covered the wait too, and a node that took
// the request and never answered held the command forever.
func TestAdminSnapshotWaitsForTheNodeWithinItsTimeout(t *testing.T) {
	againstSilentNode(t, readsNeverAnswers, func(c *AdminClient) error {
		_, err := c.Snapshot(context.Background(), io.Discard, nil)
		return err
	})
}

// A restore is bounded too: an upload that makes no progress for
// --timeout, and an answer that does not come within the longer of
// --timeout and restoreAnswerMin once the upload is done, end the command
// with an error that says which. Before, the client lifted every bound and
// waited for ever on a node that took the upload and never answered.
func TestAdminRestoreWaitsWithinItsBounds(t *testing.T) {
	backup := []byte(backupMagic + "\n{}\n" + strings.Repeat("x", 64<<10))
	restoreTo := func(t *testing.T, serve func(net.Conn)) error {
		t.Helper()
		return againstSilentNode(t, serve, func(c *AdminClient) error {
			_, err := c.Restore(context.Background(), backup)
			return err
		})
	}
	defer func(d time.Duration) { restoreAnswerMin = d }(restoreAnswerMin)
	restoreAnswerMin = 0

	t.Run("the node reads the upload and never answers", func(t *testing.T) {
		err := restoreTo(t, readsNeverAnswers)
		if !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("error %q; want the answer's bound named", err)
		}
	})
	t.Run("the node never reads the upload", func(t *testing.T) {
		// A 64 KiB body fits the socket buffers; a larger one stalls.
		backup = append(backup, bytes.Repeat([]byte("y"), 16<<20)...)
		err := restoreTo(t, func(conn net.Conn) { time.Sleep(10 * time.Second); conn.Close() })
		if !strings.Contains(err.Error(), "upload") {
			t.Fatalf("error %q; want the stalled upload named", err)
		}
	})
}
