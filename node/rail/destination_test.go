package rail

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2/ecdsa"
	"github.com/btcsuite/btcd/btcutil/bech32"
)

func TestParseDestinationAcceptsTestnetDestinations(t *testing.T) {
	r := newTestRail(t, Testnet)
	inv := func(amount int64) string {
		f := testInvoiceFields(Testnet)
		f.AmountMsat = amount
		return mustEncode(t, f)
	}
	withAmount := inv(250_000_000)
	spark, _ := EncodeSparkAddress(Testnet, mustHex(t, sparkDocsKey))
	legacySpark, _ := encodeSparkWithHRP("spt", mustHex(t, sparkDocsKey))
	hash := testInvoiceFields(Testnet).PaymentHash
	ref := hex.EncodeToString(hash[:])
	expires := (testInvoiceFields(Testnet).TimestampSec + testInvoiceFields(Testnet).ExpirySeconds) * 1000

	cases := []struct {
		name, dest string
		want       Destination
	}{
		{"invoice with amount", withAmount, Destination{PathLightning, withAmount, 250_000_000, ref, expires}},
		{"amountless invoice", inv(0), Destination{PathLightning, inv(0), 0, ref, expires}},
		{"1 msat", inv(1), Destination{PathLightning, inv(1), 1, ref, expires}},
		{"1 sat", inv(1_000), Destination{PathLightning, inv(1_000), 1_000, ref, expires}},
		{"21e6 BTC", inv(MaxInvoiceAmountMsat), Destination{PathLightning, inv(MaxInvoiceAmountMsat), MaxInvoiceAmountMsat, ref, expires}},
		{"upper case (QR) invoice", strings.ToUpper(withAmount), Destination{PathLightning, withAmount, 250_000_000, ref, expires}},
		{"lightning: URI", "lightning:" + withAmount, Destination{PathLightning, withAmount, 250_000_000, ref, expires}},
		{"LIGHTNING: URI upper case", "LIGHTNING:" + strings.ToUpper(withAmount), Destination{PathLightning, withAmount, 250_000_000, ref, expires}},
		{"surrounding whitespace", "  " + withAmount + "\n", Destination{PathLightning, withAmount, 250_000_000, ref, expires}},
		{"the spec's testnet invoice", specTestnet, Destination{PathLightning, specTestnet, 2_000_000_000, specHash, (specTimestamp + 3600) * 1000}},
		{"Spark address", spark, Destination{Path: PathSpark, Normalized: spark}},
		{"upper case Spark address", strings.ToUpper(spark), Destination{Path: PathSpark, Normalized: spark}},
		{"legacy spt Spark address", legacySpark, Destination{Path: PathSpark, Normalized: spark}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := r.ParseDestination(c.dest)
			if err != nil {
				t.Fatalf("ParseDestination: %v", err)
			}
			if d != c.want {
				t.Fatalf("got  %+v\nwant %+v", d, c.want)
			}
			again, err := r.ParseDestination(d.Normalized)
			if err != nil || again != d {
				t.Fatalf("Normalized form does not parse to the same destination: %+v, %v", again, err)
			}
		})
	}
}

func TestParseDestinationRefusals(t *testing.T) {
	r := newTestRail(t, Testnet)
	good := mustEncode(t, testInvoiceFields(Testnet))
	regtestInv := mustEncode(t, testInvoiceFields(Regtest))
	mainSpark, _ := EncodeSparkAddress(Mainnet, mustHex(t, sparkDocsKey))
	cases := []struct {
		name, dest, reason string
		wrongNetwork       bool
	}{
		{"empty", "", "empty", false},
		{"only whitespace", " \t\n", "empty", false},
		{"mainnet invoice", specCoffee, "mainnet Lightning invoice (lnbc...); this deployment accepts only testnet invoices (lntb...)", true},
		{"regtest invoice", regtestInv, "regtest Lightning invoice (lnbcrt...)", true},
		{"mainnet Spark address", mainSpark, "mainnet Spark address; this deployment accepts only testnet Spark addresses (sparkt1...)", true},
		{"regtest Spark address from the Spark docs", sparkDocsAddress, "regtest Spark address", true},
		{"invoice with a typo", typo(good, 40), "checksum", false},
		{"truncated invoice", good[:len(good)-10], "checksum", false},
		{"invoice cut to its prefix", "lntb1", "too short", false},
		{"mixed case invoice", strings.ToUpper(good[:5]) + good[5:], "mixes upper and lower case", false},
		{"random string", "hello world", "unrecognized destination", false},
		{"random bech32", "abc1qqqqqqqqqqqqq", "unrecognized destination", false},
		{"segwit address", "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", "on-chain", false},
		{"mainnet segwit address", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "on-chain", false},
		{"base58 address", "mk2QpYatsKicvFVuTAQLBryyccRXMUaGHP", "on-chain", false},
		{"LNURL", "LNURL1DP68GURN8GHJ7UM9WFMXJCM99E3K7MF0V9CXJ0M385EKVCENXC6R2C35XVUKXEFCV5MKVV34X5EKZD3EV56NYD3HXQURZEPEXEJXXEPNXSCRVWFNV9NXZCN9XQ6XYEFHVGCXXCMYXYMNSERXFQ5FNS", "LNURL", false},
		{"BOLT12 offer", "lno1pg257enxv4ezqcneype82um50ynhxgrwdajx283qfwdpl28qqmc78ymlvhmxcsywdk5wrjnj36jryg488qwlrnzyjczlqs85ck65ycmkdk92smwt9zuewdzfe7v4aavvaz5kgv9mkk63v3s0ge0f099kssh3yc95qztx504hu92hnx8ctzhtt08pgk0texz0509tk", "BOLT12", false},
		{"too long", strings.Repeat("q", MaxDestinationLength+1), "longer than", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := r.ParseDestination(c.dest)
			if err == nil {
				t.Fatalf("accepted as %+v", d)
			}
			if !IsValidation(err) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error %q, want a validation error containing %q", err, c.reason)
			}
			if errors.Is(err, ErrWrongNetwork) != c.wrongNetwork {
				t.Fatalf("errors.Is(ErrWrongNetwork) = %v, want %v", !c.wrongNetwork, c.wrongNetwork)
			}
		})
	}
}

func TestMainnetRailRefusesTestnetDestinations(t *testing.T) {
	r := newTestRail(t, Mainnet)
	if _, err := r.ParseDestination(specCoffee); err != nil {
		t.Fatalf("mainnet rail refuses a mainnet invoice: %v", err)
	}
	_, err := r.ParseDestination(specTestnet)
	if !errors.Is(err, ErrWrongNetwork) {
		t.Fatalf("mainnet rail: testnet invoice err %v, want ErrWrongNetwork", err)
	}
}

func TestDestinationExpiry(t *testing.T) {
	r := newTestRail(t, Testnet)
	d, err := r.ParseDestination(mustEncode(t, testInvoiceFields(Testnet)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Expired(d.ExpiresAtMs - 1) {
		t.Error("expired one ms before its expiry")
	}
	if !d.Expired(d.ExpiresAtMs) {
		t.Error("not expired at its expiry instant")
	}
	spark, _ := r.ParseDestination(r.AccountAddress([]byte("s")))
	if spark.Expired(1 << 62) {
		t.Error("a Spark address expired")
	}
}

// An invoice whose expiry instant is the epoch (timestamp 0 and an `x`
// field of 0) has been expired since 1970. Its ExpiresAtMs, 0, read as
// "never expires" (the Spark sentinel), so the quote and the state machine
// both let it through as a withdrawal destination.
func TestInvoiceExpiredAtTheEpochIsRefused(t *testing.T) {
	r := newTestRail(t, Testnet)
	key := mustHex(t, specKeyHex)
	sign := func(timestampSec, expirySec uint64) string {
		hrp := Testnet.InvoicePrefix() + "10u"
		words := uintWords(timestampSec, timestampWords)
		words = appendField(words, tagPaymentHash, bytesToWords(make([]byte, 32)))
		words = appendField(words, tagDescription, bytesToWords([]byte("epoch")))
		words = appendField(words, tagExpiry, uintWords(expirySec, 0)) // 0: a field of no words
		priv, err := parseNodeKey(key)
		if err != nil {
			t.Fatal(err)
		}
		digest := signingDigest(hrp, words)
		compact := ecdsa.SignCompact(priv, digest[:], true)
		sig := append(append([]byte(nil), compact[1:]...), compact[0]-31)
		s, err := bech32.Encode(hrp, append(words, bytesToWords(sig)...))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	d, err := r.ParseDestination(sign(0, 1))
	if err != nil || !d.Expired(1_700_000_000_000) {
		t.Fatalf("an invoice that expired at 1 s: %+v, %v", d, err)
	}
	d, err = r.ParseDestination(sign(0, 0))
	if err == nil && !d.Expired(1_700_000_000_000) {
		t.Fatalf("an invoice that expired at the epoch is accepted and never expires: ExpiresAtMs %d", d.ExpiresAtMs)
	}
	if err != nil && !errors.Is(err, ErrInvoiceExpired) {
		t.Fatalf("refused with %v, want ErrInvoiceExpired", err)
	}
}
