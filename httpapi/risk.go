package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/trade"
)

// Funding flows and liquidations (SPEC sections 2 and 4): the account's
// histories, newest first, in the shared seq space. The state machine
// (fsm/trade funding.go, liquidate.go) writes them; these handlers read.

func init() { routeSets = append(routeSets, (*Server).riskRoutes) }

func (s *Server) riskRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/funding", Summary: "Funding flows of the account's positions, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: trade.FundingPage{}}, Handler: s.fundingFlows},
		{Method: http.MethodGet, Path: "/v1/liquidations", Summary: "Liquidations of the account's positions, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: trade.LiquidationsPage{}}, Handler: s.liquidations},
	}
}

func (s *Server) fundingFlows(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.Trade.FundingFlows(acct, before, limit)
	})
}

func (s *Server) liquidations(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.Trade.Liquidations(acct, before, limit)
	})
}

// accountPage answers a cursor-paginated history of the caller's account,
// read from this node's state.
func (s *Server) accountPage(c *gin.Context, read func(st *fsm.State, acct string, before uint64, limit int) any) {
	limit, before, ok := s.pageQuery(c)
	if !ok {
		return
	}
	acct := callerOf(c).AccountID
	var page any
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { page = read(st, acct, before, limit) })
	c.JSON(http.StatusOK, page)
}
