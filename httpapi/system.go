package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/wire"
)

// Health is the body of /healthz (SPEC section 2).
type Health struct {
	OK   bool     `json:"ok"`
	DB   bool     `json:"db"`
	TsMs wire.Int `json:"tsMs" unit:"ms"`
	// Reason says why the node is not ready; absent when ok.
	Reason string `json:"reason,omitempty"`
}

const healthzPath = "/healthz"

// Deployment is the body of /deployment.
type Deployment struct {
	Deployment string `json:"deployment" enum:"prod,testnet"`
}

func (s *Server) systemRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: healthzPath, Summary: "Node health: ok when the node is ready to serve: not halted, the log store answers, a leader is known, no snapshot restore or apply past a second holds its state, genesis and the market catalogue are applied, and the node keeps up with the log (it has applied what it knows is committed, and an entry within ten of the leader's ticks); otherwise 503 with the reason",
			Responses: map[int]any{200: Health{}, 503: Health{}}, Handler: s.healthz},
		{Method: http.MethodGet, Path: "/deployment", Summary: "Which deployment is serving",
			Responses: map[int]any{200: Deployment{}}, Handler: s.deployment},
	}
}

// healthz answers ok only when the node is ready to serve: a load
// balancer that routes on it must never send a client to a node that would
// refuse it or answer from an empty catalogue.
func (s *Server) healthz(c *gin.Context) {
	storeProblem := s.Node.StoreProblem()
	h := Health{DB: storeProblem == "", TsMs: wire.Int(time.Now().UnixMilli()), Reason: s.notReady(storeProblem)}
	h.OK = h.Reason == ""
	status := http.StatusOK
	if !h.OK {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, h)
}

// notReady names the first unmet readiness condition, or "".
func (s *Server) notReady(storeProblem string) string {
	if h := s.Node.Halted(); h != nil {
		// The index only: the panic's text may hold account ids, positions
		// and amounts, and this answer is public (the log and the admin
		// status carry the reason).
		return "halted: " + haltedMessage(h.Index)
	}
	if storeProblem != "" {
		return storeProblem
	}
	// Nothing below takes the machine's lock: a probe answers at once
	// while a batch or a snapshot restore holds it (LeaderInfo would read
	// the leader's addresses from the state).
	if _, id := s.Node.Raft.LeaderWithID(); id == "" {
		return "no leader known"
	}
	st := s.Node.StateHealth()
	if st.Restoring {
		return "restoring a snapshot"
	}
	if st.Busy > readyBusyLimit {
		return fmt.Sprintf("busy: one apply has held the state for %d ms", st.Busy.Milliseconds())
	}
	// A leader known is not enough: a follower whose log store refuses
	// appends, or whose apply is stuck, still hears its leader while the
	// state it serves grows older; one replaying a backlog serves an old one.
	if lag := s.Node.Raft.CommitIndex() - min(st.Applied, s.Node.Raft.CommitIndex()); lag > readyLagEntries {
		return fmt.Sprintf("behind the log: %d committed entries not applied yet", lag)
	}
	if q, limit := s.Node.AppliedQuiet(), readyQuietLimit(s.Node.Config().TickInterval); q > limit {
		return fmt.Sprintf("behind the leader: no entry applied for %d ms (the leader ticks every %d ms)",
			q.Milliseconds(), s.Node.Config().TickInterval.Milliseconds())
	}
	switch {
	case !st.Genesis:
		return "the cluster genesis is not applied yet"
	case !st.Markets:
		return "the market catalogue is not listed yet"
	}
	return ""
}

// readyBusyLimit is how long one batch may hold (or wait for) the state's
// lock before the node reports itself unready: reads wait for it
// meanwhile. A batch takes milliseconds.
const readyBusyLimit = time.Second

// readyLagEntries bounds the committed entries a ready node has not applied
// yet: four full appends (node.raftConfig's MaxAppendEntries), more than a
// loaded node holds in flight, far less than a restart's replay.
const readyLagEntries = 1024

// readyQuietLimit is how long a ready node may apply nothing: ten of the
// leader's ticks, and at least two seconds (an election, a slow disk).
func readyQuietLimit(tick time.Duration) time.Duration {
	return max(10*tick, 2*time.Second)
}

// deployment reports the deployment profile; "local" serves as "testnet"
// on the wire, since the public enum is prod/testnet and a local node is a
// test deployment.
func (s *Server) deployment(c *gin.Context) {
	d := s.Node.Config().Deployment
	if d != "prod" {
		d = "testnet"
	}
	c.JSON(http.StatusOK, Deployment{Deployment: d})
}

func (s *Server) routes() []*Route {
	var all []*Route
	all = append(all, s.systemRoutes()...)
	if s.ws != nil {
		// An upgrade draws the client address's read budget like a
		// public read: reconnecting is not a way around the meter.
		all = append(all, &Route{Method: http.MethodGet, Path: wsPath,
			Summary: "WebSocket: prices, stats and account channels (protocol v1; see llms-full.txt)",
			Budget:  "read", Content: "none", Responses: map[int]any{101: nil, 429: wire.ErrorBody{}},
			Handler: func(c *gin.Context) { s.ws.ServeClient(c.Writer, c.Request, c.ClientIP()) }})
	}
	for _, f := range routeSets {
		all = append(all, f(s)...)
	}
	return all
}

// wsPath is the WebSocket upgrade's path.
const wsPath = "/v1/ws"

// routeSets are added by each domain's routes file.
var routeSets []func(s *Server) []*Route
