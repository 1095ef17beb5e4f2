package httpapi

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
)

// Auth says who may call a route.
type Auth int

// Authentication modes.
const (
	Public Auth = iota // no key
	Keyed              // x-api-key required
)

// Route is one row of the route table. The server, the authorization
// checks, the meter, the idempotency rule and /openapi.json are all built
// from it, so they cannot drift apart.
type Route struct {
	Method  string
	Path    string // gin syntax, e.g. /v1/markets/:id
	Summary string
	Auth    Auth
	Scope   string // required scope for Keyed routes ("" = any valid key)
	Budget  string // rate budget: read, order, withdraw, or "" for unmetered
	Idem    bool   // idempotency-key header required
	// IdemOptional: the header may be left out (the spec does not make
	// the route idem), but when sent it is checked as on Idem routes and a
	// retry with it replays the first answer.
	IdemOptional bool
	// IdemOwnNamespace: the route keeps a client's idempotency keys apart
	// from the account's general namespace ("acct:<account>:<key>",
	// Server.command): a cancel under "cancel:", a keyed redemption under
	// usdxRedeemIdemNS. On the other keyed routes a key that begins with
	// a reserved prefix (reservedIdemPrefixes) is refused by idemGuard.
	IdemOwnNamespace bool
	// Request is a zero value of the JSON body type (nil: no body).
	Request any
	// Query is a zero value of a struct describing query parameters.
	Query any
	// Responses maps a status to a zero value of its body type.
	Responses map[int]any
	// Refuses lists the error codes of this route's own refusals, by
	// status, beyond those every route of its kind may give
	// (refusalCodes). The description lists them under each status; a test
	// reads the handlers and the state machine for the refusals each route
	// can reach and checks they are all here.
	Refuses map[int][]string
	// Notes adds to the description of a status what is particular to
	// this route (what its 429 headers describe, say).
	Notes map[int]string
	// IdemRetry says what a retry of a success with the same
	// idempotency-key gets on this route, where that is not the stored
	// answer (idemReplay) or more is to be said; the header's
	// description and llms-full.txt carry it.
	IdemRetry string
	// Content overrides the JSON content type of the success response.
	Content string
	// Routine marks the order flow (placing, canceling, the dead-man
	// switch's refresh): its successful answers log at debug, not info
	// (reqlog.go). Keep it in step with the command types node logs the
	// same way when they are forwarded (node/forward.go, routineCmds).
	Routine bool
	// Refuses400: SPEC section 7 states 400 for every "refusal on order
	// placement and on cancel-all-after", so on such a route a refusal
	// other routes answer 404, 409 or 413 (an idempotency key reused, a
	// stored answer dropped early, a body too large) answers 400 with the
	// same code and body (status400Writer). 401, 403, 429 and 5xx keep
	// theirs: section 4 lets every keyed endpoint answer 401, 403 and 429,
	// and a 5xx is no refusal of the request.
	Refuses400 bool
	Handler    gin.HandlerFunc
}

// routeKey names a route as gin matched it: method and path template.
type routeKey struct{ method, path string }

func (s *Server) add(r *Route) {
	s.Routes = append(s.Routes, r)
	if r.Routine {
		s.routine[routeKey{r.Method, r.Path}] = true
	}
	if r.Refuses400 {
		s.refuses400[routeKey{r.Method, r.Path}] = true
	}
	chain := append(s.guards(r), r.Handler)
	s.Engine.Handle(r.Method, r.Path, chain...)
	if answersHead(r) {
		s.Engine.Handle(http.MethodHead, r.Path, chain...)
	}
}

// answersHead reports whether HEAD is served on r's path: on every GET
// route but the WebSocket upgrade (RFC 6455 takes GET only). HEAD runs
// the GET's own chain (same guards: key, scope, budget, read barrier;
// same handler), and net/http sends its status and headers without the
// body (RFC 9110 9.3.2). gin adds no HEAD route of its own, so without
// this it answered 405. The description says so once rather than
// describing a second operation per path (OpenAPI's info.description).
func answersHead(r *Route) bool {
	return r.Method == http.MethodGet && r.Path != wsPath
}

// guards returns the middleware a route's table row asks for. The access
// layer fills it in: authentication, scope, metering, idempotency.
func (s *Server) guards(r *Route) []gin.HandlerFunc {
	var out []gin.HandlerFunc
	for _, g := range guardFactories {
		if h := g(s, r); h != nil {
			out = append(out, h)
		}
	}
	return out
}

// guardFactories build per-route middleware, in this order: a halted
// replica refuses everything (its state may be half-applied), a key in the
// URL is refused, then the caller is authenticated, the idempotency
// key checked, the budget drawn, and only then may the request wait for
// the log (indexGuard), so no unauthenticated or over-budget client can
// hold a node in a wait. A domain route of a cluster below its feature
// level is refused last (domains.go).
var guardFactories = []func(s *Server, r *Route) gin.HandlerFunc{
	(*Server).haltGuard, refuseKeyInURL, authGuard, idemGuard, meterGuard, indexGuard, (*Server).domainGuard,
}

// status400Writer answers a Refuses400 route's 404, 409 and 413 as 400.
// It sits in front of gin's writer for the whole chain (requestLog), so
// every way a refusal is written, by a guard, a handler or a stored
// answer of the state machine, is caught; what the state machine stores
// is unchanged.
type status400Writer struct{ gin.ResponseWriter }

func (w *status400Writer) WriteHeader(code int) {
	if slices.Contains(refusedAs400, code) {
		code = http.StatusBadRequest
	}
	w.ResponseWriter.WriteHeader(code)
}
