package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

type depositView = fsm.DepositView

func init() { routeSets = append(routeSets, (*Server).accessRoutes) }

// Empty is a request with no fields (signup, faucet).
type Empty struct{}

// MintRequest is the body of POST /v1/sessions.
type MintRequest struct {
	Label  *string  `json:"label" maxLen:"64" doc:"a name for the key, shown in GET /v1/sessions"`
	Scopes []string `json:"scopes" enum:"read,trade,withdraw,admin-sessions" maxLen:"4" doc:"the new key's scopes, intersected with the minting key's own: a requested scope the minting key lacks is dropped without an error (the answer's scopes say what the key got). Omitted (or null): the new key gets every scope of the minting key, so a master key mints a key that can withdraw and mint; name the scopes (read, trade) for a delegate that must not. An empty array is refused, 400 validation"`
}

// RevokeRequest is the body of POST /v1/sessions/revoke.
type RevokeRequest struct {
	KeyID         *string `json:"keyId" maxLen:"64"`
	AllButCurrent *bool   `json:"allButCurrent"`
}

// PageQuery is the cursor query of history endpoints.
type PageQuery struct {
	Limit     *wire.Int `json:"limit" unit:"int" min:"1" max:"200" doc:"page size: 1 to 200, default 50"`
	BeforeSeq *wire.Int `json:"beforeSeq" unit:"seq" min:"1" doc:"only records whose seq is below this (the previous page's nextBeforeSeq); omit for the newest"`
}

// Page sizes of history endpoints.
const (
	PageLimitDefault = 50
	PageLimitMax     = 200
)

// SignupResult is the 201 answer of POST /v1/signup (SPEC section 2): the
// stored fsm.SignupResult, which never holds the key, with the key this
// handler drew, so apiKey is always there.
type SignupResult struct {
	APIKey      string `json:"apiKey"`
	AccountID   string `json:"accountId"`
	RailAddress string `json:"railAddress"`
	// ReferredBy is SPEC's optional field, declared so that the closed
	// schema admits it; a signup body is {}, so nothing binds at signup
	// and it is never sent today.
	ReferredBy *SignupReferral `json:"referredBy,omitempty" doc:"the referral the new account is bound to; absent today: a signup body is {}, so bind a code afterwards with POST /v1/referral/bind"`
}

// SignupReferral is the signup result's referredBy.
type SignupReferral struct {
	Code      string   `json:"code"`
	BoundTsMs wire.Int `json:"boundTsMs" unit:"ms"`
}

func (s *Server) accessRoutes() []*Route {
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/signup", Summary: "Create an account and its full-scope master key (testnet only)",
			Budget: "signup", Idem: true, Request: Empty{},
			Responses: map[int]any{201: SignupResult{}, 403: wire.ErrorBody{}, 409: wire.ErrorBody{}},
			Refuses:   map[int][]string{403: {wire.CodeFeatureUnavailable}}, Handler: s.signup,
			Notes: map[int]string{409: signupRetry409, 429: signupCap429}, IdemRetry: signupIdemRetry},
		{Method: http.MethodPost, Path: "/v1/faucet", Summary: "Credit test sats through the deposit path (limited per hour)",
			Auth: Keyed, Budget: "read", Idem: true, Request: Empty{},
			Responses: map[int]any{201: fsm.FaucetResult{}},
			Refuses:   map[int][]string{403: {wire.CodeFeatureUnavailable}, 503: {wire.CodeFeatureUnavailable}}, Handler: s.faucet,
			Notes: map[int]string{429: faucetCap429}},
		{Method: http.MethodGet, Path: "/v1/account", Summary: "The caller's account and balances",
			Auth: Keyed, Scope: "read", Budget: "read", Responses: map[int]any{200: AccountView{}}, Handler: s.account},
		{Method: http.MethodGet, Path: "/v1/deposits", Summary: "Deposits, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: DepositsPage{}}, Handler: s.deposits},
		{Method: http.MethodGet, Path: "/v1/sessions", Summary: "The account's keys (never their values)",
			Auth: Keyed, Budget: "read", Responses: map[int]any{200: SessionsView{}}, Handler: s.sessions},
		{Method: http.MethodPost, Path: "/v1/sessions", Summary: "Mint a delegate key; scopes are intersected with the minter's, and omitted copy all of them (withdraw included)",
			Auth: Keyed, Scope: "admin-sessions", Budget: "order", Idem: true, Request: MintRequest{},
			Responses: map[int]any{201: fsm.MintResult{}, 403: wire.ErrorBody{}},
			Refuses:   map[int][]string{403: {wire.CodeSessionLimit}}, Handler: s.mintSession,
			Notes: map[int]string{201: mintReplay201}, IdemRetry: mintIdemRetry},
		{Method: http.MethodPost, Path: "/v1/sessions/revoke", Summary: "Revoke one key, or all but the calling key",
			Auth: Keyed, Scope: "admin-sessions", Budget: "read", Idem: true, Request: RevokeRequest{},
			Responses: map[int]any{200: fsm.RevokeResult{}, 404: wire.ErrorBody{}}, Handler: s.revokeSessions},
		{Method: http.MethodGet, Path: "/v1/limits", Summary: "Live rate budgets of the calling key",
			Auth: Keyed, Budget: "read", Responses: map[int]any{200: LimitsView{}}, Handler: s.limits},
	}
}

// What the description says of these routes beyond their table rows: a
// key value is shown once (signup, mint), and the hourly caps apply
// enforces set the rate headers of their 429 (capAnswer).
const (
	signupIdemRetry = "The key value is returned exactly once and never stored: a retry with a key already used for a " +
		"signup (yours, or anyone's) answers 409 conflict without a key, never the first 201, and creates nothing. Send a " +
		"fresh random key for every signup; if a 201 was lost, its account cannot be recovered: sign up again."
	signupRetry409 = "conflict: the idempotency-key was already used for a signup; the key value is never shown twice"
	signupCap429   = "From the signup budget of the client address (30 at once, then 1 a minute), or from the venue-wide cap of signups per rolling hour, " +
		"which the state machine enforces: then X-RateLimit-Limit is that cap, X-RateLimit-Remaining 0 and " +
		"X-RateLimit-Reset the epoch second the oldest signup of the hour leaves it, the instant Retry-After counts to"
	faucetCap429 = "From the read budget, or from the account's faucet cap (grants per rolling hour; grantsRemainingThisHour " +
		"counts down to it): then X-RateLimit-Limit is the grants per hour, X-RateLimit-Remaining 0 and X-RateLimit-Reset " +
		"the epoch second the oldest grant of the hour leaves it, the instant Retry-After counts to"
	mintIdemRetry = "The key value is returned exactly once and never stored: a retry with the same key and body within " +
		"24 hours, sent with the same x-api-key, gets the first 201 (Idempotent-Replayed: true) with keyId and scopes but without " +
		"apiKey, and mints nothing; sent with another x-api-key it is 409 idempotency_key_reused (what a mint makes depends " +
		"on the minting key). If that answer was lost, revoke keyId (POST /v1/sessions/revoke) and mint again."
	mintReplay201 = "apiKey is in the first answer only: a replay (Idempotent-Replayed: true) omits it"
)

// newAPIKey draws a key value. The pdk_ prefix lets secret scanners spot
// leaked keys.
func newAPIKey() string { return "pdk_" + randomID(24) }

// uaClass buckets a User-Agent into a coarse client class; the raw string
// is never stored.
func uaClass(ua string) string {
	u := strings.ToLower(ua)
	switch {
	case u == "":
		return ""
	case strings.HasPrefix(u, "curl/") || strings.HasPrefix(u, "wget/") || strings.HasPrefix(u, "httpie/"):
		return "cli"
	case strings.Contains(u, "python") || strings.Contains(u, "aiohttp") || strings.Contains(u, "httpx"):
		return "python"
	case strings.HasPrefix(u, "go-http-client"):
		return "go"
	case strings.Contains(u, "node") || strings.Contains(u, "axios") || strings.Contains(u, "undici"):
		return "node"
	case strings.Contains(u, "mozilla"):
		return "browser"
	}
	return "other"
}

// signupReplayed explains a replayed signup: signup idempotency keys share
// one namespace (there is no account yet to scope them by), so a key copied
// from an example may already be someone else's.
const signupReplayed = "this idempotency-key was already used for a signup, maybe by someone else; " +
	"that account's key was returned once and cannot be shown again. Send a fresh random idempotency-key " +
	"(for example 16 random hex characters) for every new signup"

func (s *Server) signup(c *gin.Context) {
	var req Empty
	if !s.decode(c, &req) {
		return
	}
	if s.Node.Config().Deployment == "prod" {
		fail(c, http.StatusForbidden, wire.CodeFeatureUnavailable, "self-serve signup is testnet only")
		return
	}
	key := newAPIKey()
	seed, err := rail.DrawSeed(nil)
	if err != nil {
		unavailable(c, "cannot draw randomness")
		return
	}
	p := access.NewAccount{AccountID: "acc_" + randomID(8), UserID: "usr_" + randomID(8),
		RailAddress: s.Rail.AccountAddress(seed), KeyID: "key_" + randomID(8), KeyHashHex: HashKey(key),
		UAClass: uaClass(c.GetHeader("User-Agent"))}
	res, ok := s.submit(c, fsm.CmdSignup, p, req)
	if !ok {
		return
	}
	if res.Code == wire.CodeRateLimited {
		s.signupCapAnswer(c)
	}
	out, ok := storedResult[fsm.SignupResult](c, res)
	if !ok {
		return
	}
	// A replay of this handler's own proposal (the node retried it after a
	// leader change or a lost forward) names the account drawn above: only
	// this handler holds its key, so it hands it out. Anyone else's replay
	// must not get a key, which was returned once to its own caller.
	if res.Replay && out.AccountID != p.AccountID {
		fail(c, http.StatusConflict, wire.CodeConflict, signupReplayed)
		return
	}
	c.JSON(res.Status, SignupResult{APIKey: key, AccountID: out.AccountID, RailAddress: out.RailAddress})
}

func (s *Server) faucet(c *gin.Context) {
	var req Empty
	if !s.decode(c, &req) {
		return
	}
	res, ok := s.submit(c, fsm.CmdFaucet, nil, req)
	if !ok {
		return
	}
	if res.Code == wire.CodeRateLimited {
		s.faucetCapAnswer(c, callerOf(c).AccountID)
	}
	respond(c, res)
}

// An hourly cap that apply enforces (the venue-wide signup cap, an
// account's faucet grants) refuses with 429 after the request's token
// bucket admitted it, so the X-RateLimit headers submit set describe a
// bucket with tokens left that resets now: a client trusting them would
// retry at once. capAnswer replaces them with the cap's own figures:
// Limit the cap per rolling hour, Remaining 0, Reset the epoch second the
// cap admits again, which is also what Retry-After counts to (from the
// log's time). docs/decisions.md, "Rate headers of an hourly cap".
func capAnswer(c *gin.Context, limit int, reopensMs, nowMs int64) {
	h := c.Writer.Header()
	h.Set(hdrRateLimit, strconv.Itoa(limit))
	h.Set(hdrRateRemaining, "0")
	h.Set(hdrRateReset, strconv.FormatInt(ceilDiv(reopensMs, 1000), 10))
	h.Set("Retry-After", strconv.FormatInt(max(1, ceilDiv(reopensMs-nowMs, 1000)), 10))
}

// ceilDiv is a/b rounded up, for b > 0 and a >= 0 (a negative a, a cap
// that has reopened since, rounds toward zero: Retry-After is at least 1
// anyway).
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// signupCapAnswer sets the headers of a refusal by the venue-wide signup
// cap: it reopens when the oldest signup of the hour leaves it.
func (s *Server) signupCapAnswer(c *gin.Context) {
	limit, reopensMs, nowMs := 0, int64(0), int64(0)
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		nowMs = st.NowMs
		limit = st.Access.SignupsPerHour
		if limit <= 0 {
			limit = access.DefaultSignupsPerHour
		}
		reopensMs = nowMs
		if r, full := st.Access.SignupsReopenMs(nowMs); full {
			reopensMs = r
		}
	})
	capAnswer(c, limit, reopensMs, nowMs)
}

// faucetCapAnswer sets the headers of a refusal by the account's hourly
// faucet cap: it reopens when the grant whose leaving brings the hour's
// count under the cap leaves it (the oldest, unless the cap was lowered).
func (s *Server) faucetCapAnswer(c *gin.Context, accountID string) {
	limit, reopensMs, nowMs := 0, int64(0), int64(0)
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		nowMs = st.NowMs
		limit = st.Access.Faucet.GrantsPerHour
		reopensMs = nowMs
		a := st.Access.Accounts[accountID]
		if a == nil {
			return
		}
		hourMs := time.Hour.Milliseconds()
		var recent []int64 // in grant order, so oldest first
		for _, ts := range a.FaucetGrantsTsMs {
			if ts > nowMs-hourMs { // as access.FaucetGrantsLeft counts them
				recent = append(recent, ts)
			}
		}
		if limit > 0 && len(recent) >= limit {
			reopensMs = recent[len(recent)-limit] + hourMs
		}
	})
	capAnswer(c, limit, reopensMs, nowMs)
}

func (s *Server) account(c *gin.Context) {
	cl := callerOf(c)
	var v AccountView
	found := false
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		a := st.Access.Accounts[cl.AccountID]
		if a == nil {
			return
		}
		found = true
		v = AccountView{AccountID: a.ID, UserID: a.UserID, RailAddress: a.RailAddress,
			FreeMsat:     wire.Int(st.Ledger.Balance(ledger.Free(a.ID))),
			ReservedMsat: wire.Int(st.Ledger.Balance(ledger.Reserved(a.ID)))}
		if a.AutoSweepThresholdMsat != nil {
			v.AutoSweepThresholdMsat = wire.Ptr(*a.AutoSweepThresholdMsat)
		}
		if st.USDx != nil { // below fsm.LevelDomains there is no USDx
			u := st.USDx.Account(a.ID)
			v.Usdx, v.UsdxPending, v.Susdx, v.SusdxCooling, v.Cooling = &u.Usdx, &u.UsdxPending, &u.Susdx, &u.SusdxCooling, u.Cooling
		}
	})
	if !found {
		notFound(c, "account")
		return
	}
	v.DepositFees = s.depositFees()
	c.JSON(http.StatusOK, v)
}

func (s *Server) depositFees() []DepositFeeView {
	out := []DepositFeeView{}
	for _, f := range s.Rail.DepositFees() {
		v := DepositFeeView{Path: f.Path, Description: f.Description}
		if f.RecommendedMinimumSats != nil {
			v.RecommendedMinimumSats = wire.Ptr(*f.RecommendedMinimumSats)
		}
		out = append(out, v)
	}
	return out
}

func (s *Server) deposits(c *gin.Context) {
	limit, before, ok := s.pageQuery(c)
	if !ok {
		return
	}
	cl := callerOf(c)
	page := DepositsPage{Deposits: []depositView{}}
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		seqs, next := pageSeqs(st.Funds.ByAccount[cl.AccountID], before, limit)
		for _, q := range seqs {
			page.Deposits = append(page.Deposits, fsm.NewDepositView(st.Funds.Deposits[q]))
		}
		page.NextBeforeSeq = next
	})
	c.JSON(http.StatusOK, page)
}

func (s *Server) sessions(c *gin.Context) {
	cl := callerOf(c)
	out := SessionsView{TsMs: wire.Int(time.Now().UnixMilli()), Sessions: []SessionView{}}
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		for _, k := range st.Access.AccountKeys(cl.AccountID) {
			v := SessionView{KeyID: k.ID, AccountID: k.AccountID, Label: k.Label, Scopes: k.Scopes.Names(),
				UAClass: strPtr(k.UAClass), IPCountryFirst: strPtr(k.IPCountryFirst),
				CreatedTsMs: wire.Int(k.CreatedTsMs), LastSeenTsMs: msPtr(k.LastSeenTsMs),
				RevokedTsMs: msPtr(k.RevokedTsMs), RevokedBy: strPtr(k.RevokedBy), RevokeReason: strPtr(k.RevokeReason)}
			if k.ID == cl.KeyID {
				v.Current = 1
			}
			out.Sessions = append(out.Sessions, v)
		}
	})
	c.JSON(http.StatusOK, out)
}

func (s *Server) mintSession(c *gin.Context) {
	var req MintRequest
	if !s.decode(c, &req) {
		return
	}
	key := newAPIKey()
	p := access.NewKey{KeyID: "key_" + randomID(8), KeyHashHex: HashKey(key), UAClass: uaClass(c.GetHeader("User-Agent"))}
	if req.Label != nil {
		p.Label = *req.Label
	}
	if req.Scopes != nil {
		if len(req.Scopes) == 0 {
			invalid(c, "field scopes: must name at least one scope (omit it to copy the minting key's)")
			return
		}
		var sc access.Scope
		for _, n := range req.Scopes {
			sc |= access.ParseScope(n)
		}
		p.Scopes = &sc
	}
	// What the mint makes depends on the calling key (the scopes are
	// intersected with its own, or copied from it), which the body does
	// not name: the request hash covers it, as an allButCurrent revoke's
	// does, so another key's same body under the same idempotency-key is
	// another request (409), not a replay of a mint it could not make.
	res, ok := s.submit(c, fsm.CmdMintKey, p, mintHashed{MintRequest: req, Minter: callerOf(c).KeyID})
	if !ok {
		return
	}
	out, ok := storedResult[fsm.MintResult](c, res)
	if !ok {
		return
	}
	if res.Replay && out.KeyID != p.KeyID {
		// Another request's mint: the stored body, which never holds the
		// key (it was returned once, to that request).
		respond(c, res)
		return
	}
	// A fresh mint, or the node's retry of this very proposal.
	out.APIKey = key
	c.JSON(res.Status, out)
}

func (s *Server) revokeSessions(c *gin.Context) {
	var req RevokeRequest
	if !s.decode(c, &req) {
		return
	}
	all := req.AllButCurrent != nil && *req.AllButCurrent
	if (req.KeyID == nil) == !all {
		invalid(c, "give either keyId or allButCurrent: true")
		return
	}
	p := fsm.RevokePayload{AllButCurrent: all}
	if req.KeyID != nil {
		p.KeyID = *req.KeyID
	}
	// "All but current" spares the calling key, which the body does not
	// name: the request hash covers it, so the same body sent by another
	// key under the same idempotency-key is another request (409), not a
	// replay telling that key its revoke was done.
	var hashed any = req
	if all {
		hashed = revokeAllHashed{RevokeRequest: req, Current: callerOf(c).KeyID}
	}
	if res, ok := s.submit(c, fsm.CmdRevokeKeys, p, hashed); ok {
		respond(c, res)
	}
}

// mintHashed is what a mint's request hash covers.
type mintHashed struct {
	MintRequest
	Minter string `json:"minter"`
}

// revokeAllHashed is what an allButCurrent revoke's request hash covers.
type revokeAllHashed struct {
	RevokeRequest
	Current string `json:"current"`
}

// leaderBudgetsWait bounds how long GET /v1/limits on a follower waits for
// the leader's report of the order and withdraw budgets.
const leaderBudgetsWait = 2 * time.Second

// limits reports the caller's budgets: the read budget from this node's
// meter (reads are drawn where they are served), the order and withdraw
// budgets as the leader's meter holds them (they are drawn there).
func (s *Server) limits(c *gin.Context) {
	cl := callerOf(c)
	now := time.Now()
	subject := "key:" + cl.KeyID
	lead := []node.Draw{{Budget: "order", Subject: subject, Account: cl.AccountID},
		{Budget: "withdraw", Subject: subject, Account: cl.AccountID}}
	// Bounded: a leader whose admin listener accepts and never answers
	// (partitioned, wedged) held the request until the client left.
	ctx, cancel := context.WithTimeout(c.Request.Context(), leaderBudgetsWait)
	defer cancel()
	left, err := s.Node.Remaining(ctx, lead)
	if err != nil {
		// err names the leader's id and admin address (an operational
		// surface) or carries its error text: logged, not relayed.
		if c.Request.Context().Err() == nil {
			s.log.Warn("budget report from the leader failed", "err", err)
		}
		unavailable(c, "cannot read the order and withdraw budgets from the leader right now; retry or ask another node")
		return
	}
	view := func(name string, remaining int) BudgetView {
		b := s.budgets[name]
		return BudgetView{LimitPerMin: b.PerKeyPerMin, Burst: b.KeyBurst, Remaining: remaining}
	}
	c.JSON(http.StatusOK, LimitsView{Tier: s.Node.Config().Deployment,
		Budgets: BudgetsView{Read: view("read", s.meter.peek(s.budgets["read"], subject, cl.AccountID, now)),
			Order: view("order", left[0]), Withdraw: view("withdraw", left[1])}})
}
