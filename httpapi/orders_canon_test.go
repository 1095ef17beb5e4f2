package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// checkCanonical fails when the fast form of r is not the bytes
// encoding/json writes, or is taken for an order it must leave alone.
func checkCanonical(t *testing.T, r OrderRequest) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := r.appendCanonicalJSON(nil)
	if !ok {
		if r.Trigger == nil && r.Bracket == nil && wire.PlainJSON(r.MarketID) && wire.PlainJSON(r.Side) && wire.PlainJSON(r.Type) {
			t.Fatalf("a plain order fell back to encoding/json: %s", want)
		}
		return
	}
	if r.Trigger != nil || r.Bracket != nil {
		t.Fatalf("an order with a trigger or bracket took the fast form: %s", got)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonical JSON differs:\n fast %s\n json %s", got, want)
	}
}

func TestOrderCanonicalJSONMatchesEncodingJSON(t *testing.T) {
	ip := func(v int64) *wire.Int { w := wire.Int(v); return &w }
	fixed := []OrderRequest{
		{MarketID: "BTC-PERP", Side: "buy", Type: "market", Contracts: 1, Leverage: ip(10)},
		{MarketID: "ETH-PERP", Side: "sell", Type: "limit", Contracts: 1 << 40, ReduceOnly: true,
			LimitPriceQ8: ip(340_000_000_000), MaxSlippageQ9: ip(0)},
		{MarketID: "", Side: "", Type: "", Contracts: math.MinInt64, TriggerPriceQ8: ip(math.MaxInt64)},
		{MarketID: "A<B", Side: "buy", Type: "market"},        // HTML escapes
		{MarketID: "a\"b\\c", Side: "buy", Type: "market"},    // quote and backslash
		{MarketID: "caf\u00e9\u2028", Side: "buy", Type: "x"}, // non-ASCII
		{MarketID: "bad\xffutf8", Side: "buy", Type: "x"},     // invalid UTF-8
		{MarketID: "tab\there", Side: "buy", Type: "x"},       // control
		{MarketID: "BTC-PERP", Side: "buy", Type: "market", Trigger: &OrderTrigger{Kind: "entry", Level: 5}},
		{MarketID: "BTC-PERP", Side: "buy", Type: "market", Bracket: &OrderBracket{EntryKind: "market"}},
	}
	for _, r := range fixed {
		checkCanonical(t, r)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "Z", "0", "-", "_", " ", "~", "<", ">", "&", "\"", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "\xff"}
	text := func() string {
		var b []byte
		for range rng.IntN(6) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		return string(b)
	}
	num := func() *wire.Int {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return ip(rng.Int64())
		case 2:
			return ip(-rng.Int64N(1000))
		default:
			return ip(rng.Int64N(100))
		}
	}
	for range 20_000 {
		r := OrderRequest{MarketID: text(), Side: text(), Type: text(), Contracts: wire.Int(rng.Int64() - math.MaxInt64/2),
			ReduceOnly: rng.IntN(2) == 0, LimitPriceQ8: num(), TriggerPriceQ8: num(), Leverage: num(), MaxSlippageQ9: num()}
		if rng.IntN(10) == 0 {
			r.Trigger = &OrderTrigger{Kind: text(), Level: wire.Int(rng.Int64())}
		}
		checkCanonical(t, r)
	}
}

func FuzzOrderCanonicalJSON(f *testing.F) {
	f.Add("BTC-PERP", "buy", "market", int64(1), true, int64(10))
	f.Add("A<B\xff", "s\"", "\u2028", int64(-5), false, int64(0))
	f.Fuzz(func(t *testing.T, market, side, typ string, contracts int64, reduce bool, lev int64) {
		l := wire.Int(lev)
		checkCanonical(t, OrderRequest{MarketID: market, Side: side, Type: typ, Contracts: wire.Int(contracts), ReduceOnly: reduce, Leverage: &l})
	})
}
