package httpapi

import (
	"context"

	"github.com/perpd/perpd/fsm"
)

// WithProposer lets an external test stand between a handler and
// Node.Propose (to lose an answer and retry, as the node does).
func WithProposer(f func(context.Context, *fsm.Command) (*fsm.Result, error)) Option {
	return func(s *Server) { s.proposer = f }
}
