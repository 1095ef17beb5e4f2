package market

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// CatalogueMarketsMax bounds a catalogue file; it equals MarketsMax because a
// catalogue that cannot be loaded into State is useless.
const CatalogueMarketsMax = MarketsMax

// catalogueBytesMax bounds how much LoadCatalogue reads.
const catalogueBytesMax = 1 << 20

// EthQuantoMultiplierMsat is the default ETH-PERP multiplier: 300 msat per
// contract per dollar of ETH price, chosen so that one contract is about one
// dollar of notional at launch prices (ETH 3,400 x 300 msat = 1,020,000 msat,
// about 1.05 USD at BTC 97,000), as SPEC's "contracts of 1 dollar notional"
// asks. BitMEX ETHUSD's 0.000001 XBT (100,000 msat) would make a contract
// worth about 330 dollars.
const EthQuantoMultiplierMsat int64 = 300

// DefaultCatalogue returns the markets a fresh deployment ships with, sorted
// by id. Values follow common venue practice: 0.05% taker fee, 1% initial
// margin (100x), 0.5% maintenance, 0.02% base spread, 10 s oracle staleness.
func DefaultCatalogue() []Params {
	ethMult := EthQuantoMultiplierMsat
	common := Params{
		Status:                 StatusLive,
		MinOrderContracts:      1,
		MaxOrderContracts:      1_000_000,
		TakerFeeQ9:             500_000,    // 0.05%
		IMRateQ9:               10_000_000, // 1%
		MMRateQ9:               5_000_000,  // 0.5%
		BaseSpreadQ9:           200_000,    // 0.02%
		MaxLeverage:            100,
		OracleStalenessMs:      defaultOracleStalenessMs,
		MaxFundingRateHourlyQ9: DefaultFundingCapQ9,
		FundingIntervalMs:      FundingIntervalMs,
	}
	btc := common
	btc.MarketID, btc.Underlying, btc.OracleFeedID = "BTC-PERP", "BTC", "BTCUSD"
	btc.ContractType = Inverse
	btc.TickSizeQ8, btc.PriceDp = 50_000_000, 1 // 0.5 USD

	eth := common
	eth.MarketID, eth.Underlying, eth.OracleFeedID = "ETH-PERP", "ETH", "ETHUSD"
	eth.ContractType = Quanto
	eth.QuantoMultiplierMsat = &ethMult
	eth.TickSizeQ8, eth.PriceDp = 5_000_000, 2 // 0.05 USD

	return []Params{btc, eth}
}

// catalogueEntry is the file form of Params: integers may be JSON strings
// or JSON integers (see the package comment).
type catalogueEntry struct {
	MarketID               string       `json:"marketId"`
	Underlying             string       `json:"underlying"`
	OracleFeedID           string       `json:"oracleFeedId"`
	ContractType           ContractType `json:"contractType"`
	QuantoMultiplierMsat   *intField    `json:"quantoMultiplierMsat"`
	Status                 Status       `json:"status"`
	TickSizeQ8             intField     `json:"tickSizeQ8"`
	PriceDp                intField     `json:"priceDp"`
	MinOrderContracts      intField     `json:"minOrderContracts"`
	MaxOrderContracts      intField     `json:"maxOrderContracts"`
	TakerFeeQ9             intField     `json:"takerFeeQ9"`
	IMRateQ9               intField     `json:"imRateQ9"`
	MMRateQ9               intField     `json:"mmRateQ9"`
	BaseSpreadQ9           intField     `json:"baseSpreadQ9"`
	MaxLeverage            intField     `json:"maxLeverage"`
	OracleStalenessMs      intField     `json:"oracleStalenessMs"`
	MaxFundingRateHourlyQ9 intField     `json:"maxFundingRateHourlyQ9"`
	FundingIntervalMs      *intField    `json:"fundingIntervalMs"`
}

// intField is an int64 that must be present in the file.
type intField struct {
	V   int64
	Set bool
}

func (f *intField) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		return nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a decimal integer: %s", b)
	}
	f.V, f.Set = v, true
	return nil
}

// LoadCatalogue reads a JSON array of markets (format in the package
// comment), validates each and returns them sorted by marketId. Missing
// integer fields are errors, not zeros; fundingIntervalMs may be omitted and
// defaults to one hour. It is meant for bootstrap on the node, never apply.
func LoadCatalogue(r io.Reader) ([]Params, error) {
	data, err := io.ReadAll(io.LimitReader(r, catalogueBytesMax+1))
	if err != nil {
		return nil, fmt.Errorf("read catalogue: %w", err)
	}
	if len(data) > catalogueBytesMax {
		return nil, fmt.Errorf("catalogue larger than %d bytes", catalogueBytesMax)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []catalogueEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("decode catalogue: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode catalogue: trailing data after the array")
	}
	if len(entries) == 0 {
		return nil, errors.New("catalogue has no markets")
	}
	if len(entries) > CatalogueMarketsMax {
		return nil, fmt.Errorf("catalogue has %d markets, max %d", len(entries), CatalogueMarketsMax)
	}
	out := make([]Params, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		p, err := e.params()
		if err != nil {
			return nil, fmt.Errorf("catalogue entry %d: %w", i, err)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("catalogue entry %d: %w", i, err)
		}
		if seen[p.MarketID] {
			return nil, fmt.Errorf("catalogue entry %d: duplicate marketId %q", i, p.MarketID)
		}
		seen[p.MarketID] = true
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MarketID < out[j].MarketID })
	return out, nil
}

func (e catalogueEntry) params() (Params, error) {
	p := Params{
		MarketID:     e.MarketID,
		Underlying:   e.Underlying,
		OracleFeedID: e.OracleFeedID,
		ContractType: e.ContractType,
		Status:       e.Status,
	}
	required := []struct {
		name string
		f    intField
		dst  *int64
	}{
		{"tickSizeQ8", e.TickSizeQ8, &p.TickSizeQ8},
		{"priceDp", e.PriceDp, &p.PriceDp},
		{"minOrderContracts", e.MinOrderContracts, &p.MinOrderContracts},
		{"maxOrderContracts", e.MaxOrderContracts, &p.MaxOrderContracts},
		{"takerFeeQ9", e.TakerFeeQ9, &p.TakerFeeQ9},
		{"imRateQ9", e.IMRateQ9, &p.IMRateQ9},
		{"mmRateQ9", e.MMRateQ9, &p.MMRateQ9},
		{"baseSpreadQ9", e.BaseSpreadQ9, &p.BaseSpreadQ9},
		{"maxLeverage", e.MaxLeverage, &p.MaxLeverage},
		{"oracleStalenessMs", e.OracleStalenessMs, &p.OracleStalenessMs},
		{"maxFundingRateHourlyQ9", e.MaxFundingRateHourlyQ9, &p.MaxFundingRateHourlyQ9},
	}
	for _, r := range required {
		if !r.f.Set {
			return Params{}, fmt.Errorf("%w: market %q: %s is missing", ErrInvalidParams, e.MarketID, r.name)
		}
		*r.dst = r.f.V
	}
	if e.QuantoMultiplierMsat != nil && e.QuantoMultiplierMsat.Set {
		m := e.QuantoMultiplierMsat.V
		p.QuantoMultiplierMsat = &m
	}
	p.FundingIntervalMs = FundingIntervalMs
	if e.FundingIntervalMs != nil && e.FundingIntervalMs.Set {
		p.FundingIntervalMs = e.FundingIntervalMs.V
	}
	return p, nil
}
