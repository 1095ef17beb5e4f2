package rail

import (
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzParseDestination: ParseDestination never panics, refuses only with a
// *ValidationError, and whatever it accepts is stable: the normalized form
// parses to the same destination, and the path matches the format.
func FuzzParseDestination(f *testing.F) {
	r := newTestRail(f, Testnet)
	own := mustEncode(f, testInvoiceFields(Testnet))
	amountless := testInvoiceFields(Testnet)
	amountless.AmountMsat = 0
	spark := r.AccountAddress([]byte("fuzz"))
	for _, seed := range []string{
		own, strings.ToUpper(own), "lightning:" + own, mustEncode(f, amountless),
		spark, strings.ToUpper(spark), sparkDocsAddress,
		specCoffee, specTestnet, specPico, specBeansSkip,
		own[:len(own)-1], typo(own, 25), "lntb1", "lntb", "ln", "sparkt1", "1", "",
		"tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", "mk2QpYatsKicvFVuTAQLBryyccRXMUaGHP",
		"lnurl1dp68gurn8ghj7", "lno1pg257enxv4ezqcneype82um50ynhxgrwdajx283qfwdpl28qqmc78ymlvhmxcsywdk5wr",
		"LIGHTNING:", "lntb99999999999999999999p1qqqqqqqqqqqq", "\x00\xff", "lightning:lightning:" + own,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, dest string) {
		d, err := r.ParseDestination(dest)
		if err != nil {
			if !IsValidation(err) {
				t.Fatalf("refusal is not a *ValidationError: %T %v", err, err)
			}
			return
		}
		switch d.Path {
		case PathLightning:
			if !strings.HasPrefix(d.Normalized, "lntb") || len(d.PaymentRef) != 64 || d.AmountMsat < 0 || d.AmountMsat > MaxInvoiceAmountMsat || d.ExpiresAtMs <= 0 {
				t.Fatalf("implausible invoice destination %+v", d)
			}
		case PathSpark:
			if !strings.HasPrefix(d.Normalized, "sparkt1") || d.AmountMsat != 0 || d.PaymentRef != "" || d.ExpiresAtMs != 0 {
				t.Fatalf("implausible Spark destination %+v", d)
			}
		default:
			t.Fatalf("unknown path in %+v", d)
		}
		again, err := r.ParseDestination(d.Normalized)
		if err != nil || again != d {
			t.Fatalf("normalized %q does not parse back: %+v, %v (first %+v)", d.Normalized, again, err, d)
		}
	})
}

// FuzzInvoiceRoundTrip: whatever EncodeInvoice accepts, DecodeInvoice reads
// back field for field, signed by the node key.
func FuzzInvoiceRoundTrip(f *testing.F) {
	key := mustHex(f, specKeyHex)
	f.Add(int64(250_000_000), int64(1_700_000_000), int64(900), "deposit", uint8(1))
	f.Add(int64(1), int64(0), int64(1), "", uint8(0))
	f.Add(MaxInvoiceAmountMsat, int64(maxTimestampSec), int64(MaxInvoiceExpirySeconds), strings.Repeat("é", 300), uint8(3))
	f.Add(int64(-1), int64(-1), int64(0), "\xff", uint8(2))
	nets := []Network{Mainnet, Testnet, Signet, Regtest}
	f.Fuzz(func(t *testing.T, amount, ts, expiry int64, memo string, net uint8) {
		in := testInvoiceFields(nets[int(net)%len(nets)])
		in.AmountMsat, in.TimestampSec, in.ExpirySeconds, in.Description = amount, ts, expiry, memo
		s, err := EncodeInvoice(in, key)
		if err != nil {
			if !IsValidation(err) {
				t.Fatalf("refusal is not a *ValidationError: %v", err)
			}
			return
		}
		d, err := DecodeInvoice(s)
		if err != nil {
			t.Fatalf("own invoice %q does not decode: %v", s, err)
		}
		if d.Network != in.Network || d.AmountMsat != amount || d.TimestampSec != ts || d.ExpirySeconds != expiry ||
			d.Description != memo || d.PaymentHash != in.PaymentHash || d.PaymentSecret == nil ||
			hex.EncodeToString(d.PayeePubKey) != specPayeeHex {
			t.Fatalf("round trip of %+v gave %+v", in, d)
		}
	})
}
