// Package connlimit caps the TCP connections a listener holds open, per
// client address and in total, so no client (nor anyone who merely reaches
// a port) can take every file descriptor a node has.
package connlimit

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perpd/perpd/clientaddr"
)

// Loopback is the loopback prefixes, which a node exempts from per-address
// caps on the listeners its fellow members dial: every member of a
// one-host cluster calls from the same loopback address.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// reserveMax is the most file descriptors a node keeps out of its public
// clients' reach (for raft, the admin listener, forwards, the log store and
// snapshots); a low descriptor limit keeps half instead.
const reserveMax = 4096

// Reserve is how many of a process's nofile descriptors the public
// listener leaves to the rest of the node: min(nofile/2, 4096); 0 when the
// limit is unknown (0). The admin listener takes at most half of it and
// raft's at most a quarter, so the last quarter stays for files.
func Reserve(nofile uint64) int {
	return int(min(nofile/2, reserveMax))
}

// PublicTotal is the public listener's total cap for a process allowed
// nofile open descriptors: all but the Reserve. 0 (unknown limit) means no
// total cap.
func PublicTotal(nofile uint64) int {
	return int(nofile) - Reserve(nofile)
}

// Limits bounds the TCP connections a listener holds open.
//
// Why: every connection costs the node a file descriptor and about 20 KB
// of memory for as long as it stays open, and an idle keep-alive stays
// open for DefaultTimeouts.Idle after one cheap request. Without a bound,
// one client address opened 20,000 idle connections (one /healthz each)
// on a devnet node, used every descriptor the process had, and the node
// stopped accepting anyone (a review of 2026-11-27). The per-address cap
// keeps one client to a small share; the total cap keeps descriptors in
// reserve for raft, the admin listener, forwards to the leader and the
// log files, whatever the clients do.
type Limits struct {
	// PerAddress is how many connections one client address may hold at
	// once (clientaddr.Key: an IPv4 address, an IPv6 /64); 0 means no
	// per-address cap. WebSocket connections count too: they are
	// connections of this listener.
	PerAddress int
	// Total is how many connections the listener holds at once; 0 means
	// no total cap.
	Total int
	// Exempt names peers not held to PerAddress (trusted reverse proxies,
	// which carry many clients on their connections). They still count
	// toward Total.
	Exempt []netip.Prefix
	// Plain says the listener speaks HTTP in clear, so a refused
	// connection is told why (a 429 or 503 JSON error) before it is
	// closed; under TLS (or on raft's transport) it is only closed.
	Plain bool
}

// Listen wraps ln so it holds at most l's connections. A connection
// past a cap is refused as it is accepted (never handed to the server) and
// Accept goes on to the next one.
func Listen(ln net.Listener, l Limits) *Listener {
	return &Listener{Listener: ln, l: l, byAddr: map[string]int{}}
}

// Listener is a net.Listener under Limits.
type Listener struct {
	net.Listener
	l       Limits
	mu      sync.Mutex
	total   int
	byAddr  map[string]int
	refused atomic.Uint64
}

// Open is how many accepted connections are still open.
func (ll *Listener) Open() int {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.total
}

// Refused counts connections refused for a cap.
func (ll *Listener) Refused() uint64 { return ll.refused.Load() }

// Accept returns the next connection within the caps.
func (ll *Listener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr, exempt := ll.peer(c)
		ll.mu.Lock()
		status := 0
		switch {
		case ll.l.Total > 0 && ll.total >= ll.l.Total:
			status = 503
		case !exempt && ll.l.PerAddress > 0 && ll.byAddr[addr] >= ll.l.PerAddress:
			status = 429
		default:
			ll.total++
			if !exempt {
				ll.byAddr[addr]++
			}
		}
		ll.mu.Unlock()
		if status != 0 {
			ll.refused.Add(1)
			ll.refuse(c, status)
			continue
		}
		return &limitedConn{Conn: c, ll: ll, addr: addr, counted: !exempt}, nil
	}
}

// peer is the connection's client address key and whether it is exempt
// from the per-address cap.
func (ll *Listener) peer(c net.Conn) (string, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String(), false
	}
	ip := ap.Addr().Unmap()
	for _, p := range ll.l.Exempt {
		if p.Contains(ip) {
			return "", true
		}
	}
	return clientaddr.Key(ip.String()), false
}

// refuse tells a refused client why, when the listener is plain HTTP, and
// closes. The answer is written before the request is read (it fits any
// socket buffer; the deadline only guards a broken peer), so a client that
// has already sent its request may see a reset instead.
func (ll *Listener) refuse(c net.Conn, status int) {
	if ll.l.Plain {
		var line, body string
		if status == 429 {
			line = "429 Too Many Requests"
			body = fmt.Sprintf(`{"error":"too many connections from this address (at most %d open at once); reuse or close some","code":"rate_limited"}`, ll.l.PerAddress)
		} else {
			line = "503 Service Unavailable"
			body = `{"error":"this node holds as many connections as it can; try another node or later","code":"unavailable"}`
		}
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
			line, len(body), body)
	}
	_ = c.Close()
}

func (ll *Listener) release(addr string, counted bool) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.total--
	if counted {
		if ll.byAddr[addr]--; ll.byAddr[addr] <= 0 {
			delete(ll.byAddr, addr)
		}
	}
}

// limitedConn gives its slot back when it is closed, once, whoever closes
// it (the HTTP server, or the WebSocket hub after a hijack).
type limitedConn struct {
	net.Conn
	ll      *Listener
	addr    string
	counted bool
	once    sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.ll.release(c.addr, c.counted) })
	return err
}
