package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node/tokenrail"
)

// USDx and sUSDx (SPEC sections 2, 3, 4, 7 and 8). fsm/usdx decides every
// rule; these handlers decode, parse whole units, draw the ids a command
// needs, and answer. Writes take scope trade (USDx withdrawals: withdraw)
// and draw the order budget, except quotes, cheap and moving nothing, which
// draw read; reads take scope read.

func init() { routeSets = append(routeSets, (*Server).usdxRoutes) }

// WithTokenRail wires the USDx token rail (deposit addresses, withdrawals).
// Without one the token-rail routes answer 503 token_rail_unavailable.
func WithTokenRail(r tokenrail.Rail) Option { return func(s *Server) { s.TokenRail = r } }

// USDxQuoteRequest is the body of POST /v1/usdx/quotes.
type USDxQuoteRequest struct {
	Side string `json:"side" req:"true" enum:"mint,redeem"`
	Usdx string `json:"usdx" req:"true" maxLen:"40" doc:"amount of USDx as a decimal string; whole units only on testnet (usdx_whole_units)"`
}

// USDxMintRequest is the body of POST /v1/usdx/mints.
type USDxMintRequest struct {
	QuoteID string `json:"quoteId" req:"true" maxLen:"255" doc:"the quote to mint on; must equal the idempotency-key"`
}

// USDxAmountRequest is the body of POST /v1/usdx/redemptions and /stake.
type USDxAmountRequest struct {
	Usdx string `json:"usdx" req:"true" maxLen:"40" doc:"whole USDx, as a decimal string"`
}

// USDxUnstakeRequest is the body of POST /v1/usdx/unstake.
type USDxUnstakeRequest struct {
	Susdx string `json:"susdx" req:"true" maxLen:"40" doc:"whole sUSDx to unstake, as a decimal string"`
}

// USDxWithdrawRequest is the body of POST /v1/usdx/withdrawals.
type USDxWithdrawRequest struct {
	Usdx         string `json:"usdx" req:"true" maxLen:"40" doc:"whole USDx, as a decimal string"`
	SparkAddress string `json:"sparkAddress" req:"true" maxLen:"128" doc:"the token address to send to; frozen addresses are refused (compliance_refused)"`
}

// USDxHistoryQuery is the query of GET /v1/usdx/history.
type USDxHistoryQuery struct {
	Limit      *wire.Int `json:"limit" unit:"int" min:"1" max:"200" doc:"page size: 1 to 200, default 50"`
	BeforeTsMs *wire.Int `json:"beforeTsMs" unit:"ms" min:"1" doc:"only boundaries before this (the previous page's nextBeforeTsMs); omit for the newest"`
}

// USDxRefusalBody is the 409 body of USDx refusals (SPEC section 7).
type USDxRefusalBody struct {
	Error    string          `json:"error"`
	Code     string          `json:"code"`
	Reason   *string         `json:"reason,omitempty" doc:"capacity, oracle_stale, dust, expired, price_moved, hedge_refused, or the halt's reason"`
	Headroom *string         `json:"headroom,omitempty" doc:"with usdx_capacity: USDx that may be minted now"`
	Limit    *string         `json:"limit,omitempty" enum:"organic_oi,hard_cap,oi_cap,skew,velocity"`
	Quote    *usdx.QuoteView `json:"quote,omitempty" doc:"with usdx_requote: the fresh quote"`
}

// DepositAddressView is SPEC's deposit address.
type DepositAddressView struct {
	Address         string   `json:"address"`
	AccountNumber   wire.Int `json:"accountNumber" unit:"int"`
	TokenIdentifier *string  `json:"tokenIdentifier"`
}

func (s *Server) usdxRoutes() []*Route {
	refusals := map[int]any{400: wire.ErrorBody{}, 403: wire.ErrorBody{}, 404: wire.ErrorBody{}, 409: USDxRefusalBody{}}
	with := func(ok int, body any) map[int]any {
		m := map[int]any{ok: body}
		for k, v := range refusals {
			m[k] = v
		}
		return m
	}
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/usdx", Summary: "USDx public state: one consistent snapshot, no user data",
			Budget: "read", Responses: map[int]any{200: usdx.PublicView{}}, Handler: s.usdxState},
		{Method: http.MethodPost, Path: "/v1/usdx/quotes", Summary: "Quote a USDx mint or redemption (409 when capacity, the oracle, a halt or dust refuses)",
			Auth: Keyed, Scope: "trade", Budget: "read", Request: USDxQuoteRequest{},
			Responses: with(201, usdx.QuoteView{}), Handler: s.usdxQuote,
			Refuses: map[int][]string{400: {wire.CodeUSDxWholeUnits}, 403: {wire.CodeFeatureUnavailable},
				// conflict: the node's own retry of the write (its random
				// idempotency key) whose stored answer was dropped early.
				409: {wire.CodeConflict, wire.CodeUSDxCapacity, wire.CodeUSDxDust, wire.CodeUSDxMintsHalted, wire.CodeUSDxOracleStale}},
			Notes: map[int]string{201: "An account keeps 20 quotes, each until 10 minutes after it expires; from feature level 11 " +
				"a new one drops the oldest expired one, else the oldest earlier redeem quote (a redemption takes no quote), else " +
				"the oldest quote (below it, the oldest quote); a mint on a dropped quote answers 404"}},
		{Method: http.MethodPost, Path: "/v1/usdx/mints", Summary: "Mint on a quote in one entry: sats debited, hedge short opened, USDx credited; the idempotency-key is the quote id",
			Auth: Keyed, Scope: "trade", Budget: "order", Idem: true, Request: USDxMintRequest{},
			Responses: with(201, usdx.SagaView{}), Handler: s.usdxMint,
			Refuses: map[int][]string{400: {wire.CodeInsufficientBalance}, 403: {wire.CodeFeatureUnavailable},
				409: {wire.CodeUSDxCapacity, wire.CodeUSDxDust, wire.CodeUSDxMintsHalted, wire.CodeUSDxOracleStale,
					wire.CodeUSDxQuoteExpired, wire.CodeUSDxRequote}}},
		{Method: http.MethodPost, Path: "/v1/usdx/redemptions", Summary: "Redeem USDx for sats at the oracle price less fees; queued while the oracle is stale; never refused for a halt. An optional idempotency-key makes a retry safe",
			Auth: Keyed, Scope: "trade", Budget: "order", IdemOptional: true, IdemOwnNamespace: true, Request: USDxAmountRequest{},
			Responses: with(201, usdx.SagaView{}), Handler: s.usdxRedeem,
			Refuses: map[int][]string{400: {wire.CodeInsufficientBalance, wire.CodeUSDxWholeUnits}, 403: {wire.CodeFeatureUnavailable},
				409: {wire.CodeUSDxCapacity, wire.CodeUSDxDust, wire.CodeUSDxOracleStale}}},
		{Method: http.MethodPost, Path: "/v1/usdx/stake", Summary: "Stake USDx for sUSDx at the served share price (refused during a mint halt). An optional idempotency-key makes a retry safe",
			Auth: Keyed, Scope: "trade", Budget: "order", IdemOptional: true, Request: USDxAmountRequest{},
			Responses: with(201, usdx.StakeResult{}), Handler: s.usdxStake,
			Refuses: map[int][]string{400: {wire.CodeInsufficientBalance, wire.CodeUSDxWholeUnits}, 403: {wire.CodeFeatureUnavailable},
				409: {wire.CodeUSDxDust, wire.CodeUSDxMintsHalted, wire.CodeUSDxOracleStale}}},
		{Method: http.MethodPost, Path: "/v1/usdx/unstake", Summary: "Start an unstake: the sUSDx cools for staking.unstakeCooldownMs, then is released at the share price then. An optional idempotency-key makes a retry safe",
			Auth: Keyed, Scope: "trade", Budget: "order", IdemOptional: true, Request: USDxUnstakeRequest{},
			Responses: with(201, usdx.UnstakeView{}), Handler: s.usdxUnstake,
			Refuses: map[int][]string{400: {wire.CodeInsufficientBalance, wire.CodeUSDxWholeUnits}}},
		{Method: http.MethodGet, Path: "/v1/usdx/unstakes", Summary: "The account's unstakes: cooling, then the last released",
			Auth: Keyed, Scope: "read", Budget: "read", Responses: map[int]any{200: usdx.UnstakesView{}}, Handler: s.usdxUnstakes},
		{Method: http.MethodGet, Path: "/v1/usdx/history", Summary: "Funding waterfall entries, newest first",
			Budget: "read", Query: USDxHistoryQuery{}, Responses: map[int]any{200: usdx.HistoryPage{}, 400: wire.ErrorBody{}}, Handler: s.usdxHistory},
		{Method: http.MethodGet, Path: "/v1/usdx/deposit-address", Summary: "The account's USDx deposit address, allocated on first request",
			Auth: Keyed, Scope: "read", Budget: "read",
			Responses: map[int]any{200: DepositAddressView{}, 503: wire.ErrorBody{}},
			Refuses:   map[int][]string{503: {wire.CodeTokenRailUnavail}}, Handler: s.usdxDepositAddress},
		{Method: http.MethodGet, Path: "/v1/usdx/withdrawals", Summary: "The account's USDx withdrawals, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Responses: map[int]any{200: usdx.WithdrawalsView{}}, Handler: s.usdxWithdrawals},
		{Method: http.MethodPost, Path: "/v1/usdx/withdrawals", Summary: "Withdraw USDx to a token address (requested, then paid when the custody transfer lands; not gated by halts)",
			Auth: Keyed, Scope: "withdraw", Budget: "order", Idem: true, Request: USDxWithdrawRequest{},
			Responses: func() map[int]any { m := with(201, usdx.WithdrawalView{}); m[503] = wire.ErrorBody{}; return m }(),
			Refuses: map[int][]string{400: {wire.CodeInsufficientBalance, wire.CodeUSDxWholeUnits},
				403: {wire.CodeComplianceRefused, wire.CodeFeatureUnavailable}, 409: {wire.CodeUSDxDust}, 503: {wire.CodeTokenRailUnavail}},
			Handler: s.usdxWithdraw},
		{Method: http.MethodGet, Path: "/v1/usdx/freezes", Summary: "The freeze log, newest first, and the frozen addresses",
			Budget: "read", Responses: map[int]any{200: usdx.FreezesView{}}, Handler: s.usdxFreezes},
		{Method: http.MethodGet, Path: "/v1/usdx/activity", Summary: "The account's USDx events, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: usdx.ActivityPage{}, 400: wire.ErrorBody{}}, Handler: s.usdxActivity},
	}
}

// parseWholeUnits reads a USDx or sUSDx amount: a decimal string, whole
// units only (a fraction that is not all zeros is usdx_whole_units).
func parseWholeUnits(c *gin.Context, field, v string) (int64, bool) {
	intPart, frac, hasFrac := strings.Cut(v, ".")
	if intPart == "" || (hasFrac && frac == "") || strings.TrimLeft(intPart, "0123456789") != "" ||
		strings.TrimLeft(frac, "0123456789") != "" {
		invalid(c, "field body."+field+": must be a decimal string of whole units")
		return 0, false
	}
	if strings.Trim(frac, "0") != "" {
		fail(c, http.StatusBadRequest, wire.CodeUSDxWholeUnits, "field body."+field+": whole units only on this deployment")
		return 0, false
	}
	n, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil || n > 1<<50 {
		invalid(c, "field body."+field+": too large")
		return 0, false
	}
	return n, true
}

func (s *Server) usdxState(c *gin.Context) {
	var v usdx.PublicView
	now := s.Node.LogNowMs()
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.USDx.Public(fsm.USDxReadEnv(st, now)) })
	c.JSON(http.StatusOK, v)
}

func (s *Server) usdxQuote(c *gin.Context) {
	var req USDxQuoteRequest
	if !s.decode(c, &req) {
		return
	}
	n, ok := parseWholeUnits(c, "usdx", req.Usdx)
	if !ok {
		return
	}
	res, ok := s.submit(c, fsm.CmdUSDxQuote, fsm.USDxQuotePayload{QuoteID: "uq_" + randomID(12), Side: req.Side, Usdx: n}, req)
	if ok {
		respond(c, res)
	}
}

func (s *Server) usdxMint(c *gin.Context) {
	var req USDxMintRequest
	if !s.decode(c, &req) {
		return
	}
	if key, _ := idemKeyOf(c); key != req.QuoteID {
		invalid(c, "the idempotency-key of a mint is its quote id")
		return
	}
	res, ok := s.submit(c, fsm.CmdUSDxMint, fsm.USDxMintPayload{QuoteID: req.QuoteID, FreshQuoteID: "uq_" + randomID(12)}, req)
	if ok {
		respond(c, res)
	}
}

// usdxRedeem takes an optional idempotency-key: when given, the saga's id
// is derived from it (accountScopedID) and a retry is safe; without one
// the saga gets a fresh id.
func (s *Server) usdxRedeem(c *gin.Context) {
	var req USDxAmountRequest
	if !s.decode(c, &req) {
		return
	}
	n, ok := parseWholeUnits(c, "usdx", req.Usdx)
	if !ok {
		return
	}
	acct := callerOf(c).AccountID
	id := "urd_" + randomID(12)
	key, keyed := idemKeyOf(c)
	if keyed {
		id = accountScopedID("urd_", acct, key)
	}
	cmd, err := s.command(c, fsm.CmdUSDxRedeem, fsm.USDxAmountPayload{ID: id, Amount: n}, req)
	if err != nil {
		unavailable(c, err.Error())
		return
	}
	if keyed {
		// Its own namespace, as before optional keys were checked in
		// general: a retry across an upgrade still finds its answer.
		cmd.IdemKey = "acct:" + acct + ":" + usdxRedeemIdemNS + key
	}
	res, ok := s.propose(c, cmd)
	if ok {
		respond(c, res)
	}
}

// keyedID is the id a stake or unstake sent with an idempotency key
// carries (accountScopedID), "" without one: from
// usdx.LevelKeyedStakesOnce the state machine makes one per id, so a
// retry the bounded idempotency store forgot is not applied twice.
func (s *Server) keyedID(c *gin.Context, prefix string) string {
	key, keyed := idemKeyOf(c)
	if !keyed {
		return ""
	}
	return accountScopedID(prefix, callerOf(c).AccountID, key)
}

func (s *Server) usdxStake(c *gin.Context) {
	var req USDxAmountRequest
	if !s.decode(c, &req) {
		return
	}
	n, ok := parseWholeUnits(c, "usdx", req.Usdx)
	if !ok {
		return
	}
	res, ok := s.submit(c, fsm.CmdUSDxStake, fsm.USDxAmountPayload{ID: s.keyedID(c, "ustk_"), Amount: n}, req)
	if ok {
		respond(c, res)
	}
}

func (s *Server) usdxUnstake(c *gin.Context) {
	var req USDxUnstakeRequest
	if !s.decode(c, &req) {
		return
	}
	n, ok := parseWholeUnits(c, "susdx", req.Susdx)
	if !ok {
		return
	}
	res, ok := s.submit(c, fsm.CmdUSDxUnstake, fsm.USDxAmountPayload{ID: s.keyedID(c, "uus_"), Amount: n}, req)
	if ok {
		respond(c, res)
	}
}

func (s *Server) usdxUnstakes(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v usdx.UnstakesView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.USDx.Unstakes(acct) })
	c.JSON(http.StatusOK, v)
}

func (s *Server) usdxHistory(c *gin.Context) {
	var q USDxHistoryQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return
	}
	limit, before := PageLimitDefault, int64(0)
	if q.Limit != nil {
		limit = int(*q.Limit)
	}
	if q.BeforeTsMs != nil {
		before = int64(*q.BeforeTsMs)
	}
	var page usdx.HistoryPage
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { page = st.USDx.HistoryPage(before, limit) })
	c.JSON(http.StatusOK, page)
}

func tokenRailUnavailable(c *gin.Context) {
	fail(c, http.StatusServiceUnavailable, wire.CodeTokenRailUnavail, "no USDx token rail is wired on this deployment")
}

func (s *Server) usdxDepositAddress(c *gin.Context) {
	if s.TokenRail == nil {
		tokenRailUnavailable(c)
		return
	}
	a, err := s.TokenRail.DepositAddress(c.Request.Context(), callerOf(c).AccountID)
	if err != nil {
		tokenRailUnavailable(c)
		return
	}
	v := DepositAddressView{Address: a.Address, AccountNumber: wire.Int(a.AccountNumber)}
	if id := s.TokenRail.TokenIdentifier(); id != "" {
		v.TokenIdentifier = &id
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) usdxWithdrawals(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v usdx.WithdrawalsView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.USDx.WithdrawalsOf(acct) })
	c.JSON(http.StatusOK, v)
}

func (s *Server) usdxWithdraw(c *gin.Context) {
	if s.TokenRail == nil {
		tokenRailUnavailable(c)
		return
	}
	var req USDxWithdrawRequest
	if !s.decode(c, &req) {
		return
	}
	n, ok := parseWholeUnits(c, "usdx", req.Usdx)
	if !ok {
		return
	}
	key, _ := idemKeyOf(c)
	id := accountScopedID("uwd_", callerOf(c).AccountID, key)
	res, ok := s.submit(c, fsm.CmdUSDxWithdraw, fsm.USDxWithdrawPayload{ID: id, Usdx: n, SparkAddress: req.SparkAddress}, req)
	if ok {
		respond(c, res)
	}
}

func (s *Server) usdxFreezes(c *gin.Context) {
	var v usdx.FreezesView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.USDx.FreezeLog() })
	c.JSON(http.StatusOK, v)
}

func (s *Server) usdxActivity(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.USDx.ActivityOf(acct, before, limit)
	})
}

// accountScopedID is the id of a record the venue keeps under a client's
// idempotency key (a USDx withdrawal, a keyed redemption). A key belongs
// to its account, so the id is derived from both: a retry finds the same
// record, the same key from another account names another record (and
// learns nothing of the first), and the id is unique across the venue, as
// the custody rail, idempotent by withdrawal id, needs. 128 bits of
// SHA-256 over prefix, account and key.
func accountScopedID(prefix, accountID, key string) string {
	h := sha256.New()
	for _, part := range []string{prefix, accountID, key} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return prefix + hex.EncodeToString(h.Sum(nil)[:16])
}
