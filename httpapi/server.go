package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
	"github.com/perpd/perpd/node/tokenrail"
)

// MaxBodyBytes is the request body limit behind `413 body_too_large`:
// 64 KiB, far above the largest request the spec defines.
const MaxBodyBytes = 64 << 10

// Server is the public HTTP API of one node.
type Server struct {
	Node   *node.Node
	Engine *gin.Engine
	Routes []*Route
	// Rail describes deposit paths and derives account addresses.
	Rail rail.Rail
	// TokenRail is the USDx token rail (nil: not wired; usdx.go).
	TokenRail tokenrail.Rail
	log       hclog.Logger
	meter     *meter
	// ws serves /v1/ws when set.
	ws WebSocket
	// budgets size the rate limits (Budgets unless an option says else).
	budgets map[string]Budget
	touch   *touches
	// waiting bounds each key's leader-budget writes waiting for the
	// leader's answer (waiting.go).
	waiting *waiting
	// leaderRefusals remembers the leader's 429s until their Retry-After
	// (refusals_memo.go).
	leaderRefusals *leaderRefusals
	// logSuppressed counts refusal lines left out of the log since the
	// last one logged (reqlog.go).
	logSuppressed atomic.Uint64
	// started is set once this replica has applied the genesis and the
	// market catalogue (halt.go).
	started atomic.Bool
	// trustedProxies are the peers whose X-Forwarded-For is believed
	// (addresses or CIDRs); empty means the TCP peer is the client.
	trustedProxies []string
	// docs caches /openapi.json and the llms files.
	docs docCache
	// proposer replaces Node.Propose (tests drop an answer through it).
	proposer func(context.Context, *fsm.Command) (*fsm.Result, error)
	// observe is told about every answered request (reqlog.go); proxyNets
	// are trustedProxies parsed.
	observe   RequestObserver
	proxyNets []*net.IPNet
	// routine holds the routes whose successful answers log at debug
	// (Route.Routine).
	routine map[routeKey]bool
	// refuses400 holds the routes that answer their refusals 400
	// (Route.Refuses400).
	refuses400 map[routeKey]bool
}

// New builds the gin engine with every route of the table.
func New(n *node.Node, log hclog.Logger, opts ...Option) *Server {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	// Route on the escaped path, so that an escaped "/" (%2F) stays inside
	// its segment: any printable ASCII is a valid order id, "/" included.
	// gin's unescaping of the values is off (unescapeParams does it).
	e.UseEscapedPath = true
	e.UnescapePathValues = false
	s := &Server{Node: n, Engine: e, log: log, meter: newMeter(), touch: newTouches(), waiting: newWaiting(), leaderRefusals: newLeaderRefusals(), budgets: Budgets, routine: map[routeKey]bool{}, refuses400: map[routeKey]bool{}}
	for _, o := range opts {
		o(s)
	}
	// gin trusts X-Forwarded-For from every peer unless told otherwise; a
	// client could then pick its own address and with it a fresh budget.
	if err := e.SetTrustedProxies(s.trustedProxies); err != nil {
		panic("httpapi: trusted proxies: " + err.Error())
	}
	s.proxyNets = parseProxyNets(s.trustedProxies)
	if s.Rail == nil {
		s.Rail = defaultRail(n.Config().Deployment)
	}
	// The order and withdraw budgets are drawn by the leader from its
	// server's buckets (see leaderBudgets).
	n.SetMeter(leaderMeter{s})
	e.Use(s.requestLog, s.recoverPanics, s.refuseKeyInPath, unescapeParams, s.bodyLimit, s.stampIndex)
	e.NoRoute(func(c *gin.Context) { notFound(c, "route "+boundedPath(c.Request.URL.Path)) })
	e.NoMethod(func(c *gin.Context) {
		fail(c, http.StatusMethodNotAllowed, wire.CodeValidation, "method "+boundedMethod(c.Request.Method)+" not allowed on "+boundedPath(c.Request.URL.Path))
	})
	for _, r := range s.routes() {
		s.add(r)
	}
	return s
}

// unescapeParams gives the route's parameters their unescaped values (the
// engine routes on the escaped path). It uses path unescaping, not gin's
// own, which is query unescaping and would read a "+" as a space: an order
// id "grid/2+x" arrives as grid%2F2+x and must not become "grid/2 x".
func unescapeParams(c *gin.Context) {
	for i, p := range c.Params {
		v, err := url.PathUnescape(p.Value)
		if err != nil {
			// Not reached: the escaped path is always well formed.
			invalid(c, "path segment "+p.Key+" is not escaped correctly")
			return
		}
		c.Params[i].Value = v
	}
}

// Option configures a Server.
type Option func(*Server)

// WithRail sets the payment rail the API describes and derives addresses
// with.
func WithRail(r rail.Rail) Option { return func(s *Server) { s.Rail = r } }

// WebSocket serves /v1/ws. clientIP is the caller's address as the rate
// limits see it (the TCP peer, or what a trusted proxy says), for the
// handler's per-address bounds.
type WebSocket interface {
	ServeClient(w http.ResponseWriter, r *http.Request, clientIP string)
}

// WithWebSocket mounts the WebSocket handler at /v1/ws.
func WithWebSocket(h WebSocket) Option { return func(s *Server) { s.ws = h } }

// WithBudgets replaces the rate budgets (all three names must be present).
func WithBudgets(b map[string]Budget) Option { return func(s *Server) { s.budgets = b } }

// WithBudgetScale multiplies every rate and burst of the budgets configured
// so far by k (the bench deployment profile). The package's Budgets map is
// never changed: the server gets a scaled copy. k below 1 is refused by
// ScaleBudgets; 1 changes nothing.
func WithBudgetScale(k int) Option {
	return func(s *Server) {
		scaled, err := ScaleBudgets(s.budgets, k)
		if err != nil {
			panic("httpapi: " + err.Error())
		}
		s.budgets = scaled
	}
}

// WithTrustedProxies names the reverse proxies (IP addresses or CIDRs)
// whose forwarding headers identify the client. Without it, forwarding
// headers are ignored. Bad entries are refused by ValidateTrustedProxies.
func WithTrustedProxies(cidrs []string) Option {
	return func(s *Server) { s.trustedProxies = append([]string(nil), cidrs...) }
}

// ValidateTrustedProxies checks a --trusted-proxies list before a server is
// built, so a typo stops the start with a clear message.
func ValidateTrustedProxies(cidrs []string) error {
	for _, c := range cidrs {
		if strings.Contains(c, "/") {
			if _, _, err := net.ParseCIDR(c); err != nil {
				return fmt.Errorf("trusted proxy %q is not a CIDR: %w", c, err)
			}
		} else if net.ParseIP(c) == nil {
			return fmt.Errorf("trusted proxy %q is not an IP address or CIDR", c)
		}
	}
	return nil
}

// defaultRail is a simulated rail with a throwaway node key, for tests and
// tools that build a server without wiring a rail.
func defaultRail(deployment string) rail.Rail {
	key, err := rail.NewNodeKey(nil)
	if err != nil {
		panic(err)
	}
	r, err := rail.NewSimRail(rail.SimConfig{Network: RailNetwork(deployment), NodeKey: key})
	if err != nil {
		panic(err)
	}
	return r
}

// RailNetwork is the Bitcoin network a deployment's rail serves.
func RailNetwork(deployment string) rail.Network {
	if deployment == "prod" {
		return rail.Mainnet
	}
	return rail.Testnet
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.Engine.ServeHTTP(w, r) }

// bodyLimit refuses oversized bodies up front (by Content-Length) and caps
// the reader for chunked ones.
func (s *Server) bodyLimit(c *gin.Context) {
	if c.Request.ContentLength > MaxBodyBytes {
		fail(c, http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge, "request body exceeds "+strconv.Itoa(MaxBodyBytes)+" bytes")
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	c.Next()
}

// hdrRaftIndex is X-Raft-Index in canonical form (setHeader).
const hdrRaftIndex = "X-Raft-Index"

// stampIndex stamps every response, routed or not, with the node's
// applied index. The waits that X-Min-Index and X-Consistency ask for run
// per route, after authentication and metering (indexGuard).
func (s *Server) stampIndex(c *gin.Context) {
	var index uint64
	if c.Request.URL.Path == healthzPath {
		// Published by the applier: a probe never waits on the lock.
		index = s.Node.StateHealth().Applied
	} else {
		index = s.Node.Machine().Applied()
	}
	stateOf(c).setHeader(c, slotRaftIndex, hdrRaftIndex, strconv.FormatUint(index, 10))
	c.Next()
}
