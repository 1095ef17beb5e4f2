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
	limit, before, ok := s.pageQuery(c)
	if !ok {
		return
	}
	acct := callerOf(c).AccountID
	var page trade.FundingPage
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { page = st.Trade.FundingFlows(acct, before, limit) })
	c.JSON(http.StatusOK, page)
}

func (s *Server) liquidations(c *gin.Context) {
	limit, before, ok := s.pageQuery(c)
	if !ok {
		return
	}
	acct := callerOf(c).AccountID
	var page trade.LiquidationsPage
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { page = st.Trade.Liquidations(acct, before, limit) })
	c.JSON(http.StatusOK, page)
}
