package cluster

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// serveLimited serves a trivial handler on loopback behind l's caps.
func serveLimited(t *testing.T, l ConnLimits) (*LimitedListener, string) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := LimitListener(raw, l)
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), DefaultTimeouts, nil)
	go func() { _ = srv.Serve(ll) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ll, raw.Addr().String()
}

// keepAlive opens a connection, makes one request on it and leaves it
// open (an idle keep-alive); it returns the status and the connection.
func keepAlive(t *testing.T, addr string, header string) (int, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", header)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, c
	}
	_ = resp.Body.Close()
	return resp.StatusCode, c
}

// One address holds at most PerAddress connections: the next is answered
// 429 rate_limited and closed, and a slot comes back when one closes.
// Before the caps (review of 2026-11-27) one address held 20,000 idle
// keep-alives on a devnet node and the node accepted nobody else.
func TestOneAddressHoldsAtMostItsConnections(t *testing.T) {
	ll, addr := serveLimited(t, ConnLimits{PerAddress: 3, Plain: true})
	var held []net.Conn
	for i := 0; i < 3; i++ {
		st, c := keepAlive(t, addr, "")
		if st != 200 {
			t.Fatalf("connection %d of 3: status %d, want 200", i+1, st)
		}
		held = append(held, c)
	}
	st, _ := keepAlive(t, addr, "")
	if st != 429 {
		t.Fatalf("connection 4 of an address capped at 3: status %d, want 429", st)
	}
	if ll.Open() != 3 || ll.Refused() != 1 {
		t.Fatalf("open %d refused %d, want 3 and 1", ll.Open(), ll.Refused())
	}
	_ = held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for ll.Open() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st, _ := keepAlive(t, addr, ""); st != 200 {
		t.Fatalf("after one of the 3 closed: status %d, want 200", st)
	}
}

// The total cap holds whatever the addresses, exempt ones (trusted
// proxies) included: the node keeps descriptors for raft and the rest.
func TestListenerHoldsAtMostItsTotal(t *testing.T) {
	loop := netip.MustParsePrefix("127.0.0.0/8")
	ll, addr := serveLimited(t, ConnLimits{PerAddress: 1, Total: 4, Exempt: []netip.Prefix{loop}, Plain: true})
	for i := 0; i < 4; i++ {
		if st, _ := keepAlive(t, addr, ""); st != 200 {
			t.Fatalf("exempt connection %d of 4: status %d, want 200 (exempt from the per-address cap of 1)", i+1, st)
		}
	}
	if st, _ := keepAlive(t, addr, ""); st != 503 {
		t.Fatalf("connection past the total of 4: status %d, want 503", st)
	}
	if ll.Open() != 4 {
		t.Fatalf("open %d, want 4", ll.Open())
	}
}

// Request headers are bounded at MaxHeaderBytes (431 past it), not
// net/http's 1 MB: each connection trickling headers held about 1.3 MB
// for the whole header timeout.
func TestRequestHeadersAreBounded(t *testing.T) {
	_, addr := serveLimited(t, ConnLimits{})
	if st, _ := keepAlive(t, addr, "X-A: "+strings.Repeat("a", 60<<10)+"\r\n"); st != 200 {
		t.Fatalf("60 KiB of headers: status %d, want 200", st)
	}
	if st, _ := keepAlive(t, addr, "X-A: "+strings.Repeat("a", 100<<10)+"\r\n"); st != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: status %d, want 431", st)
	}
}

func TestTotalConnsKeepADescriptorReserve(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, 0}, {1024, 512}, {20000, 15904}, {1 << 20, 1<<20 - 4096}} {
		if got := TotalConnsFor(c.nofile); got != c.want {
			t.Errorf("TotalConnsFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
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
		if TotalConnsFor(c.nofile)+l.Total > int(c.nofile) && c.nofile > 0 {
			t.Errorf("nofile %d: public %d + admin %d exceed it", c.nofile, TotalConnsFor(c.nofile), l.Total)
		}
	}
	l := AdminConnLimits(1 << 16)
	l.PerAddress = 2 // small enough to test
	l.Plain = true
	ll, addr := serveLimited(t, l)
	for i := 0; i < 4; i++ {
		if st, _ := keepAlive(t, addr, ""); st != 200 {
			t.Fatalf("loopback connection %d past the per-address cap: status %d, want 200 (loopback is exempt)", i+1, st)
		}
	}
	if ll.Refused() != 0 {
		t.Fatalf("%d loopback connections refused", ll.Refused())
	}
}
