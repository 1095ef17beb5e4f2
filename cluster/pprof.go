package cluster

import (
	"net/http"
	"net/http/pprof"
)

// profiling serves Go's profiles on the admin listener, behind the admin
// token like every admin route (they reveal code paths and timings and a
// CPU profile costs the node while it runs): /debug/pprof/ lists them,
// /debug/pprof/profile?seconds=N is a CPU profile, /debug/pprof/heap and
// /debug/pprof/allocs the allocations, /debug/pprof/trace an execution
// trace. `go tool pprof -http=: 'http://ADMIN/debug/pprof/profile?seconds=20'`
// needs the token header, so fetch with curl -H "Authorization: Bearer
// $TOKEN" into a file and open that.
func (s *AdminServer) profiling() {
	long := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			liftDeadlines(w) // a CPU profile or trace outlasts the write timeout
			h(w, r)
		}
	}
	s.Handle("GET /debug/pprof/", pprof.Index)
	s.Handle("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.Handle("GET /debug/pprof/profile", long(pprof.Profile))
	s.Handle("GET /debug/pprof/symbol", pprof.Symbol)
	s.Handle("GET /debug/pprof/trace", long(pprof.Trace))
}
