package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
)

// domainPrefixes are the routes of the domains fsm.LevelDomains turns on
// (USDx, referral, promoter, leaderboards, Proof of Reserves).
var domainPrefixes = []string{"/v1/usdx", "/v1/referral", "/v1/promoter", "/v1/leaderboard", "/por", "/v1/por"}

// isDomainRoute reports whether path belongs to one of those domains.
func isDomainRoute(path string) bool {
	for _, p := range domainPrefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// domainGuard answers 503 feature_unavailable on a domain route while the
// cluster runs below fsm.LevelDomains (an upgraded cluster whose operator
// has not raised the level yet): the domain's state does not exist then.
func (s *Server) domainGuard(r *Route) gin.HandlerFunc {
	if !isDomainRoute(r.Path) {
		return nil
	}
	return func(c *gin.Context) {
		var ok bool
		var level uint32
		s.Node.Machine().Read(func(st *fsm.State, _ uint64) { ok, level = st.DomainsOn(), st.FeatureLevel })
		if !ok {
			fail(c, http.StatusServiceUnavailable, wire.CodeFeatureUnavailable, fmt.Sprintf(
				"this cluster runs at feature level %d and this needs level %d: the operator raises it once every node runs this build",
				level, fsm.LevelDomains))
			return
		}
		c.Next()
	}
}
