package cluster

import (
	"net/http"

	"github.com/perpd/perpd/node"
)

// MetricsPath is where the admin listener serves Prometheus metrics.
const MetricsPath = "/metrics"

// ServeMetrics serves h at GET /metrics. A scraper authenticates with a
// bearer token: the node's admin token, or its metrics token
// (Config.MetricsToken), which opens /metrics and nothing else, so the
// monitoring system never holds a credential that can remove members or
// restore snapshots. Metrics reveal no secrets but do reveal load, members
// and prices, so the route is never open.
func (s *AdminServer) ServeMetrics(h http.Handler) {
	s.mux.Handle("GET "+MetricsPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg := s.n.Config()
		if !node.CheckToken(r, cfg.AdminToken) && !node.CheckToken(r, cfg.MetricsToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="perpd-metrics"`)
			writeJSON(w, http.StatusUnauthorized, errBody("metrics or admin token missing or wrong"))
			return
		}
		h.ServeHTTP(w, r)
	}))
}
