package cluster

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
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
