package wire

import "fmt"

// Refusal is a deterministic "no" from the state machine or the HTTP layer:
// the HTTP status, the machine code of SPEC section 7, and human text.
// A refused command changes nothing.
type Refusal struct {
	Status int    `json:"-" cbor:"1,keyasint"`
	Code   string `json:"code" cbor:"2,keyasint"`
	Msg    string `json:"error" cbor:"3,keyasint"`
	// Extra are fields a refusal body carries beside error and code (SPEC
	// section 7's USDx 409 bodies: reason, headroom, limit, quote). Never
	// stored: refusals are not.
	Extra map[string]any `json:"-" cbor:"-"`
}

func (r *Refusal) Error() string { return fmt.Sprintf("%s: %s", r.Code, r.Msg) }

// Refuse builds a refusal with a formatted message.
func Refuse(status int, code, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ErrorBody is the refusal body of SPEC section 7.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// Error codes of SPEC section 7. The enum is additive only.
const (
	CodeValidation          = "validation"
	CodeUnauthorized        = "unauthorized"
	CodeInsufficientScope   = "insufficient_scope"
	CodeComplianceRefused   = "compliance_refused"
	CodeSessionLimit        = "session_limit"
	CodeReferralForbidden   = "referral_forbidden"
	CodeNotFound            = "not_found"
	CodeIdempotencyReused   = "idempotency_key_reused"
	CodeConflict            = "conflict"
	CodeConfirmationNeeded  = "confirmation_required"
	CodeRateLimited         = "rate_limited"
	CodeFeatureUnavailable  = "feature_unavailable"
	CodeDepositsHalted      = "deposits_halted"
	CodeUnavailable         = "unavailable"
	CodeInsufficientBalance = "insufficient_balance"
	CodeInsufficientMargin  = "insufficient_margin"
	CodePositionLimit       = "position_limit"
	CodeOICap               = "oi_cap"
	CodeReduceOnly          = "reduce_only"
	CodeMarketHalted        = "market_halted"
	CodeOracleStale         = "oracle_stale"
	CodeBodyTooLarge        = "body_too_large"
	CodeUSDxCapacity        = "usdx_capacity"
	CodeUSDxOracleStale     = "usdx_oracle_stale"
	CodeUSDxWholeUnits      = "usdx_whole_units"
	CodeUSDxDust            = "usdx_dust"
	CodeUSDxMintsHalted     = "usdx_mints_halted"
	CodeUSDxRequote         = "usdx_requote"
	CodeUSDxQuoteExpired    = "usdx_quote_expired"
	CodeTokenRailUnavail    = "token_rail_unavailable"
)

// AllCodes lists every ErrorCode in SPEC order (for the OpenAPI enum).
var AllCodes = []string{
	CodeValidation, CodeUnauthorized, CodeInsufficientScope, CodeComplianceRefused,
	CodeSessionLimit, CodeReferralForbidden, CodeNotFound, CodeIdempotencyReused,
	CodeConflict, CodeConfirmationNeeded, CodeRateLimited, CodeFeatureUnavailable,
	CodeDepositsHalted, CodeUnavailable, CodeInsufficientBalance, CodeInsufficientMargin,
	CodePositionLimit, CodeOICap, CodeReduceOnly, CodeMarketHalted, CodeOracleStale,
	CodeBodyTooLarge, CodeUSDxCapacity, CodeUSDxOracleStale, CodeUSDxWholeUnits,
	CodeUSDxDust, CodeUSDxMintsHalted, CodeUSDxRequote, CodeUSDxQuoteExpired,
	CodeTokenRailUnavail,
}
