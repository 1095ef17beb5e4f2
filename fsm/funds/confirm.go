package funds

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/perpd/perpd/fsm/wire"
)

// Withdrawal confirmation (SPEC sections 2, 4, 7 and 8).
//
// A destination is first-seen for an account until a withdrawal to it has
// been paid. A withdrawal to a first-seen destination at or above
// ConfirmThresholdMsat needs a confirmToken from POST /v1/withdrawals/quote,
// bound to the account, the destination and the amount, single-use, and
// valid for ConfirmTokenTTLMs of log time.
const (
	// ConfirmThresholdMsat is 100,000 sats (about 0.001 BTC). A wrong Spark
	// address is irreversible, so any amount that would hurt to lose on a
	// typo needs the explicit quote-then-confirm step; below it a client
	// can send a small probe to a new address cheaply (the Spark fee is
	// 10 sats), and once the probe is paid the address is known. A testnet
	// faucet grant (1,000,000 sats) is above it, so the flow is exercised.
	ConfirmThresholdMsat int64 = 100_000 * 1000
	// ConfirmTokenTTLMs is a confirmToken's lifetime: 10 minutes, long
	// enough for an agent to read the quote and act, short enough that a
	// leaked token is soon useless.
	ConfirmTokenTTLMs int64 = 10 * 60 * 1000
	// ConfirmClockSkewMs is how far a token's expiry may lie beyond log
	// time plus the TTL: the quoting node stamps it with its own clock.
	ConfirmClockSkewMs int64 = 60 * 1000
	// MaxKnownDestinations bounds each account's known destinations; the
	// oldest is forgotten first, which makes it first-seen again (the safe
	// direction).
	MaxKnownDestinations = 256
	// MaxUsedTokens bounds the spent-token set. Spent tokens leave it when
	// they expire; a full set forgets the oldest early. A forgotten token
	// could confirm a second withdrawal of the same amount to the same
	// destination, which a single confirmation already allowed once.
	MaxUsedTokens = 1_000_000
)

// Confirm is what the proposing node learned from a confirmToken. It
// checked the token's MAC (keyed by a cluster secret the state machine
// never sees) against the request's account and destination; the state
// machine checks the rest: amount, expiry in log time, single use.
type Confirm struct {
	TokenID     string `cbor:"1,keyasint"`
	AmountMsat  int64  `cbor:"2,keyasint"`
	ExpiresAtMs int64  `cbor:"3,keyasint"`
	// Problem is set when the token does not bind this account and
	// destination (or is malformed); it is the refusal reason.
	Problem string `cbor:"4,keyasint,omitempty"`
}

// DestinationKey is how a normalized destination is remembered: its
// SHA-256 in hex, a fixed size whatever the destination's length.
func DestinationKey(normalized string) string {
	sum := sha256.Sum256([]byte(normalized))
	return hex.EncodeToString(sum[:])
}

// DestinationKnown reports whether account has been paid out to the
// destination with key destKey.
func (s *State) DestinationKnown(account, destKey string) bool {
	for _, k := range s.KnownDests[account] {
		if k == destKey {
			return true
		}
	}
	return false
}

func (s *State) rememberDestination(account, destKey string) {
	if s.DestinationKnown(account, destKey) {
		return
	}
	list := append(s.KnownDests[account], destKey)
	if len(list) > MaxKnownDestinations {
		list = append([]string(nil), list[len(list)-MaxKnownDestinations:]...)
	}
	s.KnownDests[account] = list
}

// ConfirmRequired reports whether a withdrawal of amountMsat to destKey
// needs a confirmToken.
func (s *State) ConfirmRequired(account, destKey string, amountMsat int64) bool {
	return amountMsat >= ConfirmThresholdMsat && !s.DestinationKnown(account, destKey)
}

// confirmationRefusal is the 428 of SPEC section 7; the HTTP layer adds
// firstSeen and confirmThresholdMsat to the body.
func confirmationRefusal(format string, args ...any) *wire.Refusal {
	return wire.Refuse(http.StatusPreconditionRequired, wire.CodeConfirmationNeeded, format, args...)
}

// checkConfirm decides whether cf confirms a withdrawal of amountMsat at
// nowMs. It changes nothing; spending the token is useToken.
func (s *State) checkConfirm(cf *Confirm, amountMsat, nowMs int64) *wire.Refusal {
	switch {
	case cf == nil:
		return confirmationRefusal("this is the first withdrawal to this destination and it is at or above %d msat: "+
			"quote it with POST /v1/withdrawals/quote and send the confirmToken it returns", ConfirmThresholdMsat)
	case cf.Problem != "":
		return confirmationRefusal("%s", cf.Problem)
	case cf.TokenID == "":
		return confirmationRefusal("confirmToken is malformed")
	case cf.AmountMsat != amountMsat:
		return confirmationRefusal("confirmToken was quoted for %d msat, not %d msat: quote this amount again", cf.AmountMsat, amountMsat)
	case nowMs >= cf.ExpiresAtMs:
		return confirmationRefusal("confirmToken expired at %d ms: quote again", cf.ExpiresAtMs)
	case cf.ExpiresAtMs > nowMs+ConfirmTokenTTLMs+ConfirmClockSkewMs:
		return confirmationRefusal("confirmToken expiry lies beyond its lifetime: quote again")
	}
	if _, used := s.UsedTokens[cf.TokenID]; used {
		return confirmationRefusal("confirmToken was already used: quote again")
	}
	return nil
}

func (s *State) useToken(cf *Confirm) {
	s.UsedTokens[cf.TokenID] = cf.ExpiresAtMs
	s.UsedOrder = append(s.UsedOrder, cf.TokenID)
	for len(s.UsedOrder) > MaxUsedTokens {
		s.dropOldestToken()
	}
}

// PruneTokens forgets spent tokens that have expired: an expired token is
// refused for its expiry anyway. Tokens are spent in roughly expiry order;
// one that expires later than those behind it only delays their pruning.
func (s *State) PruneTokens(nowMs int64) {
	for len(s.UsedOrder) > 0 {
		if exp, ok := s.UsedTokens[s.UsedOrder[0]]; ok && exp > nowMs {
			return
		}
		s.dropOldestToken()
	}
}

func (s *State) dropOldestToken() {
	delete(s.UsedTokens, s.UsedOrder[0])
	s.UsedOrder[0] = ""
	s.UsedOrder = s.UsedOrder[1:]
	if len(s.UsedOrder) == 0 {
		s.UsedOrder = nil
	} else if cap(s.UsedOrder) > 1024 && len(s.UsedOrder) < cap(s.UsedOrder)/4 {
		s.UsedOrder = append([]string(nil), s.UsedOrder...)
	}
}
