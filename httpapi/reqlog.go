package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// RequestIDHeader is the header every response carries its request id in.
const RequestIDHeader = node.RequestIDHeader

// RequestObserver is told about every answered request (metrics): the
// route template ("unmatched" for no route), never the raw path, so its
// values stay bounded.
type RequestObserver func(method, route string, status int, d time.Duration)

// WithRequestObserver sets the observer of answered requests.
func WithRequestObserver(o RequestObserver) Option { return func(s *Server) { s.observe = o } }

// requestLog gives every request its state (reqState) and an id, returns
// the id in X-Request-Id, carries it to node.Propose (a forwarded write is
// logged with it on the leader too), and logs one line per answered
// request with it.
//
// Which id: an X-Request-Id from a trusted proxy (--trusted-proxies) is
// kept when it is well-formed (node.ValidRequestID: at most 64 characters
// of [A-Za-z0-9._:-]), so one id follows a request from the edge through
// the cluster. From anyone else the node draws its own: a client cannot
// make its requests share an id with another's in the logs, nor inject
// text into them. A client's own well-formed id is still logged beside
// ours (client_request_id), so a user can quote theirs to an operator.
//
// Log levels: writes (anything but GET, HEAD and OPTIONS) at info, reads
// at debug (a read-heavy node would log little else), every 5xx at warn.
// The order flow's successful answers (Route.Routine) log at debug unless
// slower than node.SlowRoutine: at venue rates an info line per order was a
// tenth of the leader's CPU and gigabytes of log an hour, while each
// order is already on record in its account's history and counted in
// the metrics; its refusals still log at info.
// Only the path is logged, never the query string or a header: keys and
// secrets never reach the log.
func (s *Server) requestLog(c *gin.Context) {
	st, keys := attachState(c)
	s.logRequest(c, st)
	detachState(c, keys)
}

func (s *Server) logRequest(c *gin.Context, st *reqState) {
	start := time.Now()
	in := c.GetHeader(RequestIDHeader)
	if hasKeyShape(in) {
		// An API key sent as a request id (a header mix-up) is a
		// well-formed id: it must be neither kept nor logged.
		in = ""
	}
	id := ""
	if in != "" && s.fromTrustedProxy(c) && node.ValidRequestID(in) {
		id = in
	} else {
		id = randomID(16) // node.NewRequestID's form, in one allocation
	}
	st.id = id
	st.setHeader(c, slotRequestID, RequestIDHeader, id)
	if s.refuses400[routeKey{c.Request.Method, c.FullPath()}] {
		st.w400.ResponseWriter = c.Writer
		c.Writer = &st.w400
	}
	c.Next()

	status := c.Writer.Status()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	d := time.Since(start)
	if s.observe != nil {
		s.observe(c.Request.Method, route, status, d)
	}
	level := hclog.Debug
	switch {
	case status >= 500:
		level = hclog.Warn
	case status < 300 && d < node.SlowRoutine && s.routine[routeKey{c.Request.Method, route}]:
	case c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead && c.Request.Method != http.MethodOptions:
		level = hclog.Info
	}
	if level < s.log.GetLevel() {
		return
	}
	var suppressed uint64
	if level == hclog.Info && status >= 400 && status < 500 && s.log.GetLevel() > hclog.Debug {
		if !s.meter.take(logRefusalBudget, addressSubject(c), logRefusalNode, time.Now()).ok {
			s.logSuppressed.Add(1)
			return
		}
		suppressed = s.logSuppressed.Swap(0)
	}
	args := []any{"request_id", id, "method", boundedMethod(c.Request.Method), "path", boundedPath(redactKeys(c.Request.URL.Path)), "route", route,
		"status", status, "ms", float64(d.Microseconds()) / 1000, "remote", c.ClientIP()}
	if in != "" && in != id && node.ValidRequestID(in) {
		args = append(args, "client_request_id", in)
	}
	if cl := st.caller; cl.AccountID != "" {
		args = append(args, "account", cl.AccountID)
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.log.Log(level, "request", args...)
}

// fromTrustedProxy reports whether the TCP peer is one of the configured
// reverse proxies.
func (s *Server) fromTrustedProxy(c *gin.Context) bool {
	if len(s.proxyNets) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(c.Request.RemoteAddr)
	if err != nil {
		host = c.Request.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, n := range s.proxyNets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// parseProxyNets turns the validated --trusted-proxies list into networks.
func parseProxyNets(list []string) []*net.IPNet {
	var out []*net.IPNet
	for _, p := range list {
		if _, n, err := net.ParseCIDR(p); err == nil {
			out = append(out, n)
			continue
		}
		if ip := net.ParseIP(p); ip != nil {
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		}
	}
	return out
}

// Info lines of refusals (4xx) are bounded per client address: a refusal
// nothing meters (a write without a key, a POST to no route, a malformed
// body, a 429 of the meter itself) wrote one line of about 190 bytes for
// a request of 60, as fast as a client sent them (1.9 MB of log a second
// from one client on loopback; load review of 2026-11-27), on the disk
// the raft log shares. An address logs at most LogRefusalsPerMin such
// lines a minute (LogRefusalsBurst at once), and a node at most
// LogRefusalsNodePerMin; the lines left out are counted, and the next
// refusal line logged carries the count (suppressed=N). Every request is
// still counted in the request metrics. Debug logging (--log-level debug)
// is not bounded: an operator asked for every line.
const (
	LogRefusalsPerMin     = 60
	LogRefusalsBurst      = 30
	LogRefusalsNodePerMin = 1200
	LogRefusalsNodeBurst  = 300
)

var logRefusalBudget = Budget{Name: "log", PerKeyPerMin: LogRefusalsPerMin, KeyBurst: LogRefusalsBurst,
	PerAccountPerMin: LogRefusalsNodePerMin, AccountBurst: LogRefusalsNodeBurst}

// logRefusalNode names the node-wide bucket of refusal lines.
const logRefusalNode = "node:log-refusals"

// maxLoggedPathBytes bounds the path an access line or a 404 carries. The
// longest path a route serves is far shorter (an order id is at most 260
// bytes); a longer one is cut, with its length.
const maxLoggedPathBytes = 512

// maxLoggedMethodBytes bounds the method an access line or a 405 carries:
// a method is any token the client sends, bounded only by the header
// limit.
const maxLoggedMethodBytes = 16

// boundedMethod is m, or its first maxLoggedMethodBytes bytes and its
// length (a token is ASCII: no character is cut).
func boundedMethod(m string) string {
	if len(m) <= maxLoggedMethodBytes {
		return m
	}
	return m[:maxLoggedMethodBytes] + "...(" + strconv.Itoa(len(m)) + " bytes)"
}

// boundedPath is p, or its first maxLoggedPathBytes bytes (not cutting a
// character) and its length.
func boundedPath(p string) string {
	if len(p) <= maxLoggedPathBytes {
		return p
	}
	n := maxLoggedPathBytes
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return p[:n] + "...(" + strconv.Itoa(len(p)) + " bytes)"
}
