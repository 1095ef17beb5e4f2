package fsm

import (
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// The fast decoders (fastdecode.go) must give Unmarshal's value for every
// input they take, and take what Marshal writes for every field they know.

func fastCommand(b []byte, c *Command) bool      { return decodeCommandFast(b, c, false, nil) }
func fastCommandAlias(b []byte, c *Command) bool { return decodeCommandFast(b, c, true, nil) }
func fastCommandKnown(b []byte, c *Command) bool { return decodeCommandFast(b, c, true, knownAccess) }

// knownAccess holds the account and key ids the tests' commands carry
// (filled's Account and KeyID, the mutations' acc_1 and key_1), and an entry
// whose id differs from its map key, which must not be taken for it.
var knownAccess = &access.State{
	Accounts: map[string]*access.Account{"field-c-é": {ID: "field-c-é"}, "acc_1": {ID: "acc_1"}, "a": {ID: "b"}},
	Keys:     map[string]*access.Key{"field-d-é": {ID: "field-d-é"}, "key_1": {ID: "key_1"}, "a": {ID: "b"}},
}

func fastPlace(b []byte, p *trade.PlaceRequest) bool { return decodePlaceFast(b, p) }
func fastGroup(b []byte, g *GroupPayload) bool       { return decodeGroupFast(b, g) }
func fastPlaceShared(b []byte, p *trade.PlaceRequest) bool {
	return decodePlaceShared(b, p, knownIdemKey, knownMarkets)
}

// knownIdemKey ends with the mutations' order id (m1), not with filled's,
// so both ways of decoding an order id are taken; knownMarkets holds both
// their market ids, and an entry whose id differs from its map key, which
// must not be taken for it.
const knownIdemKey = "acct:acc_1:m1"

var knownMarkets = &market.State{MarketsByID: map[string]*market.MarketState{
	"field-b-é": {Params: market.Params{MarketID: "field-b-é"}},
	"BTC-PERP":  {Params: market.Params{MarketID: "BTC-PERP"}},
	"a":         {Params: market.Params{MarketID: "b"}},
}}

// sameAsUnmarshal decodes b with fast; when it takes b, Unmarshal must
// take it too and decode the same value (nil and empty told apart).
func sameAsUnmarshal[T any](t *testing.T, b []byte, fast func([]byte, *T) bool) bool {
	t.Helper()
	var got, want T
	if !fast(b, &got) {
		return false
	}
	if err := Unmarshal(b, &want); err != nil {
		t.Fatalf("fast path took % x, Unmarshal refuses it: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("% x: fast path %#v, Unmarshal %#v", b, got, want)
	}
	return true
}

// filled returns a T with every field set to a distinct non-zero value
// (negative integers on odd fields), so a field the fast path misreads
// or misnumbers shows.
func filled[T any](t *testing.T) T {
	var v T
	rv := reflect.ValueOf(&v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		n := int64(i+1) * 1_000_003
		switch f.Kind() {
		case reflect.String:
			f.SetString("field-" + string(rune('a'+i)) + "-é")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			if i%2 == 1 {
				n = -n
			}
			f.SetInt(n)
		case reflect.Uint16:
			f.SetUint(uint64(i + 300))
		case reflect.Slice:
			f.SetBytes([]byte{byte(i), 0, 0xff})
		case reflect.Pointer:
			// left nil: the fast path leaves a bracket to Unmarshal
		default:
			t.Fatalf("filled: field %s of kind %s", rv.Type().Field(i).Name, f.Kind())
		}
	}
	return v
}

// TestFastDecodeTakesWhatMarshalWrites: every field the types have today,
// at its extremes too, goes through the fast path and comes back equal.
// A field added to Command or PlaceRequest fails here until the fast path
// learns it (until then it would only be slow, never wrong).
func TestFastDecodeTakesWhatMarshalWrites(t *testing.T) {
	cmds := []Command{filled[Command](t), {}, {Type: math.MaxUint16, TsMs: math.MinInt64, ReqHash: []byte{}},
		{TsMs: math.MaxInt64, Account: "a", Payload: make([]byte, 70_000)}}
	for _, c := range cmds {
		b := mustMarshal(t, c)
		if !sameAsUnmarshal(t, b, fastCommand) || !sameAsUnmarshal(t, b, fastCommandAlias) || !sameAsUnmarshal(t, b, fastCommandKnown) {
			t.Fatalf("fast path declined %+v", c)
		}
	}
	// Empty values, which Marshal omits but the fast path takes: Unmarshal
	// makes an empty byte string a non-nil empty slice.
	empties := []byte{0xa4, 0x03, 0x60, 0x05, 0x60, 0x06, 0x40, 0x07, 0x40}
	if !sameAsUnmarshal(t, empties, fastCommand) || !sameAsUnmarshal(t, empties, fastCommandAlias) {
		t.Fatal("fast path declined explicit empty values")
	}
	places := []trade.PlaceRequest{filled[trade.PlaceRequest](t), {},
		{OrderID: "o", Side: "sell", Type: "limit", Contracts: math.MaxInt64, LimitPriceQ8: math.MinInt64}}
	for _, p := range places {
		if !sameAsUnmarshal(t, mustMarshal(t, p), fastPlace) || !sameAsUnmarshal(t, mustMarshal(t, p), fastPlaceShared) {
			t.Fatalf("fast path declined %+v", p)
		}
	}
	g := GroupPayload{Cmds: [][]byte{mustMarshal(t, cmds[0]), {}, mustMarshal(t, cmds[2])}}
	if !sameAsUnmarshal(t, mustMarshal(t, g), fastGroup) {
		t.Fatal("fast path declined a group")
	}
}

// TestFastDecodeLeavesTheRestToUnmarshal: what is not the canonical form
// of a field the fast path knows is declined, whatever Unmarshal makes of it.
func TestFastDecodeLeavesTheRestToUnmarshal(t *testing.T) {
	bracket := mustMarshal(t, trade.PlaceRequest{OrderID: "o", Bracket: &trade.BracketRequest{}})
	for name, b := range map[string][]byte{
		"a bracket":            bracket,
		"an unknown key":       {0xa1, 0x0f, 0x01},
		"keys out of order":    {0xa2, 0x02, 0x01, 0x01, 0x01},
		"a repeated key":       {0xa2, 0x01, 0x01, 0x01, 0x02},
		"a long-form argument": {0xa1, 0x01, 0x18, 0x05},
		"an indefinite map":    {0xbf, 0x01, 0x01, 0xff},
		"a text key":           {0xa1, 0x61, 0x31, 0x01},
		"a tag":                {0xa1, 0x01, 0xc1, 0x01},
		"trailing bytes":       {0xa1, 0x01, 0x01, 0x00},
		"invalid UTF-8":        {0xa1, 0x03, 0x61, 0xff},
		"a type too wide":      {0xa1, 0x01, 0x1a, 0x00, 0x01, 0x00, 0x00},
		"an int64 overflow":    {0xa1, 0x02, 0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0},
		"a text for bytes":     {0xa1, 0x06, 0x61, 0x61},
		"null":                 {0xa1, 0x03, 0xf6},
		"truncated":            {0xa1, 0x03, 0x62, 0x61},
	} {
		var c Command
		var p trade.PlaceRequest
		var g GroupPayload
		if decodeCommandFast(b, &c, false, nil) || decodePlaceFast(b, &p) || fastPlaceShared(b, &p) || decodeGroupFast(b, &g) {
			t.Errorf("fast path took %s (% x)", name, b)
		}
	}
	for _, n := range []int{0, GroupMax + 1} {
		var g GroupPayload
		if decodeGroupFast(mustMarshal(t, GroupPayload{Cmds: make([][]byte, n)}), &g) {
			t.Errorf("fast path took a group of %d", n)
		}
	}
}

// TestFastDecodeAgreesOnMutations: every one-byte change and every
// truncation of real entries decodes the same on both paths, or is
// declined by the fast one.
func TestFastDecodeAgreesOnMutations(t *testing.T) {
	place := mustMarshal(t, trade.PlaceRequest{OrderID: "m1", MarketID: "BTC-PERP", Side: "buy", Type: "market",
		Contracts: 1000, HasMaxSlippage: true, MaxSlippageQ9: 5_000_000, Leverage: 3})
	cmd := mustMarshal(t, Command{Type: CmdPlaceOrder, TsMs: 1_700_000_000_000, Account: "acc_1", KeyID: "key_1",
		IdemKey: "acct:acc_1:m1", ReqHash: []byte{1, 2, 3}, Payload: place})
	group := mustMarshal(t, GroupPayload{Cmds: [][]byte{cmd, cmd[:10]}})
	check := func(b []byte) {
		sameAsUnmarshal(t, b, fastCommand)
		sameAsUnmarshal(t, b, fastCommandKnown)
		sameAsUnmarshal(t, b, fastPlace)
		sameAsUnmarshal(t, b, fastPlaceShared)
		sameAsUnmarshal(t, b, fastGroup)
	}
	for _, in := range [][]byte{place, cmd, group} {
		for i := range in {
			check(in[:i])
			for _, v := range []byte{0x00, 0x01, 0x17, 0x18, 0x1f, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xf4, 0xf5, 0xf6, 0xff, in[i] + 1, in[i] - 1} {
				m := append([]byte(nil), in...)
				m[i] = v
				check(m)
			}
		}
	}
}

func marshalTB(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func FuzzFastDecode(f *testing.F) {
	f.Add(marshalTB(f, Command{Type: CmdPlaceOrder, TsMs: -5, Account: "a", ReqHash: []byte{1}, Payload: []byte{0xa0}}))
	f.Add(marshalTB(f, trade.PlaceRequest{OrderID: "x", Side: "sell", Type: "limit", LimitPriceQ8: 7, ReduceOnly: true}))
	f.Add(marshalTB(f, GroupPayload{Cmds: [][]byte{{0xa0}, {}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsUnmarshal(t, b, fastCommand)
		sameAsUnmarshal(t, b, fastCommandAlias)
		sameAsUnmarshal(t, b, fastCommandKnown)
		sameAsUnmarshal(t, b, fastPlace)
		sameAsUnmarshal(t, b, fastPlaceShared)
		sameAsUnmarshal(t, b, fastGroup)
	})
}

// TestFastDecodeSharesKnownIDs: an account or key id the state holds
// comes back as the state's own string (the command, and the orders and
// fills it leaves, share it); one it does not hold, or holds under
// another id, comes back as a string of its own with the entry's value.
func TestFastDecodeSharesKnownIDs(t *testing.T) {
	for _, tc := range []struct {
		account, key string
		shared       bool
	}{{"acc_1", "key_1", true}, {"acc_2", "key_2", false}, {"a", "a", false}} {
		var c Command
		if !fastCommandKnown(mustMarshal(t, Command{Type: CmdPlaceOrder, Account: tc.account, KeyID: tc.key}), &c) {
			t.Fatal("fast path declined a command")
		}
		if c.Account != tc.account || c.KeyID != tc.key {
			t.Fatalf("decoded %q/%q, want %q/%q", c.Account, c.KeyID, tc.account, tc.key)
		}
		sameAccount := tc.shared && unsafe.StringData(c.Account) == unsafe.StringData(knownAccess.Accounts[tc.account].ID)
		sameKey := tc.shared && unsafe.StringData(c.KeyID) == unsafe.StringData(knownAccess.Keys[tc.key].ID)
		if sameAccount != tc.shared || sameKey != tc.shared {
			t.Fatalf("%s/%s: shares the state's strings %v/%v, want %v", tc.account, tc.key, sameAccount, sameKey, tc.shared)
		}
	}
}

// TestFastDecodeSharesOrderAndMarketIDs: an order id that ends the
// command's idempotency key comes back as that key's tail, and a market id
// the state holds as the market's own string; anything else comes back as
// a string of its own with the entry's value.
func TestFastDecodeSharesOrderAndMarketIDs(t *testing.T) {
	const key = "acct:acc_1:m1"
	for _, tc := range []struct {
		order, market             string
		sharedOrder, sharedMarket bool
	}{{"m1", "BTC-PERP", true, true}, {"1", "ETH-PERP", true, false}, {"m2", "a", false, false},
		{"acct:acc_1:m1", "BTC-PERP", true, true}, {"x:acct:acc_1:m1", "b", false, false}} {
		var p trade.PlaceRequest
		if !decodePlaceShared(mustMarshal(t, trade.PlaceRequest{OrderID: tc.order, MarketID: tc.market}), &p, key, knownMarkets) {
			t.Fatal("fast path declined an order")
		}
		if p.OrderID != tc.order || p.MarketID != tc.market {
			t.Fatalf("decoded %q/%q, want %q/%q", p.OrderID, p.MarketID, tc.order, tc.market)
		}
		sameOrder := len(tc.order) <= len(key) && unsafe.StringData(p.OrderID) == unsafe.StringData(key[len(key)-len(tc.order):])
		m, ok := knownMarkets.MarketsByID[tc.market]
		sameMarket := ok && unsafe.StringData(p.MarketID) == unsafe.StringData(m.Params.MarketID)
		if sameOrder != tc.sharedOrder || sameMarket != tc.sharedMarket {
			t.Fatalf("%s/%s: shares %v/%v, want %v/%v", tc.order, tc.market, sameOrder, sameMarket, tc.sharedOrder, tc.sharedMarket)
		}
	}
}

// TestDecodeCommandInPlaceKeepsNothing: the machine decodes every entry
// into the same Command, so nothing of the previous one may survive, on
// the fast path or Unmarshal's.
func TestDecodeCommandInPlaceKeepsNothing(t *testing.T) {
	var c Command
	full := filled[Command](t)
	noop := Command{Type: CmdNoop, TsMs: 9}
	nonCanonical := []byte{0xbf, 0x01, 0x04, 0x02, 0x09, 0xff} // noop, as an indefinite map
	for _, b := range [][]byte{mustMarshal(t, noop), nonCanonical} {
		if err := decodeCommand(mustMarshal(t, full), &c, true, nil); err != nil || !reflect.DeepEqual(c, full) {
			t.Fatalf("decoded %+v (%v), want %+v", c, err, full)
		}
		if err := decodeCommand(b, &c, true, nil); err != nil || !reflect.DeepEqual(c, noop) {
			t.Fatalf("% x decoded over a full command: %+v (%v)", b, c, err)
		}
	}
}
