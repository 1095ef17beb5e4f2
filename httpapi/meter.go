package httpapi

import (
	"container/list"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/perpd/perpd/clientaddr"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
)

// Budget sizes one rate budget (SPEC section 8). Buckets live in memory.
// The read budget is drawn on the node the client called (reads are served
// there). The order and withdraw budgets are drawn on the leader, just
// before the write enters the log (leaderBudgets), so they hold for the
// whole cluster: a key spreading its writes over N nodes gets one budget.
type Budget struct {
	Name             string
	PerKeyPerMin     int
	KeyBurst         int
	PerAccountPerMin int
	// AccountBurst lets three keys burst at once before the account bucket
	// binds; more keys never add throughput beyond the per-minute rate.
	AccountBurst int
}

// Budgets are the testnet starting values of SPEC section 8.
var Budgets = map[string]Budget{
	"read":     {Name: "read", PerKeyPerMin: 600, KeyBurst: 120, PerAccountPerMin: 3000, AccountBurst: 360},
	"order":    {Name: "order", PerKeyPerMin: 60, KeyBurst: 20, PerAccountPerMin: 180, AccountBurst: 60},
	"withdraw": {Name: "withdraw", PerKeyPerMin: 10, KeyBurst: 5, PerAccountPerMin: 20, AccountBurst: 15},
	// signup is drawn per client address (public; no key, no account), at
	// the leader like order. The venue caps signups per rolling hour
	// (access.DefaultSignupsPerHour, 3,000) for the state's sake; on the
	// order budget (3,600 an hour) one address could take the whole cap
	// and lock every newcomer out for the hour. 30 at once (a classroom
	// behind one NAT) and then one a minute: an address takes at most 90
	// in an hour, so filling the cap takes some 35 addresses.
	"signup": {Name: "signup", PerKeyPerMin: 1, KeyBurst: 30, PerAccountPerMin: 1, AccountBurst: 30},
}

// MaxBudgetScale bounds ScaleBudgets: a per-minute rate of 3000 x 10,000
// still fits an int, and nobody needs more to stay clear of the meter.
const MaxBudgetScale = 10_000

// ScaleBudgets returns a copy of b with every rate and burst multiplied by
// k, from 1 to MaxBudgetScale.
func ScaleBudgets(b map[string]Budget, k int) (map[string]Budget, error) {
	if k < 1 || k > MaxBudgetScale {
		return nil, fmt.Errorf("budget scale %d is outside 1..%d", k, MaxBudgetScale)
	}
	out := make(map[string]Budget, len(b))
	for name, v := range b {
		v.PerKeyPerMin *= k
		v.KeyBurst *= k
		v.PerAccountPerMin *= k
		v.AccountBurst *= k
		out[name] = v
	}
	return out, nil
}

// BudgetNames in the order /v1/limits lists them.
var BudgetNames = []string{"read", "order", "withdraw"}

// meterIdle is how long an unused bucket is kept at least; the sweep then
// forgets it once it is full again, which changes nothing (a new bucket
// starts full).
const meterIdle = 10 * time.Minute

// meterMaxBuckets bounds memory whatever the key churn.
const meterMaxBuckets = 1_000_000

type bucket struct {
	id   string
	lim  *rate.Limiter
	used time.Time
}

// meter holds the token buckets of one node. The buckets form a list from
// most to least recently used: a full table evicts the least recently used
// one (likely idle, hence full, so forgetting it changes little), never a
// bucket someone is draining; the idle sweep trims from the same end.
type meter struct {
	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	lru     list.List                // front: most recently used
	swept   time.Time
	// maxBuckets bounds the table (meterMaxBuckets; tests shrink it).
	maxBuckets int
}

func newMeter() *meter {
	return &meter{buckets: map[string]*list.Element{}, maxBuckets: meterMaxBuckets}
}

// bucketID is the name of a bucket: budget, separator, subject. It is
// written into buf, so that finding a bucket that exists (every request
// but a client's first) costs no string.
func bucketID(buf *[128]byte, budget, sep, subject string) []byte {
	return append(append(append(buf[:0], budget...), sep...), subject...)
}

// get finds the bucket named id, or makes it.
func (m *meter) get(id []byte, perMin, burst int, now time.Time) *rate.Limiter {
	if e := m.buckets[string(id)]; e != nil {
		b := e.Value.(*bucket)
		b.used = now
		m.lru.MoveToFront(e)
		return b.lim
	}
	for len(m.buckets) >= m.maxBuckets {
		m.evict(m.lru.Back())
	}
	b := &bucket{id: string(id), lim: rate.NewLimiter(rate.Limit(float64(perMin)/60), burst), used: now}
	m.buckets[b.id] = m.lru.PushFront(b)
	return b.lim
}

// size is how many buckets the table holds.
func (m *meter) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}

// BucketCount is how many rate-limit buckets this node's table holds (a
// metric: it grows with distinct keys and addresses, up to a million).
func (s *Server) BucketCount() int { return s.meter.size() }

func (m *meter) evict(e *list.Element) {
	delete(m.buckets, e.Value.(*bucket).id)
	m.lru.Remove(e)
}

// sweep forgets the full buckets among those unused for idle, oldest
// first. A bucket that is not full yet stays: the signup budget's (30 at
// once, then one a minute) takes half an hour to fill, and forgetting it
// after ten idle minutes gave an address 30 signups every ten minutes
// instead of one a minute (a black-box audit, 2026-11-29). The idle
// buckets are the list's tail, so the walk stops at the first recent one.
func (m *meter) sweep(now time.Time, idle time.Duration) {
	for e := m.lru.Back(); e != nil; {
		b := e.Value.(*bucket)
		if now.Sub(b.used) < idle {
			break
		}
		prev := e.Prev()
		if b.lim.TokensAt(now) >= float64(b.lim.Burst()) {
			m.evict(e)
		}
		e = prev
	}
	m.swept = now
}

// verdict is the outcome of drawing one token.
type verdict struct {
	ok         bool
	limit      int // per-minute limit of the binding bucket
	remaining  int
	resetUnix  int64
	retryAfter time.Duration
}

// take draws a token from the subject's bucket and, when account is set,
// from the account's bucket too: both or neither.
func (m *meter) take(b Budget, subject, account string, now time.Time) verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.swept) > time.Minute {
		m.sweep(now, meterIdle)
	}
	var buf [128]byte
	kl := m.get(bucketID(&buf, b.Name, "|", subject), b.PerKeyPerMin, b.KeyBurst, now)
	var al *rate.Limiter
	if account != "" {
		al = m.get(bucketID(&buf, b.Name, "|acct:", account), b.PerAccountPerMin, b.AccountBurst, now)
	}
	kr := kl.ReserveN(now, 1)
	if d := kr.DelayFrom(now); d > 0 {
		kr.CancelAt(now)
		return m.refused(b.PerKeyPerMin, d, now)
	}
	if al != nil {
		ar := al.ReserveN(now, 1)
		if d := ar.DelayFrom(now); d > 0 {
			ar.CancelAt(now)
			kr.CancelAt(now)
			return m.refused(b.PerAccountPerMin, d, now)
		}
	}
	v := verdict{ok: true, limit: b.PerKeyPerMin}
	kt := kl.TokensAt(now)
	tokens := kt
	if al != nil {
		if at := al.TokensAt(now); at < kt {
			tokens, v.limit = at, b.PerAccountPerMin
		}
	}
	v.remaining = int(math.Max(0, math.Floor(tokens)))
	v.resetUnix = resetAt(now, tokens, v.limit)
	return v
}

// peek reports remaining tokens without drawing (for /v1/limits).
func (m *meter) peek(b Budget, subject, account string, now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var buf [128]byte
	t := m.get(bucketID(&buf, b.Name, "|", subject), b.PerKeyPerMin, b.KeyBurst, now).TokensAt(now)
	if account != "" {
		t = math.Min(t, m.get(bucketID(&buf, b.Name, "|acct:", account), b.PerAccountPerMin, b.AccountBurst, now).TokensAt(now))
	}
	return int(math.Max(0, math.Floor(t)))
}

func (m *meter) refused(perMin int, delay time.Duration, now time.Time) verdict {
	// The epoch second at which the bucket admits: rounded up, as resetAt
	// does, not truncated plus one (a whole-second wait named the second
	// after it).
	return verdict{limit: perMin, retryAfter: delay, resetUnix: ceilUnix(now.Add(delay))}
}

// ceilUnix is t in epoch seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() != 0 {
		s++
	}
	return s
}

// resetAt is the epoch second at which a bucket holding tokens next admits
// a request.
func resetAt(now time.Time, tokens float64, perMin int) int64 {
	if tokens >= 1 {
		return now.Unix()
	}
	wait := time.Duration((1 - tokens) * 60 / float64(perMin) * float64(time.Second))
	return ceilUnix(now.Add(wait))
}

// leaderBudgets are drawn on the leader, with the write they meter.
var leaderBudgets = map[string]bool{"order": true, "withdraw": true, "signup": true}

// meterGuard draws the route's budget: per key and per account for keyed
// routes, per client address for public ones that have a budget (signup).
// A leader budget is not drawn here: the guard names the draw, and the
// leader takes it when the handler proposes its write (Server.propose).
// A request refused before it proposes (a malformed body) draws nothing.
func meterGuard(s *Server, r *Route) gin.HandlerFunc {
	if r.Budget == "" {
		return nil
	}
	if _, ok := Budgets[r.Budget]; !ok {
		panic("route " + r.Path + " names unknown budget " + r.Budget)
	}
	if leaderBudgets[r.Budget] {
		return func(c *gin.Context) {
			subject, account := subjectOf(c, r)
			st := stateOf(c)
			st.draw, st.hasDraw = node.Draw{ID: randomID(16), Budget: r.Budget, Subject: subject, Account: account}, true
		}
	}
	if r.Auth == Keyed && r.Method != http.MethodGet {
		// A keyed write on a local budget (revoke, deposit invoices, the
		// growth writes, the faucet, USDx quotes): drawn here, so a
		// request that never proposes is metered too, and again at the
		// leader in buckets of their own, so that spreading the writes
		// over N nodes does not give a key N budgets of log entries. Not
		// only idem routes: a USDx quote takes no idempotency key and is a
		// log entry all the same. A keyed POST that never proposes (a
		// withdrawal quote) leaves its draw unused.
		return func(c *gin.Context) {
			v, ok := s.drawVerdict(c, r, s.budgets[r.Budget])
			if !ok {
				return
			}
			subject, account := subjectOf(c, r)
			st := stateOf(c)
			st.local, st.hasLocal = v, true
			st.draw, st.hasDraw = node.Draw{ID: randomID(16), Budget: r.Budget, Subject: clusterWrites + subject, Account: clusterWrites + account}, true
		}
	}
	return func(c *gin.Context) { s.draw(c, r, s.budgets[r.Budget]) }
}

// clusterWrites prefixes the leader's buckets for keyed writes on a local
// budget, apart from the leader's own clients' reads of that budget.
const clusterWrites = "w:"

// subjectOf names whose buckets a request draws: its key and account on a
// keyed route, else its client address and, for an IPv6 client, its site
// (the /48) in the budget's account bucket: one site's /64s share that
// aggregate (read: five /64s' worth; signup: one /64's), where each /64
// alone had a fresh budget, 65,536 of them per /48 (load review of
// 2026-11-27).
func subjectOf(c *gin.Context, r *Route) (subject, account string) {
	if r.Auth == Keyed {
		cl := callerOf(c)
		return "key:" + cl.KeyID, cl.AccountID
	}
	ip := c.ClientIP()
	if site := clientaddr.Site(ip); site != "" {
		return "ip:" + clientaddr.Key(ip), "site:" + site
	}
	return "ip:" + clientaddr.Key(ip), ""
}

// addressSubject names the buckets of the request's client address, as
// the WebSocket cap counts it too (an IPv6 client's whole /64 is one
// client: otherwise each of its addresses would get a fresh public budget,
// the signup guard included).
func addressSubject(c *gin.Context) string { return "ip:" + clientaddr.Key(c.ClientIP()) }

// draw takes one token of b for the caller of r on this node's meter, sets
// the X-RateLimit headers, and answers 429 itself when the budget is empty.
func (s *Server) draw(c *gin.Context, r *Route, b Budget) bool {
	_, ok := s.drawVerdict(c, r, b)
	return ok
}

// drawVerdict is draw that also returns the verdict.
func (s *Server) drawVerdict(c *gin.Context, r *Route, b Budget) (verdict, bool) {
	subject, account := subjectOf(c, r)
	v := s.meter.take(b, subject, account, time.Now())
	return v, s.rateAnswer(c, b.Name, v)
}

// bindingVerdict is the verdict whose figures an admitted write's rate
// headers show: the leader's, unless the write drew this node's buckets
// too (a keyed write on a local budget) and those have fewer tokens left.
// SPEC section 8's X-RateLimit-Remaining is "tokens left in the binding
// budget", the one that refuses first; showing the leader's fuller bucket
// let a client pacing on the header run into the node's 429.
func bindingVerdict(st *reqState, leader verdict) verdict {
	if st.hasLocal && st.local.remaining < leader.remaining {
		return st.local
	}
	return leader
}

// The rate headers' canonical keys (textproto.CanonicalMIMEHeaderKey of
// X-RateLimit-Limit and so on), as clients see them on the wire.
const (
	hdrRateLimit     = "X-Ratelimit-Limit"
	hdrRateRemaining = "X-Ratelimit-Remaining"
	hdrRateReset     = "X-Ratelimit-Reset"
)

// rateAnswer sets the X-RateLimit headers of v and, when v refuses,
// answers 429 with Retry-After. It reports whether v admits.
func (s *Server) rateAnswer(c *gin.Context, budget string, v verdict) bool {
	// Every metered request sets these three: one string holds the three
	// numbers, and the request's header slots the values.
	var buf [3 * 20]byte
	b := strconv.AppendInt(buf[:0], int64(v.limit), 10)
	i := len(b)
	b = strconv.AppendInt(b, int64(v.remaining), 10)
	j := len(b)
	b = strconv.AppendInt(b, v.resetUnix, 10)
	all := string(b)
	st := stateOf(c)
	st.setHeader(c, slotRateLimit, hdrRateLimit, all[:i])
	st.setHeader(c, slotRateRemaining, hdrRateRemaining, all[i:j])
	st.setHeader(c, slotRateReset, hdrRateReset, all[j:])
	if v.ok {
		return true
	}
	secs := int64(math.Ceil(v.retryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	c.Writer.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	fail(c, http.StatusTooManyRequests, wire.CodeRateLimited,
		"the "+budget+" budget is empty; retry after "+strconv.FormatInt(secs, 10)+"s")
	return false
}

// leaderMeter is the Meter the node draws leader budgets from while it
// leads: this server's buckets, sized by its budgets.
type leaderMeter struct{ s *Server }

func (m leaderMeter) Take(d node.Draw) node.Verdict {
	b, ok := m.s.budgets[d.Budget]
	if !ok {
		// A budget this server does not size (a member of another
		// version): admitted unmetered, and no rate headers are set.
		return node.Verdict{OK: true}
	}
	v := m.s.meter.take(b, d.Subject, d.Account, time.Now())
	return node.Verdict{OK: v.ok, Limit: v.limit, Remaining: v.remaining, ResetUnix: v.resetUnix,
		RetryAfterMs: (v.retryAfter + time.Millisecond - 1).Milliseconds()}
}

func (m leaderMeter) Remaining(d node.Draw) int {
	b, ok := m.s.budgets[d.Budget]
	if !ok {
		return 0
	}
	return m.s.meter.peek(b, d.Subject, d.Account, time.Now())
}

// leaderVerdict converts the leader's verdict for the rate headers.
func leaderVerdict(v node.Verdict) verdict {
	return verdict{ok: v.OK, limit: v.Limit, remaining: v.Remaining, resetUnix: v.ResetUnix,
		retryAfter: time.Duration(v.RetryAfterMs) * time.Millisecond}
}
