package httpapi

import (
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
}

// Deployment is the body of /deployment.
type Deployment struct {
	Deployment string `json:"deployment" enum:"prod,testnet"`
}

func (s *Server) systemRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: "/healthz", Summary: "Node health: ok when a leader is known and the log store answers",
			Responses: map[int]any{200: Health{}, 503: Health{}}, Handler: s.healthz},
		{Method: http.MethodGet, Path: "/deployment", Summary: "Which deployment is serving",
			Responses: map[int]any{200: Deployment{}}, Handler: s.deployment},
	}
}

func (s *Server) healthz(c *gin.Context) {
	db := s.Node.StoreHealthy()
	id, _, _, _ := s.Node.LeaderInfo()
	h := Health{OK: db && id != "", DB: db, TsMs: wire.Int(time.Now().UnixMilli())}
	status := http.StatusOK
	if !h.OK {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, h)
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
		all = append(all, &Route{Method: http.MethodGet, Path: "/v1/ws",
			Summary: "WebSocket: prices, stats and account channels (protocol v1; see llms-full.txt)",
			Content: "none", Responses: map[int]any{101: nil}, Handler: gin.WrapH(s.ws)})
	}
	for _, f := range routeSets {
		all = append(all, f(s)...)
	}
	return all
}

// routeSets are added by each domain's routes file.
var routeSets []func(s *Server) []*Route
