package httpapi

import (
	"fmt"

	"github.com/gin-gonic/gin"
)

// haltGuard refuses every route but /healthz once this replica halted: its
// state may hold part of the entry that broke, so nothing read from it may
// be served (not even a key lookup). Clients go to another node.
func (s *Server) haltGuard(r *Route) gin.HandlerFunc {
	if r.Path == healthzPath {
		return nil
	}
	return func(c *gin.Context) {
		if h := s.Node.Halted(); h != nil {
			unavailable(c, haltedMessage(h.Index))
			return
		}
		c.Next()
	}
}

func haltedMessage(index uint64) string {
	return fmt.Sprintf("this replica halted on a broken invariant at log index %d and serves nothing; use another node", index)
}
