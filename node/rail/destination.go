package rail

import (
	"encoding/hex"
	"errors"
	"strings"
)

// parseDestination implements Rail.ParseDestination for network n.
func parseDestination(n Network, dest string) (Destination, error) {
	s := strings.TrimSpace(dest)
	if s == "" {
		return Destination{}, invalid(nil, "destination is empty: send a Lightning invoice (%s...) or a Spark address (%s1...)", n.InvoicePrefix(), n.SparkPrefix())
	}
	if len(s) > MaxDestinationLength {
		return Destination{}, invalid(nil, "destination is longer than %d characters", MaxDestinationLength)
	}
	// BOLT11 recommends the "lightning:" URI scheme; wallets copy it along.
	const scheme = "lightning:"
	if len(s) >= len(scheme) && strings.EqualFold(s[:len(scheme)], scheme) {
		s = s[len(scheme):]
	}
	lower := strings.ToLower(s)
	hrp := lower
	if i := strings.LastIndexByte(lower, '1'); i >= 0 {
		hrp = lower[:i]
	}
	switch {
	case strings.HasPrefix(hrp, "lnurl"):
		return Destination{}, invalid(nil, "LNURL is not supported: send a BOLT11 Lightning invoice (%s...)", n.InvoicePrefix())
	case strings.HasPrefix(hrp, "lno") || strings.HasPrefix(hrp, "lni"):
		return Destination{}, invalid(nil, "BOLT12 offers are not supported: send a BOLT11 Lightning invoice (%s...)", n.InvoicePrefix())
	case strings.HasPrefix(hrp, "ln"):
		return parseInvoiceDestination(n, s)
	case isSparkHRP(hrp):
		return parseSparkDestination(n, s)
	case hrp == "bc" || hrp == "tb" || hrp == "bcrt" || looksLikeBase58Address(s):
		return Destination{}, invalid(nil, "on-chain Bitcoin addresses are not a withdrawal destination: send a Lightning invoice (%s...) or a Spark address (%s1...)", n.InvoicePrefix(), n.SparkPrefix())
	default:
		return Destination{}, invalid(nil, "unrecognized destination: send a Lightning invoice (%s...) or a Spark address (%s1...)", n.InvoicePrefix(), n.SparkPrefix())
	}
}

func parseInvoiceDestination(n Network, s string) (Destination, error) {
	inv, err := DecodeInvoice(s)
	if err != nil {
		return Destination{}, err
	}
	if inv.Network != n {
		return Destination{}, invalid(ErrWrongNetwork, "this is a %s Lightning invoice (%s...); this deployment accepts only %s invoices (%s...)",
			inv.Network, inv.Network.InvoicePrefix(), n, n.InvoicePrefix())
	}
	// An expiry instant of 0 (timestamp 0, expiry 0) would read as the
	// "never expires" of a Spark address: it expired at the epoch.
	if inv.ExpiresAtMs() <= 0 {
		return Destination{}, invalid(ErrInvoiceExpired, "the invoice expired at its timestamp, the Unix epoch: ask the payee for a new one")
	}
	return Destination{
		Path:        PathLightning,
		Normalized:  strings.ToLower(s),
		AmountMsat:  inv.AmountMsat,
		PaymentRef:  hex.EncodeToString(inv.PaymentHash[:]),
		ExpiresAtMs: inv.ExpiresAtMs(),
	}, nil
}

func parseSparkDestination(n Network, s string) (Destination, error) {
	a, err := ParseSparkAddress(s)
	if err != nil {
		return Destination{}, err
	}
	if a.Network != n {
		return Destination{}, invalid(ErrWrongNetwork, "this is a %s Spark address; this deployment accepts only %s Spark addresses (%s1...)",
			a.Network, n, n.SparkPrefix())
	}
	return Destination{Path: PathSpark, Normalized: a.String()}, nil
}

// isSparkHRP reports whether hrp is a Spark prefix of any network, so that
// a Spark address of the wrong network gets a network error rather than
// "unrecognized".
func isSparkHRP(hrp string) bool {
	_, ok := sparkNetworkOf(hrp)
	return ok
}

// looksLikeBase58Address spots legacy on-chain addresses (1..., 3..., m...,
// n..., 2...) only to give a clearer message; it validates nothing.
func looksLikeBase58Address(s string) bool {
	if len(s) < 26 || len(s) > 35 || !strings.ContainsRune("13mn2", rune(s[0])) {
		return false
	}
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(alphabet, rune(s[i])) {
			return false
		}
	}
	return true
}

// IsValidation reports whether err is a refusal of the input (a
// *ValidationError), as opposed to a fault of the rail.
func IsValidation(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}
