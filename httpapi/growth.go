package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/sharecard"
)

// Referral programme and leaderboards (SPEC sections 2 and 4). The state
// machine (fsm/growth) decides every rule; these handlers decode, draw a
// code when the client gave none, and render reads from this node's
// state.

func init() { routeSets = append(routeSets, (*Server).growthRoutes) }

// ReferralCodeRequest is the body of POST /v1/referral/code.
type ReferralCodeRequest struct {
	Code *string `json:"code" maxLen:"16" doc:"4 to 16 letters A-Z and digits 0-9, case-insensitive (stored upper case); absent: the venue draws an 8-character code"`
}

// ReferralBindRequest is the body of POST /v1/referral/bind.
type ReferralBindRequest struct {
	Code string `json:"code" req:"true" maxLen:"16"`
}

// LeaderboardQuery is the query of GET /v1/leaderboard.
type LeaderboardQuery struct {
	Board  *string   `json:"board" enum:"pnl,roi" doc:"default pnl"`
	Window *string   `json:"window" enum:"7d,30d,all" doc:"default 7d"`
	Limit  *wire.Int `json:"limit" unit:"int" min:"1" max:"100" doc:"default 50, at most 100"`
}

// LeaderboardSettingsRequest is the body of POST /v1/leaderboard/settings.
type LeaderboardSettingsRequest struct {
	OptedOut    *bool   `json:"optedOut" doc:"true: off every board and the profile answers 404 at once; false: back at the next recompute"`
	DisplayName *string `json:"displayName" nullable:"true" maxLen:"128" doc:"1 to 32 characters: letters, digits, spaces and . _ - ' (no leading, trailing or double space); null clears it"`
}

// PromoterChannel is one channel of a promoter application.
type PromoterChannel struct {
	Kind     string `json:"kind" req:"true" enum:"website,x,youtube,telegram,discord,newsletter,podcast,other"`
	URL      string `json:"url" req:"true" maxLen:"200" doc:"http(s) URL"`
	Audience string `json:"audience" req:"true" maxLen:"64" doc:"who it reaches, e.g. 12k subscribers"`
}

// PromoterApplyRequest is the body of POST /v1/promoter/apply.
type PromoterApplyRequest struct {
	DisplayName          string            `json:"displayName" req:"true" maxLen:"128" doc:"as a leaderboard display name: 1 to 32 characters"`
	Channels             []PromoterChannel `json:"channels" req:"true" maxLen:"10"`
	Plan                 string            `json:"plan" req:"true" maxLen:"4000" doc:"how the programme will be promoted, 1 to 1000 characters"`
	Jurisdictions        []string          `json:"jurisdictions" req:"true" maxLen:"50" doc:"ISO 3166-1 alpha-2 codes, upper case"`
	AcceptedTermsVersion string            `json:"acceptedTermsVersion" req:"true" maxLen:"32" doc:"must be the current terms version (2026-11)"`
}

// PromoterCodeRequest is the body of POST /v1/promoter/codes.
type PromoterCodeRequest struct {
	Code       string   `json:"code" req:"true" maxLen:"16" doc:"4 to 16 letters A-Z and digits 0-9; one namespace with referral codes"`
	Label      string   `json:"label" req:"true" maxLen:"64"`
	KickbackQ9 wire.Int `json:"kickbackQ9" req:"true" unit:"q9" min:"0" max:"1000000000" doc:"share of the net fee paid back to each referee out of the promoter share; at most maxKickbackQ9 (GET /v1/promoter)"`
}

// PromoterStatsQuery is the query of GET /v1/promoter/stats.
type PromoterStatsQuery struct {
	Days *wire.Int `json:"days" unit:"int" min:"1" max:"90" doc:"UTC days up to today, default 30"`
}

// Leaderboard limits.
const (
	LeaderboardLimitDefault = 50
	LeaderboardLimitMax     = growth.BoardRowsMax
)

func (s *Server) growthRoutes() []*Route {
	refusals := func(ok int, body any, codes ...int) map[int]any {
		m := map[int]any{ok: body}
		for _, c := range codes {
			m[c] = wire.ErrorBody{}
		}
		return m
	}
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/referral", Summary: "Referral status: programme, policy, eligibility, own code, referrer, stats, bind window",
			Auth: Keyed, Scope: "trade", Budget: "read", Responses: map[int]any{200: growth.StatusView{}}, Handler: s.referralStatus},
		{Method: http.MethodPost, Path: "/v1/referral/code", Summary: "Create the account's referral code (custom or drawn)",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: ReferralCodeRequest{},
			Responses: refusals(201, growth.CodeResult{}, 400, 403, 409), Refuses: map[int][]string{403: {wire.CodeReferralForbidden}}, Handler: s.referralCode},
		{Method: http.MethodPost, Path: "/v1/referral/bind", Summary: "Bind a referral code, within the bind window after signup",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: ReferralBindRequest{},
			Responses: refusals(200, growth.BindResult{}, 400, 403, 404, 409), Refuses: map[int][]string{403: {wire.CodeReferralForbidden}}, Handler: s.referralBind},
		{Method: http.MethodGet, Path: "/v1/referral/earnings", Summary: "Referral earnings, newest first",
			Auth: Keyed, Scope: "trade", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: growth.EarningsPage{}}, Handler: s.referralEarnings},
		{Method: http.MethodGet, Path: "/v1/referral/referees", Summary: "How many accounts bound the code, and the page of them (never their ids)",
			Auth: Keyed, Scope: "trade", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: growth.RefereesResult{}}, Handler: s.referralReferees},
		{Method: http.MethodPost, Path: "/v1/referral/claim", Summary: "Claim every vested referral reward to the free balance",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: Empty{},
			Responses: refusals(201, growth.ClaimResult{}, 404, 409), Handler: s.referralClaim},

		{Method: http.MethodPost, Path: "/v1/promoter/apply", Summary: "Apply to the promoter programme (testnet approves at once)",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: PromoterApplyRequest{},
			Responses: refusals(201, growth.ApplyResult{}, 400, 409), Handler: s.promoterApply},
		{Method: http.MethodGet, Path: "/v1/promoter", Summary: "The promoter profile, terms and totals; 404 before applying",
			Auth: Keyed, Scope: "trade", Budget: "read", Responses: refusals(200, growth.PromoterView{}, 404), Handler: s.promoterProfile},
		{Method: http.MethodPost, Path: "/v1/promoter/codes", Summary: "Create a promoter code with a bounded kickback",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: PromoterCodeRequest{},
			Responses: refusals(201, growth.PromoterCodeView{}, 400, 403, 404, 409), Refuses: map[int][]string{403: {wire.CodeReferralForbidden}}, Handler: s.promoterCode},
		{Method: http.MethodGet, Path: "/v1/promoter/codes", Summary: "The promoter's codes",
			Auth: Keyed, Scope: "trade", Budget: "read", Responses: map[int]any{200: growth.PromoterCodes{}}, Handler: s.promoterCodes},
		{Method: http.MethodGet, Path: "/v1/promoter/stats", Summary: "The promoter's results by UTC day",
			Auth: Keyed, Scope: "trade", Budget: "read", Query: PromoterStatsQuery{},
			Responses: map[int]any{200: growth.PromoterStats{}}, Handler: s.promoterStats},
		{Method: http.MethodGet, Path: "/v1/promoter/earnings", Summary: "Promoter earnings, newest first (the referral shape)",
			Auth: Keyed, Scope: "trade", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: growth.EarningsPage{}}, Handler: s.promoterEarnings},
		{Method: http.MethodPost, Path: "/v1/promoter/claim", Summary: "Claim every vested promoter reward to the free balance",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: Empty{},
			Responses: refusals(201, growth.ClaimResult{}, 404, 409), Handler: s.promoterClaim},

		{Method: http.MethodGet, Path: "/v1/leaderboard", Summary: "A leaderboard as of its last recompute",
			Budget: "read", Query: LeaderboardQuery{}, Responses: map[int]any{200: growth.BoardView{}}, Handler: s.leaderboard},
		{Method: http.MethodGet, Path: "/v1/leaderboard/me", Summary: "The caller's handle, placements and eligibility per window",
			Auth: Keyed, Budget: "read", Responses: map[int]any{200: growth.OwnView{}}, Handler: s.leaderboardMe},
		{Method: http.MethodGet, Path: "/v1/leaderboard/trader/:handle", Summary: "A trader's public profile; 404 for unknown and opted-out handles alike",
			Budget: "read", Responses: map[int]any{200: growth.ProfileView{}, 404: wire.ErrorBody{}}, Handler: s.leaderboardProfile},
		{Method: http.MethodGet, Path: "/v1/leaderboard/trader/:handle/og.png", Summary: "A trader's 1200x630 PNG share card; ETag tied to the recompute stamp, 304 on If-None-Match; 404 as the profile",
			Budget: "read", Content: "image/png", Responses: map[int]any{200: []byte{}, 304: nil, 404: wire.ErrorBody{}},
			Notes: map[int]string{429: cardRender429}, Handler: s.leaderboardCard},
		{Method: http.MethodPost, Path: "/v1/leaderboard/settings", Summary: "Opt out or back in, set or clear the display name",
			Auth: Keyed, Budget: "read", Idem: true, Request: LeaderboardSettingsRequest{},
			Responses: refusals(200, growth.OwnView{}, 400), Handler: s.leaderboardSettings},
	}
}

// codeAlphabet draws codes: upper-case letters and digits without the
// look-alikes 0/O and 1/I/L.
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

func drawCode() string {
	b := make([]byte, 8)
	for {
		if _, err := rand.Read(b); err != nil {
			panic(err)
		}
		for i := range b {
			b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
		}
		if growth.CheckCodeImpersonation(string(b)) == nil {
			return string(b)
		}
	}
}

func (s *Server) growthEnvOf(st *fsm.State) *growth.Env {
	return &growth.Env{NowMs: st.NowMs, Ledger: st.Ledger, Host: fsm.ReadHost{St: st}}
}

func (s *Server) testnet() bool { return s.Node.Config().Deployment != "prod" }

func (s *Server) referralStatus(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v growth.StatusView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.Growth.Status(s.growthEnvOf(st), acct, st.Growth.Volume) })
	c.JSON(http.StatusOK, v)
}

// referralCode creates the code. A drawn code is drawn here (the state
// machine draws nothing) and is part of the command, so a retry under the
// same idempotency key answers the code drawn first.
func (s *Server) referralCode(c *gin.Context) {
	var req ReferralCodeRequest
	if !s.decode(c, &req) {
		return
	}
	p := fsm.ReferralCodePayload{}
	if req.Code != nil {
		code, ref := growth.NormalizeCode(*req.Code)
		if ref == nil {
			ref = growth.CheckCodeImpersonation(code)
		}
		if ref != nil {
			invalid(c, ref.Msg)
			return
		}
		p.Code = code
	} else {
		p.Code = drawCode()
	}
	res, ok := s.submit(c, fsm.CmdReferralCode, p, req)
	if !ok {
		return
	}
	respond(c, res)
}

func (s *Server) referralBind(c *gin.Context) {
	var req ReferralBindRequest
	if !s.decode(c, &req) {
		return
	}
	res, ok := s.submit(c, fsm.CmdReferralBind, fsm.ReferralBindPayload{Code: req.Code}, req)
	if !ok {
		return
	}
	respond(c, res)
}

func (s *Server) referralEarnings(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.Growth.Earnings(acct, before, limit)
	})
}

func (s *Server) referralReferees(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.Growth.RefereesPage(acct, st.NowMs, before, limit)
	})
}

func (s *Server) referralClaim(c *gin.Context) {
	var req Empty
	if !s.decode(c, &req) {
		return
	}
	res, ok := s.submit(c, fsm.CmdReferralClaim, nil, req)
	if !ok {
		return
	}
	respond(c, res)
}

func (s *Server) leaderboard(c *gin.Context) {
	var q LeaderboardQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return
	}
	bi, wi, limit := 0, 0, LeaderboardLimitDefault
	if q.Board != nil && *q.Board == "roi" {
		bi = 1
	}
	if q.Window != nil {
		for i, w := range growth.WindowNames {
			if w == *q.Window {
				wi = i
			}
		}
	}
	if q.Limit != nil {
		limit = int(*q.Limit)
	}
	var v growth.BoardView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.Growth.BoardOf(bi, wi, limit, s.testnet()) })
	c.JSON(http.StatusOK, v)
}

func (s *Server) leaderboardMe(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v growth.OwnView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		v = st.Growth.Own(acct, st.NowMs, fsm.AccountEquityMsat(st, acct))
	})
	c.JSON(http.StatusOK, v)
}

// profileNotFound is the one answer for an unknown and an opted-out
// handle: the same status, body and headers, after the same lookup.
func profileNotFound(c *gin.Context) { notFound(c, "trader") }

func (s *Server) leaderboardProfile(c *gin.Context) {
	handle := c.Param("handle")
	var v growth.ProfileView
	var ok bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v, ok = st.Growth.Profile(handle, s.testnet()) })
	if !ok {
		profileNotFound(c)
		return
	}
	c.JSON(http.StatusOK, v)
}

// leaderboardSettings reads the body itself as well, because null and
// absent differ for displayName (null clears it).
func (s *Server) leaderboardSettings(c *gin.Context) {
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			fail(c, http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge, "request body too large")
			return
		}
		invalid(c, "cannot read body")
		return
	}
	var req LeaderboardSettingsRequest
	if err := decodeJSON(raw, &req); err != nil {
		invalid(c, err.Error())
		return
	}
	p := growth.SettingsRequest{OptedOut: req.OptedOut, DisplayName: req.DisplayName}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if v, present := fields["displayName"]; present && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			p.ClearName = true
		}
	}
	if p.DisplayName != nil {
		if ref := growth.ValidateDisplayName(*p.DisplayName); ref != nil {
			invalid(c, ref.Msg)
			return
		}
		var own string
		acct := callerOf(c).AccountID
		s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
			if st.Growth != nil && st.Growth.Board != nil {
				if t := st.Growth.Board.Traders[acct]; t != nil {
					own = t.Handle
				}
			}
		})
		if ref := growth.CheckDisplayNameImpersonation(*p.DisplayName, own); ref != nil {
			invalid(c, ref.Msg)
			return
		}
	}
	// The request hash covers p, in which null and absent differ.
	res, ok := s.submit(c, fsm.CmdLeaderboardSettings, p, p)
	if !ok {
		return
	}
	respond(c, res)
}

// cardCache keeps rendered share cards by handle, each with the ETag it
// was rendered for; a new recompute stamp or settings revision renders
// again. Bounded: at cardCacheMax entries it starts over. Rendering is
// serialised (one card at a time per node), and only ever for a handle
// that exists and is opted in.
type cardCache struct {
	mu    sync.Mutex
	cards map[string]cachedCard
}

type cachedCard struct {
	etag string
	png  []byte
}

const cardCacheMax = 512

// The render budget: a card that is not cached (a new handle, a new
// recompute stamp or settings revision, or more handles than the cache
// keeps) costs about 50 ms of CPU and 13 MB of allocations, 500 times a
// plain read, so renders draw a budget of their own besides the read
// budget: CardRendersPerMin per client address (burst CardRendersBurst)
// and CardRendersNodePerMin on the node (burst CardRendersNodeBurst),
// both or neither. At most 5 renders a second take a quarter of a core;
// a crawler fetching one shared card renders once. Cached cards and 304s
// draw nothing. Not scaled by the bench profile (no load test renders).
const (
	CardRendersPerMin     = 30
	CardRendersBurst      = 5
	CardRendersNodePerMin = 300
	CardRendersNodeBurst  = 20
)

var cardRenderBudget = Budget{Name: "card render", PerKeyPerMin: CardRendersPerMin, KeyBurst: CardRendersBurst,
	PerAccountPerMin: CardRendersNodePerMin, AccountBurst: CardRendersNodeBurst}

// cardRender429 describes the render budget's refusal on the card route.
var cardRender429 = fmt.Sprintf("Also when a card that is not cached would be rendered past the render budget: %d a minute per "+
	"client address (burst %d) and %d a minute per node (burst %d); cached cards and 304 answers draw nothing. "+
	"The X-RateLimit-* headers then describe the render budget.", CardRendersPerMin, CardRendersBurst, CardRendersNodePerMin, CardRendersNodeBurst)

// cardRenderNode names the node-wide render bucket (drawn as the
// budget's account bucket, apart from every real account's).
const cardRenderNode = "node:card-renders"

var cards = &cardCache{cards: map[string]cachedCard{}}

// cardETag ties a card to the recompute stamp and the trader's settings
// revision (a new display name or an opt-in renders anew).
func cardETag(d growth.CardData) string {
	// The recompute stamp and the settings revision, and a digest of what
	// the card shows: another trader's opt-out moves this one's ranks up
	// between recomputes without touching either (review of 2026-11-26:
	// the old tag kept serving, and revalidating, the stale ranks).
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %d %d", d.Handle, d.DisplayName, d.TradingSince, d.PnlMsat, d.RoiQ9)
	for _, p := range d.Placements {
		fmt.Fprintf(h, " %s/%s/%d", p.Board, p.Window, p.Rank)
	}
	for _, v := range d.Curve {
		fmt.Fprintf(h, " %d", v)
	}
	return `"og-` + strconv.FormatInt(d.ComputedTsMs, 10) + "-" + strconv.FormatInt(d.Rev, 10) + "-" + hex.EncodeToString(h.Sum(nil)[:8]) + `"`
}

// etagMatches implements If-None-Match: a list of tags, or *.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func (s *Server) leaderboardCard(c *gin.Context) {
	handle := c.Param("handle")
	var d growth.CardData
	var ok bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { d, ok = st.Growth.Card(handle) })
	if !ok {
		profileNotFound(c)
		return
	}
	etag := cardETag(d)
	// Only the card's answers (200, 304) carry its validator and cache
	// permission: a shared cache that stored a refusal (429, 503) under
	// the card's ETag would serve it after every 304.
	validators := func() {
		c.Header("ETag", etag)
		// no-cache: a cache keeps the card but asks (a cheap 304) before
		// each use, so an opt-out answers 404 at once (max-age=60 showed
		// the card for a minute after it; review of 2026-11-27).
		c.Header("Cache-Control", "public, no-cache")
	}
	if inm := c.GetHeader("If-None-Match"); inm != "" && etagMatches(inm, etag) {
		validators()
		c.Status(http.StatusNotModified)
		return
	}
	cards.mu.Lock()
	defer cards.mu.Unlock()
	if hit, ok := cards.cards[d.Handle]; ok && hit.etag == etag {
		validators()
		c.Data(http.StatusOK, "image/png", hit.png)
		return
	}
	if !s.rateAnswer(c, cardRenderBudget.Name, s.meter.take(cardRenderBudget, addressSubject(c), cardRenderNode, time.Now())) {
		return
	}
	card := sharecard.Card{Handle: d.Handle, DisplayName: d.DisplayName, TradingSince: d.TradingSince, Window: "30D",
		PnlMsat: d.PnlMsat, RoiQ9: d.RoiQ9, Curve: d.Curve, Testnet: s.testnet(), ComputedTsMs: d.ComputedTsMs}
	for _, p := range d.Placements {
		card.Placements = append(card.Placements, sharecard.Placement{Board: p.Board, Window: p.Window, Rank: int64(p.Rank)})
	}
	png, err := sharecard.Render(card)
	if err != nil {
		unavailable(c, "share card: "+err.Error())
		return
	}
	if len(cards.cards) >= cardCacheMax {
		cards.cards = map[string]cachedCard{}
	}
	cards.cards[d.Handle] = cachedCard{etag: etag, png: png}
	validators()
	c.Data(http.StatusOK, "image/png", png)
}

func (s *Server) promoterApply(c *gin.Context) {
	var req PromoterApplyRequest
	if !s.decode(c, &req) {
		return
	}
	a := growth.Application{DisplayName: req.DisplayName, Plan: req.Plan, Jurisdictions: req.Jurisdictions,
		AcceptedTermsVersion: req.AcceptedTermsVersion}
	for _, ch := range req.Channels {
		a.Channels = append(a.Channels, growth.Channel{Kind: ch.Kind, URL: ch.URL, Audience: ch.Audience})
	}
	if ref := growth.ValidateApplication(a); ref != nil {
		invalid(c, ref.Msg)
		return
	}
	if ref := growth.CheckDisplayNameImpersonation(a.DisplayName, ""); ref != nil {
		invalid(c, ref.Msg)
		return
	}
	res, ok := s.submit(c, fsm.CmdPromoterApply, a, req)
	if !ok {
		return
	}
	respond(c, res)
}

func (s *Server) promoterProfile(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v growth.PromoterView
	var ok bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v, ok = st.Growth.PromoterOf(acct) })
	if !ok {
		notFound(c, "promoter")
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) promoterCode(c *gin.Context) {
	var req PromoterCodeRequest
	if !s.decode(c, &req) {
		return
	}
	if norm, ref := growth.NormalizeCode(req.Code); ref == nil {
		if ref := growth.CheckCodeImpersonation(norm); ref != nil {
			invalid(c, ref.Msg)
			return
		}
	}
	res, ok := s.submit(c, fsm.CmdPromoterCode, growth.NewPromoterCode{Code: req.Code, Label: req.Label, KickbackQ9: int64(req.KickbackQ9)}, req)
	if !ok {
		return
	}
	respond(c, res)
}

func (s *Server) promoterCodes(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v growth.PromoterCodes
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.Growth.CodesOf(acct) })
	c.JSON(http.StatusOK, v)
}

func (s *Server) promoterStats(c *gin.Context) {
	var q PromoterStatsQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return
	}
	days := 30
	if q.Days != nil {
		days = int(*q.Days)
	}
	acct := callerOf(c).AccountID
	var v growth.PromoterStats
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.Growth.StatsOf(acct, st.NowMs, days) })
	c.JSON(http.StatusOK, v)
}

func (s *Server) promoterEarnings(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.Growth.PromoterEarnings(acct, before, limit)
	})
}

func (s *Server) promoterClaim(c *gin.Context) {
	var req Empty
	if !s.decode(c, &req) {
		return
	}
	res, ok := s.submit(c, fsm.CmdPromoterClaim, nil, req)
	if !ok {
		return
	}
	respond(c, res)
}
