package market

import (
	"errors"
	"fmt"
)

// ContractType is how a market's contracts are valued in msat.
type ContractType string

const (
	// Inverse contracts are 1 dollar each, valued n x 1e19 / P msat (BitMEX XBTUSD style).
	Inverse ContractType = "inverse"
	// Quanto contracts are valued n x P x quantoMultiplierMsat / 1e8 msat (BitMEX ETHUSD style).
	Quanto ContractType = "quanto"
)

// Status is a market's trading status, as in the spec's Market resource.
type Status string

const (
	StatusLive       Status = "live"
	StatusReduceOnly Status = "reduce_only"
	StatusHalted     Status = "halted"
)

// Valid reports whether s is one of the three statuses of the spec.
func (s Status) Valid() bool {
	return s == StatusLive || s == StatusReduceOnly || s == StatusHalted
}

// Bounds on parameters. They keep every later product (size x price x rate)
// inside what the 128-bit helpers and int64 results can carry, and catch
// configuration typos (a fee of 50% is a typo, not a business decision).
const (
	MarketIDLenMax           = 32
	UnderlyingLenMax         = 16
	FeedIDLenMax             = 32
	PriceDpMax               = 8
	OrderContractsCeiling    = 1_000_000_000_000 // 1e12 one-dollar contracts
	MaxLeverageCeiling       = 1000
	FeeOrSpreadQ9Max         = 100_000_000 // 10%
	FundingCapQ9Max          = 100_000_000 // 10% per hour
	OracleStalenessMsMin     = 1_000
	OracleStalenessMsMax     = 3_600_000
	QuantoMultiplierMsatMax  = 1_000_000_000 // 0.01 BTC per contract per dollar
	FundingIntervalMs        = 3_600_000
	FundingSkewCoefQ9        = 100_000 // k in rate = skew x k: 0.01%/h at full skew
	DefaultFundingCapQ9      = 50_000  // 0.005%/h, about 44% a year
	defaultOracleStalenessMs = 10_000
)

// ErrInvalidParams wraps every parameter validation failure.
var ErrInvalidParams = errors.New("invalid market params")

// Params are the configurable fields of one market: every field of the
// spec's Market resource that is not derived from state, plus the funding
// cap and interval. Field names follow the spec.
type Params struct {
	MarketID     string       `json:"marketId"`
	Underlying   string       `json:"underlying"`
	OracleFeedID string       `json:"oracleFeedId"`
	ContractType ContractType `json:"contractType"`
	// QuantoMultiplierMsat is msat per contract per 1 dollar of price; nil
	// for inverse markets.
	QuantoMultiplierMsat   *int64 `json:"quantoMultiplierMsat"`
	Status                 Status `json:"status"`
	TickSizeQ8             int64  `json:"tickSizeQ8"`
	PriceDp                int64  `json:"priceDp"`
	MinOrderContracts      int64  `json:"minOrderContracts"`
	MaxOrderContracts      int64  `json:"maxOrderContracts"`
	TakerFeeQ9             int64  `json:"takerFeeQ9"`
	IMRateQ9               int64  `json:"imRateQ9"`
	MMRateQ9               int64  `json:"mmRateQ9"`
	BaseSpreadQ9           int64  `json:"baseSpreadQ9"`
	MaxLeverage            int64  `json:"maxLeverage"`
	OracleStalenessMs      int64  `json:"oracleStalenessMs"`
	MaxFundingRateHourlyQ9 int64  `json:"maxFundingRateHourlyQ9"`
	FundingIntervalMs      int64  `json:"fundingIntervalMs"`
}

// Clone returns a deep copy, so that callers never share the multiplier
// pointer with the state.
func (p Params) Clone() Params {
	if p.QuantoMultiplierMsat != nil {
		m := *p.QuantoMultiplierMsat
		p.QuantoMultiplierMsat = &m
	}
	return p
}

// Validate checks every rule on a market's parameters and names the first
// field that breaks one.
func (p Params) Validate() error {
	for _, check := range []func(Params) error{
		validateIdentity,
		validateContract,
		validatePriceGrid,
		validateOrderSize,
		validateRates,
		validateTiming,
	} {
		if err := check(p); err != nil {
			return fmt.Errorf("%w: market %q: %w", ErrInvalidParams, p.MarketID, err)
		}
	}
	return nil
}

func validateIdentity(p Params) error {
	// Market ids appear in URL paths, so they are restricted to an
	// unambiguous, case-stable alphabet.
	if err := checkToken("marketId", p.MarketID, MarketIDLenMax, isUpperIDChar); err != nil {
		return err
	}
	if err := checkToken("underlying", p.Underlying, UnderlyingLenMax, isUpperIDChar); err != nil {
		return err
	}
	if err := checkToken("oracleFeedId", p.OracleFeedID, FeedIDLenMax, isFeedIDChar); err != nil {
		return err
	}
	if !p.Status.Valid() {
		return fmt.Errorf("status %q is not live, reduce_only or halted", p.Status)
	}
	return nil
}

func validateContract(p Params) error {
	switch p.ContractType {
	case Inverse:
		if p.QuantoMultiplierMsat != nil {
			return errors.New("inverse market must not have quantoMultiplierMsat")
		}
	case Quanto:
		if p.QuantoMultiplierMsat == nil {
			return errors.New("quanto market needs quantoMultiplierMsat")
		}
		m := *p.QuantoMultiplierMsat
		if m <= 0 || m > QuantoMultiplierMsatMax {
			return fmt.Errorf("quantoMultiplierMsat %d outside [1, %d]", m, QuantoMultiplierMsatMax)
		}
	default:
		return fmt.Errorf("contractType %q is not inverse or quanto", p.ContractType)
	}
	return nil
}

func validatePriceGrid(p Params) error {
	if p.TickSizeQ8 <= 0 {
		return fmt.Errorf("tickSizeQ8 %d must be positive", p.TickSizeQ8)
	}
	if p.PriceDp < 0 || p.PriceDp > PriceDpMax {
		return fmt.Errorf("priceDp %d outside [0, %d]", p.PriceDp, PriceDpMax)
	}
	// Every tick must be printable with priceDp decimals, otherwise the
	// venue would show two different prices as the same string.
	unit := int64(1)
	for i := p.PriceDp; i < PriceDpMax; i++ {
		unit *= 10
	}
	if p.TickSizeQ8%unit != 0 {
		return fmt.Errorf("tickSizeQ8 %d is finer than priceDp %d can show", p.TickSizeQ8, p.PriceDp)
	}
	return nil
}

func validateOrderSize(p Params) error {
	if p.MinOrderContracts < 1 {
		return fmt.Errorf("minOrderContracts %d must be at least 1", p.MinOrderContracts)
	}
	if p.MaxOrderContracts < p.MinOrderContracts {
		return fmt.Errorf("maxOrderContracts %d below minOrderContracts %d", p.MaxOrderContracts, p.MinOrderContracts)
	}
	if p.MaxOrderContracts > OrderContractsCeiling {
		return fmt.Errorf("maxOrderContracts %d above %d", p.MaxOrderContracts, int64(OrderContractsCeiling))
	}
	return nil
}

func validateRates(p Params) error {
	if p.TakerFeeQ9 < 0 || p.TakerFeeQ9 > FeeOrSpreadQ9Max {
		return fmt.Errorf("takerFeeQ9 %d outside [0, %d]", p.TakerFeeQ9, FeeOrSpreadQ9Max)
	}
	if p.BaseSpreadQ9 < 0 || p.BaseSpreadQ9 > FeeOrSpreadQ9Max {
		return fmt.Errorf("baseSpreadQ9 %d outside [0, %d]", p.BaseSpreadQ9, FeeOrSpreadQ9Max)
	}
	if p.MaxLeverage < 1 || p.MaxLeverage > MaxLeverageCeiling {
		return fmt.Errorf("maxLeverage %d outside [1, %d]", p.MaxLeverage, MaxLeverageCeiling)
	}
	if p.IMRateQ9 <= 0 || p.IMRateQ9 > Q9 {
		return fmt.Errorf("imRateQ9 %d outside (0, 1e9]", p.IMRateQ9)
	}
	// imRate >= 1/maxLeverage, checked without division so the boundary
	// (exactly 1/maxLeverage) is accepted and nothing below it is.
	if p.IMRateQ9*p.MaxLeverage < Q9 {
		return fmt.Errorf("imRateQ9 %d below 1e9/maxLeverage (maxLeverage %d)", p.IMRateQ9, p.MaxLeverage)
	}
	if p.MMRateQ9 <= 0 || p.MMRateQ9 >= p.IMRateQ9 {
		return fmt.Errorf("mmRateQ9 %d must be positive and below imRateQ9 %d", p.MMRateQ9, p.IMRateQ9)
	}
	if p.MaxFundingRateHourlyQ9 < 0 || p.MaxFundingRateHourlyQ9 > FundingCapQ9Max {
		return fmt.Errorf("maxFundingRateHourlyQ9 %d outside [0, %d]", p.MaxFundingRateHourlyQ9, FundingCapQ9Max)
	}
	return nil
}

func validateTiming(p Params) error {
	if p.OracleStalenessMs < OracleStalenessMsMin || p.OracleStalenessMs > OracleStalenessMsMax {
		return fmt.Errorf("oracleStalenessMs %d outside [%d, %d]", p.OracleStalenessMs, OracleStalenessMsMin, OracleStalenessMsMax)
	}
	// Rates are quoted per hour and boundaries fall on whole hours; another
	// interval would need a per-boundary rate the API does not carry.
	if p.FundingIntervalMs != FundingIntervalMs {
		return fmt.Errorf("fundingIntervalMs %d: only %d is supported", p.FundingIntervalMs, FundingIntervalMs)
	}
	return nil
}

func checkToken(field, v string, maxLen int, ok func(byte) bool) error {
	if v == "" {
		return fmt.Errorf("%s is empty", field)
	}
	if len(v) > maxLen {
		return fmt.Errorf("%s %q longer than %d", field, v, maxLen)
	}
	for i := 0; i < len(v); i++ {
		if !ok(v[i]) {
			return fmt.Errorf("%s %q has character %q", field, v, v[i])
		}
	}
	return nil
}

func isUpperIDChar(c byte) bool {
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'
}

func isFeedIDChar(c byte) bool {
	return isUpperIDChar(c) || (c >= 'a' && c <= 'z') || c == '.'
}
