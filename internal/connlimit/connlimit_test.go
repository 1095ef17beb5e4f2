package connlimit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// serveLimited serves a trivial handler on loopback behind l's caps.
func serveLimited(t *testing.T, l Limits) (*Listener, string) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := Listen(raw, l)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), ReadHeaderTimeout: 5 * time.Second}
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
	ll, addr := serveLimited(t, Limits{PerAddress: 3, Plain: true})
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
	ll, addr := serveLimited(t, Limits{PerAddress: 1, Total: 4, Exempt: []netip.Prefix{loop}, Plain: true})
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

// Loopback peers are exempt from the per-address cap (the members of a
// one-host cluster share the address) and still count toward the total.
func TestLoopbackIsExemptFromThePerAddressCap(t *testing.T) {
	ll, addr := serveLimited(t, Limits{PerAddress: 2, Total: 5, Exempt: Loopback})
	for i := 0; i < 5; i++ {
		if st, _ := keepAlive(t, addr, ""); st != 200 {
			t.Fatalf("loopback connection %d past the per-address cap of 2: status %d, want 200", i+1, st)
		}
	}
	if ll.Refused() != 0 || ll.Open() != 5 {
		t.Fatalf("refused %d open %d, want 0 and 5", ll.Refused(), ll.Open())
	}
	if st, _ := keepAlive(t, addr, ""); st != 0 {
		t.Fatalf("past the total, TLS-like (not Plain): status %d, want a bare close", st)
	}
}

func TestTotalConnsKeepADescriptorReserve(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, 0}, {1024, 512}, {20000, 15904}, {1 << 20, 1<<20 - 4096}} {
		if got := PublicTotal(c.nofile); got != c.want {
			t.Errorf("PublicTotal(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}
