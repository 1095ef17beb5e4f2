package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/wire"
)

// A write on a leader budget (order, withdraw) is drawn by the leader, so
// the node that takes it spends nothing of the key's budget until the
// leader answers; with no leader reachable it waits the whole propose
// timeout first. Unbounded, one key could keep any number of goroutines
// and bodies waiting on that node. So a node lets one subject (key) keep
// at most its budget's burst of such writes waiting at once: more could
// not all be admitted at once anyway. The rest are answered 429 at once,
// undrawn.
type waiting struct {
	mu sync.Mutex
	n  map[string]int // subject -> writes waiting; absent at zero
}

func newWaiting() *waiting { return &waiting{n: map[string]int{}} }

// enter counts one more waiting write of subject unless it already has
// max; leave must follow an admitted enter.
func (w *waiting) enter(subject string, max int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[subject] >= max {
		return false
	}
	w.n[subject]++
	return true
}

func (w *waiting) leave(subject string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[subject] <= 1 {
		delete(w.n, subject)
		return
	}
	w.n[subject]--
}

// tooManyWaiting answers a write refused by the waiting bound: 429 with
// the budget's per-key limit, nothing remaining and Retry-After 1.
func (s *Server) tooManyWaiting(c *gin.Context, b Budget) {
	// The headers of an admitting verdict (limit, 0 remaining, reset),
	// then the refusal with its own reason.
	s.rateAnswer(c, b.Name, verdict{ok: true, limit: b.PerKeyPerMin, resetUnix: ceilUnix(time.Now().Add(time.Second))})
	c.Header("Retry-After", "1")
	fail(c, http.StatusTooManyRequests, wire.CodeRateLimited,
		"too many "+b.Name+" writes of this key are waiting for the leader; retry after 1s")
}
