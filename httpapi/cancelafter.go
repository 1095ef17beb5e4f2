package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// The dead-man switch (SPEC section 4, Orders). The state machine keeps
// the deadline and fires it in log time; this handler only decodes.

func init() { routeSets = append(routeSets, (*Server).cancelAfterRoutes) }

// CancelAllAfterRequest is the body of POST /v1/cancel-all-after. The
// decoder checks the sign and the maximum; the state machine also refuses
// a non-zero timeout below trade.CancelAfterMinMs.
type CancelAllAfterRequest struct {
	TimeoutMs wire.Int `json:"timeoutMs" req:"true" unit:"ms" min:"0" max:"86400000" doc:"0 disarms; otherwise 1000..86400000 ms from now (log time), after which the engine cancels the account's resting orders and triggers (bracket legs included; positions and withdrawals untouched) unless refreshed. A refresh is judged at the log time of its own entry, after the deadline check: one that reaches the deadline comes too late (the orders are canceled first, then the call arms a new switch and answers armed), so refresh well inside the timeout (log time may also run up to 10% faster than real time while it catches up with the leader's wall clock: after an outage, or after a leader change to a node whose clock is ahead)"`
}

func (s *Server) cancelAfterRoutes() []*Route {
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/cancel-all-after", Summary: "Arm, refresh or disarm the dead-man switch",
			Auth: Keyed, Scope: "trade", Budget: "order", Idem: true, Request: CancelAllAfterRequest{}, Routine: true, Refuses400: true,
			Responses: map[int]any{200: trade.CancelAfterView{}, 400: wire.ErrorBody{}}, Handler: s.cancelAllAfter},
	}
}

func (s *Server) cancelAllAfter(c *gin.Context) {
	var req CancelAllAfterRequest
	if !s.decode(c, &req) {
		return
	}
	res, ok := s.submit(c, fsm.CmdCancelAllAfter, fsm.CancelAllAfterPayload{TimeoutMs: int64(req.TimeoutMs)}, req)
	if !ok {
		return
	}
	respond(c, res)
}
