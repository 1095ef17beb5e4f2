package rail

import (
	"strconv"
	"strings"
)

// Amounts in a BOLT11 human-readable part are bitcoin with an optional
// multiplier; 1 BTC = 1e11 msat.
const (
	msatPerBTC = 100_000_000_000

	// MaxInvoiceAmountMsat is the largest amount the rail writes or reads in
	// an invoice: every bitcoin there will ever be (21e6 BTC). It bounds the
	// arithmetic, and anything above it is not a real invoice.
	MaxInvoiceAmountMsat int64 = 21_000_000 * msatPerBTC
)

// multipliers from the largest unit down; msatPer is how many msat one unit
// of the multiplied amount is worth. Pico is handled apart: one pico-bitcoin
// is a tenth of a msat.
var multipliers = []struct {
	letter  byte
	msatPer int64
}{
	{0, msatPerBTC},    // whole bitcoin, no letter
	{'m', 100_000_000}, // milli
	{'u', 100_000},     // micro
	{'n', 100},         // nano
}

// encodeAmount writes amountMsat (> 0) in its shortest exact form: the
// largest unit that divides it, else pico (msat x 10, always exact).
func encodeAmount(amountMsat int64) string {
	for _, m := range multipliers {
		if amountMsat%m.msatPer == 0 {
			s := strconv.FormatInt(amountMsat/m.msatPer, 10)
			if m.letter != 0 {
				s += string(m.letter)
			}
			return s
		}
	}
	// amountMsat <= MaxInvoiceAmountMsat, so x10 cannot overflow; appending
	// a "0" is the multiplication.
	return strconv.FormatInt(amountMsat, 10) + "0p"
}

// decodeAmount parses the amount part of an HRP ("" = no amount).
func decodeAmount(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	digits, letter := s, byte(0)
	if last := s[len(s)-1]; last < '0' || last > '9' {
		digits, letter = s[:len(s)-1], last
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, invalid(nil, "invalid Lightning invoice: amount %q is not a number with an optional m/u/n/p multiplier", s)
	}
	if digits[0] == '0' {
		return 0, invalid(nil, "invalid Lightning invoice: amount %q has a leading zero", s)
	}
	if letter == 'p' {
		// Ten pico-bitcoin make a msat, and the largest amount in pico does
		// not fit 64 bits: drop the required trailing zero instead of
		// dividing.
		if digits[len(digits)-1] != '0' {
			return 0, invalid(nil, "invalid Lightning invoice: amount %q is not a whole number of millisatoshis", s)
		}
		digits = digits[:len(digits)-1]
		msat, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return 0, invalid(nil, "invalid Lightning invoice: amount %q exceeds 21,000,000 BTC", s)
		}
		return checkAmount(msat, s)
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, invalid(nil, "invalid Lightning invoice: amount %q exceeds 21,000,000 BTC", s)
	}
	for _, m := range multipliers {
		if m.letter == letter {
			if v > MaxInvoiceAmountMsat/m.msatPer {
				return 0, invalid(nil, "invalid Lightning invoice: amount %q exceeds 21,000,000 BTC", s)
			}
			return checkAmount(v*m.msatPer, s)
		}
	}
	return 0, invalid(nil, "invalid Lightning invoice: unknown amount multiplier %q (want m, u, n or p)", string(letter))
}

func checkAmount(msat int64, s string) (int64, error) {
	if msat > MaxInvoiceAmountMsat {
		return 0, invalid(nil, "invalid Lightning invoice: amount %q exceeds 21,000,000 BTC", s)
	}
	return msat, nil
}
