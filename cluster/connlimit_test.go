package cluster

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/perpd/perpd/internal/connlimit"
)

// Request headers are bounded at MaxHeaderBytes (431 past it), not
// net/http's 1 MB: each connection trickling headers held about 1.3 MB
// for the whole header timeout.
func TestRequestHeadersAreBounded(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), DefaultTimeouts, nil)
	go func() { _ = srv.Serve(raw) }()
	t.Cleanup(func() { _ = srv.Close() })
	get := func(headerBytes int) int {
		req, _ := http.NewRequest("GET", "http://"+raw.Addr().String()+"/", nil)
		req.Header.Set("X-A", strings.Repeat("a", headerBytes))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if st := get(60 << 10); st != 200 {
		t.Fatalf("60 KiB of headers: status %d, want 200", st)
	}
	if st := get(100 << 10); st != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: status %d, want 431", st)
	}
}

// The admin listener's caps: a share of the public listener's descriptor
// reserve in total, and per address, with the members' loopback exempt.
func TestAdminConnLimits(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		total  int
	}{{0, 0}, {1024, 256}, {20000, 2048}, {1 << 20, 2048}} {
		l := AdminConnLimits(c.nofile)
		if l.Total != c.total || l.PerAddress != AdminConnsPerAddress || l.Plain {
			t.Errorf("AdminConnLimits(%d) = %+v, want total %d, per address %d, TLS", c.nofile, l, c.total, AdminConnsPerAddress)
		}
		if connlimit.PublicTotal(c.nofile)+l.Total > int(c.nofile) && c.nofile > 0 {
			t.Errorf("nofile %d: public %d + admin %d exceed it", c.nofile, connlimit.PublicTotal(c.nofile), l.Total)
		}
	}
	if l := AdminConnLimits(1 << 16); !slices.Equal(l.Exempt, connlimit.Loopback) {
		t.Errorf("admin listener exempts %v, want loopback", l.Exempt)
	}
}
