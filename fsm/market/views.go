package market

// MarketView is the spec's public Market resource: the parameters plus the
// figures derived from state.
type MarketView struct {
	Params
	// OpenInterestContracts is long + short trader open interest.
	OpenInterestContracts int64
	LongOIContracts       int64
	ShortOIContracts      int64
	FundingRateHourlyQ9   int64
	SkewQ9                int64
	NextFundingTsMs       int64
	// LastPrice is the feed's last print; nil before the first.
	LastPrice *LastPrice
	// PriceSource is what drives the market's feed (see PriceSource).
	PriceSource PriceSource
}

// LastPrice is the spec's lastPrice object.
type LastPrice struct {
	MidQ8 int64
	TsMs  int64
}

// TickerEntry is one element of the spec's Ticker.tickers.
type TickerEntry struct {
	MarketID string
	Last     *LastPrice
	// StalenessMs is the market's oracleStalenessMs: the threshold a client
	// compares with Last.TsMs (see the package comment).
	StalenessMs int64
	// PriceSource is what drives the market's feed (see PriceSource).
	PriceSource PriceSource
}

// Ticker is the spec's Ticker resource.
type Ticker struct {
	AsOfMs  int64
	Tickers []TickerEntry
}

// Market returns the public view of one market.
func (s *State) Market(marketID string) (MarketView, error) {
	m, err := s.market(marketID)
	if err != nil {
		return MarketView{}, err
	}
	return s.view(m), nil
}

// Markets returns every market's public view, sorted by marketId.
func (s *State) Markets() []MarketView {
	ids := s.sortedMarketIDs()
	out := make([]MarketView, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.view(s.MarketsByID[id]))
	}
	return out
}

// Ticker returns the last price of every market, sorted by marketId.
func (s *State) Ticker(nowMs int64) Ticker {
	ids := s.sortedMarketIDs()
	t := Ticker{AsOfMs: nowMs, Tickers: make([]TickerEntry, 0, len(ids))}
	for _, id := range ids {
		m := s.MarketsByID[id]
		t.Tickers = append(t.Tickers, TickerEntry{
			MarketID:    id,
			Last:        s.lastPriceOf(m),
			StalenessMs: m.Params.OracleStalenessMs,
			PriceSource: s.PriceSource(m.Params.OracleFeedID),
		})
	}
	return t
}

func (s *State) view(m *MarketState) MarketView {
	return MarketView{
		Params:                m.Params.Clone(),
		OpenInterestContracts: m.LongOIContracts + m.ShortOIContracts,
		LongOIContracts:       m.LongOIContracts,
		ShortOIContracts:      m.ShortOIContracts,
		FundingRateHourlyQ9:   m.FundingRateHourlyQ9(),
		SkewQ9:                m.SkewQ9(),
		NextFundingTsMs:       m.NextFundingTsMs,
		LastPrice:             s.lastPriceOf(m),
		PriceSource:           s.PriceSource(m.Params.OracleFeedID),
	}
}

func (s *State) lastPriceOf(m *MarketState) *LastPrice {
	last := s.lastPrint(m.Params.MarketID)
	if last == nil {
		return nil
	}
	return &LastPrice{MidQ8: last.MidQ8, TsMs: last.TsMs}
}
