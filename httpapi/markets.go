package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

func init() { routeSets = append(routeSets, (*Server).marketRoutes) }

// FundingEntryView is one funding boundary (SPEC section 2).
type FundingEntryView struct {
	TsMs   wire.Int `json:"tsMs" unit:"ms"`
	RateQ9 wire.Int `json:"rateQ9" unit:"q9"`
	SkewQ9 wire.Int `json:"skewQ9" unit:"q9"`
}

// Stats24hView is the 24h stats resource. hiQ8 and loQ8 are null while no
// print falls in the window.
type Stats24hView struct {
	MarketID        string    `json:"marketId"`
	WindowMs        wire.Int  `json:"windowMs" unit:"ms"`
	Basis           string    `json:"basis" doc:"how the window is computed: rolling_1m_bars is the 1440 minute bars ending with the current minute"`
	Fills           int64     `json:"fills"`
	VolumeContracts wire.Int  `json:"volumeContracts" unit:"contracts"`
	HiQ8            *wire.Int `json:"hiQ8" unit:"q8"`
	LoQ8            *wire.Int `json:"loQ8" unit:"q8"`
	Truncated       bool      `json:"truncated" doc:"true when the window starts before the market's first print"`
}

// CandleView is one candle. seeded and volumeContracts are present only
// when they apply (SPEC section 2).
type CandleView struct {
	TsMs            wire.Int  `json:"tsMs" unit:"ms"`
	OQ8             wire.Int  `json:"oQ8" unit:"q8"`
	HQ8             wire.Int  `json:"hQ8" unit:"q8"`
	LQ8             wire.Int  `json:"lQ8" unit:"q8"`
	CQ8             wire.Int  `json:"cQ8" unit:"q8"`
	Prints          int64     `json:"prints"`
	Seeded          bool      `json:"seeded,omitempty" doc:"present and true on pre-launch index-history bars (daily only, prints 0)"`
	VolumeContracts *wire.Int `json:"volumeContracts,omitempty" unit:"contracts" doc:"fills-derived volume over exactly the bar; absent when the deployment cannot tell"`
}

// CandlesView is the candles result; interval is a JSON number (SPEC
// section 1).
type CandlesView struct {
	Interval int64        `json:"interval" doc:"bar length in seconds: 60, 3600 or 86400"`
	Candles  []CandleView `json:"candles"`
}

// CandlesQuery is the query of the candles route. interval travels as the
// text of a query parameter, so it is described as a string enum.
type CandlesQuery struct {
	Interval *string   `json:"interval" enum:"60,3600,86400" doc:"bar length in seconds (default 60)"`
	Limit    *wire.Int `json:"limit" unit:"int" min:"1" max:"1440" doc:"how many bars, newest last (default 96, at most 1440)"`
}

// TickerEntryView is one market of the ticker. stalenessMs is the market's
// oracleStalenessMs: a client shows last as stale once it is older.
type TickerEntryView struct {
	MarketID    string             `json:"marketId"`
	Last        *fsm.LastPriceView `json:"last"`
	StalenessMs wire.Int           `json:"stalenessMs" unit:"ms"`
	PriceSource string             `json:"priceSource" enum:"oracle,pinned,scripted" doc:"what drives the market's feed: oracle (the live oracle), pinned (an operator holds the price), scripted (an operator's script, also after its last point: the price holds until the operator lifts it)"`
}

// TickerView is the Ticker resource.
type TickerView struct {
	AsOfMs  wire.Int          `json:"asOfMs" unit:"ms"`
	Tickers []TickerEntryView `json:"tickers"`
}

func (s *Server) marketRoutes() []*Route {
	tc := &tickerCache{}
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/markets", Summary: "Every market with its parameters and live figures",
			Budget: "read", Responses: map[int]any{200: []fsm.MarketView{}}, Handler: s.listMarkets},
		{Method: http.MethodGet, Path: "/v1/markets/:id", Summary: "One market",
			Budget: "read", Responses: map[int]any{200: fsm.MarketView{}, 404: wire.ErrorBody{}}, Handler: s.oneMarket},
		{Method: http.MethodGet, Path: "/v1/markets/:id/funding", Summary: "The market's last 100 funding boundaries, oldest first",
			Budget: "read", Responses: map[int]any{200: []FundingEntryView{}, 404: wire.ErrorBody{}}, Handler: s.marketFunding},
		{Method: http.MethodGet, Path: "/v1/markets/:id/stats24h", Summary: "Rolling 24-hour statistics of the market",
			Budget: "read", Responses: map[int]any{200: Stats24hView{}, 404: wire.ErrorBody{}}, Handler: s.marketStats24h},
		{Method: http.MethodGet, Path: "/v1/markets/:id/candles", Summary: "Candles of the market's oracle price, oldest first",
			Budget: "read", Query: CandlesQuery{},
			Responses: map[int]any{200: CandlesView{}, 400: wire.ErrorBody{}, 404: wire.ErrorBody{}}, Handler: s.marketCandles},
		{Method: http.MethodGet, Path: "/v1/public/ticker", Summary: "Last price of every market, from a cache at most half a second old",
			Budget: "read", Responses: map[int]any{200: TickerView{}}, Handler: tc.serve(s)},
	}
}

// readMarket runs fn with the market book and the state's time, answering
// 404 itself when fn reports an unknown market.
func (s *Server) readMarket(c *gin.Context, fn func(b *market.State, nowMs int64) error) bool {
	var err error
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { err = fn(st.Market, st.NowMs) })
	if errors.Is(err, market.ErrUnknownMarket) {
		notFound(c, "market "+c.Param("id"))
		return false
	}
	if err != nil {
		invalid(c, err.Error())
		return false
	}
	return true
}

func (s *Server) listMarkets(c *gin.Context) {
	var out []fsm.MarketView
	s.readMarket(c, func(b *market.State, _ int64) error {
		views := b.Markets()
		out = make([]fsm.MarketView, len(views))
		for i, v := range views {
			out[i] = fsm.NewMarketView(v)
		}
		return nil
	})
	c.JSON(http.StatusOK, out)
}

func (s *Server) oneMarket(c *gin.Context) {
	var out fsm.MarketView
	if s.readMarket(c, func(b *market.State, _ int64) error {
		v, err := b.Market(c.Param("id"))
		out = fsm.NewMarketView(v)
		return err
	}) {
		c.JSON(http.StatusOK, out)
	}
}

func (s *Server) marketFunding(c *gin.Context) {
	var out []FundingEntryView
	if s.readMarket(c, func(b *market.State, _ int64) error {
		entries, err := b.Funding(c.Param("id"))
		out = make([]FundingEntryView, len(entries))
		for i, e := range entries {
			out[i] = FundingEntryView{TsMs: wire.Int(e.TsMs), RateQ9: wire.Int(e.RateQ9), SkewQ9: wire.Int(e.SkewQ9)}
		}
		return err
	}) {
		c.JSON(http.StatusOK, out)
	}
}

// marketStats24h answers at the state's time, so every replica at the same
// applied index answers the same figures.
func (s *Server) marketStats24h(c *gin.Context) {
	var st market.Stats24h
	if !s.readMarket(c, func(b *market.State, nowMs int64) error {
		var err error
		st, err = b.Stats24h(c.Param("id"), nowMs)
		return err
	}) {
		return
	}
	out := Stats24hView{MarketID: st.MarketID, WindowMs: wire.Int(st.WindowMs), Basis: st.Basis, Fills: st.Fills,
		VolumeContracts: wire.Int(st.VolumeContracts), Truncated: st.Truncated}
	if st.HiQ8 != nil {
		out.HiQ8, out.LoQ8 = wire.Ptr(*st.HiQ8), wire.Ptr(*st.LoQ8)
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) marketCandles(c *gin.Context) {
	var q CandlesQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return
	}
	interval := market.Interval1m
	if q.Interval != nil {
		interval, _ = strconv.ParseInt(*q.Interval, 10, 64) // one of the enum's values
	}
	limit := market.CandleLimitDefault
	if q.Limit != nil {
		limit = int(*q.Limit)
	}
	var bars []market.Candle
	if !s.readMarket(c, func(b *market.State, nowMs int64) error {
		var err error
		bars, err = b.Candles(c.Param("id"), interval, limit, nowMs)
		return err
	}) {
		return
	}
	out := CandlesView{Interval: interval, Candles: make([]CandleView, len(bars))}
	for i, b := range bars {
		v := CandleView{TsMs: wire.Int(b.TsMs), OQ8: wire.Int(b.OQ8), HQ8: wire.Int(b.HQ8), LQ8: wire.Int(b.LQ8),
			CQ8: wire.Int(b.CQ8), Prints: b.Prints, Seeded: b.Seeded}
		if b.VolumeContracts != nil {
			v.VolumeContracts = wire.Ptr(*b.VolumeContracts)
		}
		out.Candles[i] = v
	}
	c.JSON(http.StatusOK, out)
}

// tickerCacheTTL is how long one node reuses a rendered ticker. Prints
// arrive about once a second, so half a second adds at most that much lag,
// while a crowd of pollers costs one render per half second, not one per
// request. asOfMs says which state time the body reflects.
const tickerCacheTTL = 500 * time.Millisecond

// tickerCache holds one node's last rendered ticker.
type tickerCache struct {
	mu    sync.Mutex
	body  []byte
	index uint64
	built time.Time
}

// serve answers from the cache unless it is older than tickerCacheTTL or
// than what the request asks for: an X-Min-Index above the cached index or
// a linearizable read renders afresh, so those headers keep their meaning.
func (tc *tickerCache) serve(s *Server) gin.HandlerFunc {
	return func(c *gin.Context) {
		var minIndex uint64
		if v := c.GetHeader("X-Min-Index"); v != "" {
			minIndex, _ = strconv.ParseUint(v, 10, 64) // validated by indexGuard
		}
		fresh := c.GetHeader("X-Consistency") == "linearizable"
		tc.mu.Lock()
		defer tc.mu.Unlock()
		if fresh || tc.body == nil || time.Since(tc.built) >= tickerCacheTTL || tc.index < minIndex {
			var t market.Ticker
			// As of the node's estimate of log time, not the last entry's
			// stamp: when prints or the leader stop, the age shows.
			asOf := s.Node.LogNowMs()
			s.Node.Machine().Read(func(st *fsm.State, index uint64) {
				t, tc.index = st.Market.Ticker(max(st.NowMs, asOf)), index
			})
			// A print may be stamped up to market.PrintFutureToleranceMs
			// ahead of log time; an age is never negative.
			for _, e := range t.Tickers {
				if e.Last != nil {
					t.AsOfMs = max(t.AsOfMs, e.Last.TsMs)
				}
			}
			out := TickerView{AsOfMs: wire.Int(t.AsOfMs), Tickers: make([]TickerEntryView, len(t.Tickers))}
			for i, e := range t.Tickers {
				out.Tickers[i] = TickerEntryView{MarketID: e.MarketID, Last: fsm.NewLastPriceView(e.Last), StalenessMs: wire.Int(e.StalenessMs),
					PriceSource: string(e.PriceSource)}
			}
			body, err := json.Marshal(out)
			if err != nil {
				unavailable(c, "cannot render the ticker")
				return
			}
			tc.body, tc.built = body, time.Now()
		}
		c.Data(http.StatusOK, "application/json; charset=utf-8", tc.body)
	}
}
