package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
)

// TestNodeWithoutLeaderHoldsOnlyABurstOfAKeysWrites: an order-budget
// write is drawn at the leader, so a node that cannot reach one holds it
// for the whole propose timeout before answering 503, having drawn
// nothing. One key sending many at once may keep only its burst of them
// waiting there; the rest are refused 429 at once, with the rate headers.
func TestNodeWithoutLeaderHoldsOnlyABurstOfAKeysWrites(t *testing.T) {
	budgets := smallBudgets()
	ob := budgets["order"]
	const proposeTimeout = 2 * time.Second
	c := budgetCluster(t, budgets, clustertest.ProposeTimeout(proposeTimeout))
	key := signupVia(t, c, c.Members()[0], "hold-signup")
	leader, fs := c.Leader(), c.Followers()
	survivor := fs[0]
	c.Kill(fs[1].ID)
	c.Kill(leader.ID)
	base := c.HTTP(survivor.ID)

	const sent = 40
	var held, refused atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan string, sent)
	for i := range sent {
		wg.Go(func() {
			r, _ := http.NewRequest("POST", base+"/v1/cancel-all-after", strings.NewReader(`{"timeoutMs":"0"}`))
			r.Header.Set("x-api-key", key)
			r.Header.Set("idempotency-key", fmt.Sprintf("hold-%d", i))
			start := time.Now()
			res, err := (&http.Client{Timeout: 10 * time.Second}).Do(r)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			took := time.Since(start)
			var e struct{ Code string }
			_ = json.Unmarshal(b, &e)
			switch {
			case res.StatusCode == 503 && took >= proposeTimeout/2:
				held.Add(1)
			case res.StatusCode == 429 && e.Code == "rate_limited" && res.Header.Get("Retry-After") != "" &&
				res.Header.Get("X-RateLimit-Limit") != "" && took < proposeTimeout/2:
				refused.Add(1)
			default:
				errs <- fmt.Sprintf("write %d: %d %s after %v", i, res.StatusCode, b, took)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d writes held until the propose timeout, %d refused at once", held.Load(), refused.Load())
	if int(held.Load()) > ob.KeyBurst || int(held.Load()+refused.Load()) != sent {
		t.Fatalf("%d of %d writes of one key held on a node without a leader, %d refused; want at most the burst %d held",
			held.Load(), sent, refused.Load(), ob.KeyBurst)
	}
}
