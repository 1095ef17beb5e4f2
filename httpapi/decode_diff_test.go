package httpapi

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// The single-pass decoder must answer exactly as the reflective one it
// replaced (decode_ref_test.go): the same verdict, the same decoded value
// and the same error message, for every request type the API decodes.

// diffTarget is a type the differential tests decode into.
type diffTarget struct {
	name   string
	new    func() any
	bodies []string // valid (or nearly valid) bodies to start from
}

var diffTargets = []diffTarget{
	{"OrderRequest", func() any { return new(OrderRequest) }, []string{
		`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}`,
		`{"marketId":"ETH-PERP","side":"sell","type":"limit","contracts":"25","reduceOnly":true,"limitPriceQ8":"350000000000","maxSlippageQ9":"5000000"}`,
		`{"marketId":"BTC-PERP","side":"sell","type":"stop_market","contracts":"3","reduceOnly":true,"triggerPriceQ8":"6000000000000"}`,
		`{"marketId":"BTC-PERP","side":"buy","type":"take_profit_market","contracts":"3","reduceOnly":true,"triggerPriceQ8":"7000000000000","maxSlippageQ9":"0"}`,
		`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"2","reduceOnly":false,"trigger":{"kind":"entry","level":"6500000000000"}}`,
		`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"2","reduceOnly":false,"bracket":{"entryKind":"trigger","entryLevel":"1","stopLevel":"2","takeProfitLevel":"3","stopContracts":"1","takeProfitContracts":"1"}}`,
		`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"2","reduceOnly":false,"bracket":{"entryKind":"market","stopLevel":"2"},"trigger":null}`,
		`{"m\u0061rketId":"BTC\u002dPERP","side":"b\u0075y","type":"market","contracts":"9223372036854775807","reduceOnly":false}`,
		`{"marketId":"\ud83d\ude00\u00e9caf` + "\xc3\xa9" + `","side":"sell","type":"market","contracts":"1","reduceOnly":true}`,
		`{"marketId":"\ud800x","side":"sell","type":"market","contracts":"1","reduceOnly":true,"leverage":null}`,
		`{"side":"hold","marketId":"A","side":"buy","type":"market","contracts":"1","reduceOnly":false,"contracts":"7"}`,
		`{"marketId":"A","side":"buy","type":"market","contracts":"1","reduceOnly":false,"side":null}`,
		` ` + "\n\t" + `{ "marketId" : "A" , "side" : "buy" , "type" : "market" , "contracts" : "-0" , "reduceOnly" : false }` + "\r\n",
		`{"marketId":"A","side":"buy","type":"market","contracts":"1","reduceOnly":false,"trigger":{"kind":"stop","level":"1","junk":[{"a":[1,2,{"b":null}]}]}}`,
		`{"zeta":1,"alpha":[],"\u00e9":{},"marketId":"A"}`,
		`{"marketId":"A","side":"buy","type":"market","contracts":1e400,"reduceOnly":false}`,
		`{"marketId":"A","side":"buy","type":"market","contracts":"00012","reduceOnly":"false"}`,
		`{"marketId":"` + strings.Repeat("x", 32) + `","side":"buy","type":"market","contracts":"1","reduceOnly":false}`,
		`{"marketId":"` + strings.Repeat("\\u00e9", 17) + `","side":"buy","type":"market","contracts":"1","reduceOnly":false}`,
		// Repeated names: refused after unknown names, before any value,
		// and in a nested object only when that object is read.
		`{"marketId":"A","side":"buy","type":"market","contracts":"1","reduceOnly":false,"contracts":"x","zz":1}`,
		`{"marketId":"A","marketId":1,"side":"hold"}`,
		`{"marketId":"A","side":"buy","type":"market","contracts":"1","reduceOnly":false,"trigger":{"kind":"stop","kind":"entry","level":"1"}}`,
		`{"marketId":"A","side":"hold","type":"market","contracts":"1","reduceOnly":false,"trigger":{"level":"1","level":"2"}}`,
		`{"marketId":"A","side":"buy","type":"market","contracts":"1","reduceOnly":false,"bracket":{"entryKind":"market","\u0065ntryKind":"trigger"}}`,
	}},
	{"decodeProbe", func() any { return new(decodeProbe) }, []string{
		`{"amount":"0012","side":"sell","flag":false,"count":9007199254740991,"scopes":["trade"],"label":"abcd","nested":{"level":"7"},"levels":[{"level":"1"}]}`,
		`{"amount":"1","count":-0,"scopes":[],"levels":[]}`,
		`{"amount":"1","scopes":[null,"read"],"levels":[null]}`,
		`{"amount":"1","count":1.0,"label":"caf\u00e9"}`,
		`{"amount":"1","levels":[{"level":"1"},{"level":"1","level":"1"}]}`,
		`{"amount":"1","nested":{"level":"1","level":"1"},"label":"toolong"}`,
	}},
	{"exoticProbe", func() any { return new(exoticProbe) }, []string{
		`{"u":7,"f":1.5e3,"raw":"AQID","m":{"a":1},"named":"a","text":"ok","small":-5,"i":3,"flags":[true,null,false],"ints":[1,-2,null],"grid":[["x"],null,[]],"ptrs":[{"level":"1"},null],"inner":{"level":"2"},"body":{"x":"1"},"any":[1,"a",{}],"ws":["1","2"],"strs":["a"],"dup":"d","unm":{"whatever":[1]},"typed":2,"self":[{"i":1,"self":[{"u":1}]}]}`,
		`{"text":"!no","small":200,"ints":[40000],"grid":["x"],"ws":[null],"unm":"str","body":{"y":1}}`,
		`{"inner":null,"named":"c","raw":"!!","f":"1"}`,
		`{"m":{"a":1,"a":2}}`, `{"m":{"a":"x","a":1}}`, `{"any":[{"x":{"y":1,"y":2}},{"q":1,"q":1}]}`,
		`{"any":{"a":1,"b":{"a":1}}}`, `{"unm":{"k":1,"k":[{"j":1,"j":2}]}}`, `{"unm":[{"j":1,"j":2}]}`,
		`{"self":[{"any":{"\u0061":1,"a":2}}]}`, "{\"any\":{\"\xff\":1,\"\xfe\":2}}", `{"ptrs":[{"level":"1","level":"1"}]}`,
		`{"body":{"x":"1","x":"2"}}`, `{"typed":1,"any":{"a":[],"a":{}},"typed":2}`,
	}},
	{"Empty", func() any { return new(Empty) }, []string{``, `{}`, "\v", "\u00a0", ` {} `, `{"a":1}`, `null`}},
	{"MintRequest", func() any { return new(MintRequest) }, []string{`{"label":"bot","scopes":["read","trade","withdraw","admin-sessions"]}`, `{"scopes":["read","read","read","read","read"]}`}},
	{"RevokeRequest", func() any { return new(RevokeRequest) }, []string{`{"keyId":"k1","allButCurrent":true}`}},
	{"PageQuery", func() any { return new(PageQuery) }, []string{`{"limit":"50","beforeSeq":"10"}`, `{"limit":"201"}`}},
	{"CancelAllAfterRequest", func() any { return new(CancelAllAfterRequest) }, []string{`{"timeoutMs":"60000"}`, `{"timeoutMs":"86400001"}`}},
	{"ReferralCodeRequest", func() any { return new(ReferralCodeRequest) }, []string{`{"code":"ABCD1234"}`}},
	{"ReferralBindRequest", func() any { return new(ReferralBindRequest) }, []string{`{"code":"ABCD"}`}},
	{"LeaderboardQuery", func() any { return new(LeaderboardQuery) }, []string{`{"board":"pnl","window":"7d","limit":"10"}`}},
	{"LeaderboardSettingsRequest", func() any { return new(LeaderboardSettingsRequest) }, []string{`{"optedOut":false,"displayName":"Satoshi N"}`, `{"displayName":null}`}},
	{"PromoterApplyRequest", func() any { return new(PromoterApplyRequest) }, []string{
		`{"displayName":"Ann","channels":[{"kind":"x","url":"https://x.com/a","audience":"12k"},{"kind":"other","url":"u","audience":"a"}],"plan":"post","jurisdictions":["DE","FR"],"acceptedTermsVersion":"2026-11"}`,
		`{"displayName":"Ann","channels":[{"kind":"x","url":"u"}],"plan":"p","jurisdictions":[null],"acceptedTermsVersion":"v"}`,
	}},
	{"PromoterCodeRequest", func() any { return new(PromoterCodeRequest) }, []string{`{"code":"ANN1","label":"main","kickbackQ9":"100000000"}`}},
	{"PromoterStatsQuery", func() any { return new(PromoterStatsQuery) }, []string{`{"days":"30"}`}},
	{"CandlesQuery", func() any { return new(CandlesQuery) }, []string{`{"interval":"60","limit":"96"}`}},
	{"OrdersQuery", func() any { return new(OrdersQuery) }, []string{`{"state":"resting","status":"filled","limit":"5","beforeSeq":"2"}`}},
	{"PorProofQuery", func() any { return new(PorProofQuery) }, []string{`{"asset":"usdx"}`}},
	{"DepositInvoiceRequest", func() any { return new(DepositInvoiceRequest) }, []string{`{"amountMsat":"1000","expirySeconds":3600,"memo":"hi"}`}},
	{"QuoteRequest", func() any { return new(QuoteRequest) }, []string{`{"invoice":"lnbc1","amountMsat":"5"}`}},
	{"WithdrawRequest", func() any { return new(WithdrawRequest) }, []string{`{"amountMsat":"1000","toAddress":"sp1q","confirmToken":"tok"}`}},
	{"USDxQuoteRequest", func() any { return new(USDxQuoteRequest) }, []string{`{"side":"mint","usdx":"100"}`}},
	{"USDxMintRequest", func() any { return new(USDxMintRequest) }, []string{`{"quoteId":"q-1"}`}},
	{"USDxAmountRequest", func() any { return new(USDxAmountRequest) }, []string{`{"usdx":"5"}`}},
	{"USDxUnstakeRequest", func() any { return new(USDxUnstakeRequest) }, []string{`{"susdx":"5"}`}},
	{"USDxWithdrawRequest", func() any { return new(USDxWithdrawRequest) }, []string{`{"usdx":"5","sparkAddress":"sp1q"}`}},
	{"USDxHistoryQuery", func() any { return new(USDxHistoryQuery) }, []string{`{"limit":"1","beforeTsMs":"2"}`}},
	// Bodies that are not structs: no route has one, but decodeJSON
	// takes any pointer.
	{"[]string", func() any { return new([]string) }, []string{`["a",null]`, `null`, `"a"`, `["a",{"b":1,"b":2}]`}},
	{"string", func() any { return new(string) }, []string{`"a"`, `1`}},
	{"wire.Int", func() any { return new(wire.Int) }, []string{`"1"`, ` "2" `}},
}

// exoticProbe has fields of the kinds no request uses today, which the
// decoder hands to encoding/json or reads generically.
type exoticProbe struct {
	U     *uint64        `json:"u" min:"1" max:"5"`
	F     *float64       `json:"f"`
	Raw   []byte         `json:"raw" maxLen:"2"`
	M     map[string]int `json:"m"`
	Named *probeName     `json:"named" enum:"a,b"`
	Text  *textProbe     `json:"text" maxLen:"3"`
	Small *int8          `json:"small" min:"-5"`
	I     int            `json:"i"`
	Flags []bool         `json:"flags"`
	Ints  []int16        `json:"ints" maxLen:"3"`
	Grid  [][]string     `json:"grid" enum:"x"`
	Ptrs  []*nestedProbe `json:"ptrs"`
	Inner nestedProbe    `json:"inner"`
	Body  *bodyProbe     `json:"body"`
	Any   any            `json:"any"`
	Ws    []wire.Int     `json:"ws" min:"1" maxLen:"2"`
	Strs  *[]string      `json:"strs" maxLen:"2" enum:"a,b"`
	Dup   *string        `json:"dup" maxLen:"1"`
	Unm   *unmProbe      `json:"unm"`
	Typed *typedInt      `json:"typed" max:"3"`
	Self  []exoticProbe  `json:"self"`
	Skip  string         `json:"-"`
}

type probeName string

type typedInt int32

type textProbe string

func (p *textProbe) UnmarshalText(b []byte) error {
	if len(b) > 0 && b[0] == '!' {
		return errors.New("bang")
	}
	*p = textProbe(b)
	return nil
}

type bodyProbe struct {
	X *wire.Int `json:"x" req:"true"`
}

type unmProbe struct{ raw string }

func (u *unmProbe) UnmarshalJSON(b []byte) error {
	if b[0] == '"' {
		return errors.New("no strings")
	}
	u.raw = string(b)
	return nil
}

// sameAsReference decodes b into target k with both decoders and reports
// any difference.
func sameAsReference(k int, b []byte) error {
	tg := diffTargets[k]
	got, want := tg.new(), tg.new()
	err := decodeJSON(b, got)
	werr := refDecodeJSON(b, want)
	switch {
	case (err == nil) != (werr == nil):
		return fmt.Errorf("%s %q: got %v, reference %v", tg.name, b, err, werr)
	case err != nil:
		var de, wde *decodeError
		if err.Error() != werr.Error() || !errors.As(err, &de) || !errors.As(werr, &wde) {
			return fmt.Errorf("%s %q: got %q, reference %q", tg.name, b, err, werr)
		}
	case !reflect.DeepEqual(got, want):
		return fmt.Errorf("%s %q: decoded %#v, reference %#v", tg.name, b, got, want)
	}
	return nil
}

func FuzzDecodeMatchesReference(f *testing.F) {
	for k, tg := range diffTargets {
		for _, b := range tg.bodies {
			f.Add(uint8(k), []byte(b))
		}
		rng := rand.New(rand.NewPCG(uint64(k), 7))
		for range 4 {
			g := gen{rng: rng, clean: rng.IntN(2) == 0}
			f.Add(uint8(k), []byte(g.body(reflect.TypeOf(tg.new()).Elem(), 0)))
		}
	}
	for _, b := range junkBodies {
		f.Add(uint8(0), []byte(b))
	}
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		if err := sameAsReference(int(k)%len(diffTargets), b); err != nil {
			t.Fatal(err)
		}
	})
}

// junkBodies are documents every target is tried with.
var junkBodies = []string{
	``, ` `, "\v", "\u00a0", "\ufeff{}", `{}`, `null`, `[]`, `"x"`, `1`, `true`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`,
	`{,}`, `{"a":1 "b":2}`, `{"a":1}x`, `{} {}`, `{}]`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`,
	`{"a":tru}`, `{"a":nul}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}",
	`{"a":[1,]}`, `{"a":[,1]}`, `{"a":{"b":1,}}`, `{"a\ud800":1}`, "{\"\xff\":1,\"\xfe\":2}", `{"":1}`, `{"b":1,"a":2,"a":3}`,
	`{"a":[[[[[[[[[[]]]]]]]]]]}`, `{"a":"\/\b\f\n\r\t\\\""}`, `{"a":1E+2,"b":-0.0e-0}`,
}

// TestDecodeMatchesReferenceCorpus tries every body on every target.
func TestDecodeMatchesReferenceCorpus(t *testing.T) {
	var all []string
	for _, tg := range diffTargets {
		all = append(all, tg.bodies...)
	}
	all = append(all, junkBodies...)
	for k := range diffTargets {
		for _, b := range all {
			if err := sameAsReference(k, []byte(b)); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestDecodeMatchesReferenceGenerated tries bodies generated from each
// target's fields and tags (values near every bound, wrong types, nulls,
// repeats, unknown names, escapes), and byte-level mutations of them.
func TestDecodeMatchesReferenceGenerated(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 50
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k, tg := range diffTargets {
		typ := reflect.TypeOf(tg.new()).Elem()
		seeds := append([]string(nil), tg.bodies...)
		accepted := 0
		for range n {
			g := gen{rng: rng, clean: rng.IntN(2) == 0}
			b := g.body(typ, 0)
			if err := sameAsReference(k, []byte(b)); err != nil {
				t.Fatal(err)
			}
			if decodeJSON([]byte(b), tg.new()) == nil {
				accepted++
			}
			seeds = append(seeds, b)
		}
		// The generator must reach the accepting paths too, not only
		// the refusals.
		if tg.name == "OrderRequest" && accepted < n/20 {
			t.Errorf("%s: only %d of %d generated bodies accepted", tg.name, accepted, n)
		}
		t.Logf("%s: %d of %d generated bodies accepted", tg.name, accepted, n)
		for range 4 * n {
			b := mutate(rng, seeds[rng.IntN(len(seeds))])
			if err := sameAsReference(k, []byte(b)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestDecodeNestingLimit: as deep as encoding/json allows, and one deeper.
func TestDecodeNestingLimit(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		// The body object is one level; the value of "a" adds the rest.
		inner := depth - 1
		b := `{"a":` + strings.Repeat("[", inner) + strings.Repeat("]", inner) + `}`
		if err := sameAsReference(0, []byte(b)); err != nil {
			t.Fatal(err)
		}
		var r OrderRequest
		err := decodeJSON([]byte(b), &r)
		want := "field a: is not a field of this request"
		if depth > maxNestingDepth {
			want = "field body: must be a JSON object"
		}
		if err == nil || err.Error() != want {
			t.Fatalf("depth %d: %v, want %s", depth, err, want)
		}
	}
}

// gen writes JSON bodies for a type from its fields and tags. A clean
// body is one the decoder should accept, give or take a bound; otherwise
// values are around every bound and of every wrong kind, with nulls,
// repeats and unknown names.
type gen struct {
	rng   *rand.Rand
	clean bool
}

// odds: one time in n, never for a clean body.
func (g gen) odds(n int) bool { return !g.clean && g.rng.IntN(n) == 0 }

func (g gen) body(t reflect.Type, depth int) string {
	rng := g.rng
	if t.Kind() != reflect.Struct || !isPlainStruct(t) {
		return g.value(t, "", depth)
	}
	if depth > 3 || g.odds(40) {
		return pick(rng, `null`, `{}`, `[]`, `"x"`, `1`)
	}
	var members []string
	for _, wf := range wireFields(t) {
		if wf.Name == "self" && depth > 0 {
			continue
		}
		required := wf.Field.Tag.Get("req") == "true"
		if g.odds(8) || g.clean && !required && rng.IntN(3) == 0 {
			continue // absent
		}
		name := strconv.Quote(wf.Name)
		if rng.IntN(30) == 0 {
			name = `"\u` + fmt.Sprintf("%04x", wf.Name[0]) + wf.Name[1:] + `"`
		}
		v := g.value(wf.Type, string(wf.Field.Tag), depth)
		if g.odds(15) || g.clean && !required && rng.IntN(10) == 0 {
			v = `null`
		}
		member := space(rng) + name + space(rng) + ":" + space(rng) + v + space(rng)
		if !g.clean && rng.IntN(20) == 0 { // a repeat: refused
			other := name + ":" + g.value(wf.Type, string(wf.Field.Tag), depth)
			if rng.IntN(2) == 0 {
				members = append(members, other+","+member)
				continue
			}
			members = append(members, other)
		}
		members = append(members, member)
	}
	if g.odds(12) {
		members = append(members, pick(rng, `"leverage":1`, `"zz":null`, `"Side":"buy"`, `"a":{"b":[1]}`, `"\u00e9":0`, `"":1`))
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return space(rng) + "{" + strings.Join(members, ",") + "}" + space(rng)
}

func (g gen) value(t reflect.Type, tag string, depth int) string {
	rng := g.rng
	st := reflect.StructTag(tag)
	if g.odds(25) {
		return pick(rng, `null`, `{}`, `[]`, `"x"`, `1`, `true`, `-1.5e3`, `""`, `{"a":1}`, `[null]`)
	}
	switch {
	case t == intType:
		if n, ok := g.bounded(st); ok {
			return `"` + strconv.FormatInt(n, 10) + `"`
		}
		if g.clean {
			return pick(rng, `"1"`, `"42"`, `"9223372036854775807"`, `"-9223372036854775808"`, `"007"`, `"-0"`, `"100000"`)
		}
		return pick(rng, `"1"`, `"0"`, `"-1"`, `"42"`, `"9223372036854775807"`, `"9223372036854775808"`,
			`"-9223372036854775808"`, `"-9223372036854775809"`, `"007"`, `"-0"`, `" 1"`, `"1 "`, `"+1"`, `"1.0"`, `"1e3"`,
			`""`, `"-"`, `1`, `"\u0031"`, `null`)
	case t.Kind() == reflect.Pointer:
		return g.value(t.Elem(), tag, depth)
	case isPlainStruct(t):
		return g.body(t, depth+1)
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		limit := 3
		if m, err := strconv.Atoi(st.Get("maxLen")); err == nil {
			limit = m + 1
			if g.clean {
				limit = m
			}
		}
		if limit > 12 {
			limit = 4
		}
		items := make([]string, rng.IntN(limit+1))
		for i := range items {
			if g.odds(20) {
				items[i] = `null`
				continue
			}
			elemTag := ""
			if e := st.Get("enum"); e != "" {
				elemTag = `enum:"` + e + `"`
			}
			items[i] = g.value(t.Elem(), elemTag, depth+1)
		}
		return "[" + space(rng) + strings.Join(items, ","+space(rng)) + "]"
	case t.Kind() == reflect.String:
		if e := st.Get("enum"); e != "" && (g.clean || rng.IntN(3) > 0) {
			vals := strings.Split(e, ",")
			v := vals[rng.IntN(len(vals))]
			if rng.IntN(6) == 0 {
				v = `\u` + fmt.Sprintf("%04x", v[0]) + v[1:]
			}
			return `"` + v + `"`
		}
		if m, err := strconv.Atoi(st.Get("maxLen")); err == nil && rng.IntN(3) == 0 {
			n := m + rng.IntN(3) - 1
			if g.clean {
				n = rng.IntN(m + 1)
			}
			if rng.IntN(3) == 0 {
				return `"` + strings.Repeat("é", n/2) + `"`
			}
			return `"` + strings.Repeat("a", n) + `"`
		}
		if g.clean {
			return pick(rng, `"BTC-PERP"`, `""`, `"caf\u00e9"`, "\"caf\xc3\xa9\"", "\"b\xff\"", `"\ud83d\ude00"`, `"\ud800"`,
				`"a\"b"`, `"\t"`, `"x"`, `"DE"`)
		}
		return pick(rng, `"BTC-PERP"`, `""`, `"caf\u00e9"`, "\"caf\xc3\xa9\"", "\"bad\xff\xfe\"", `"\ud83d\ude00"`,
			`"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\ud83d\\ude00"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u0000"`,
			"\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", `"buy"`, `"sell"`, `"market"`, `"read"`, `"x"`, `"60"`, `"a"`, `"d"`, `"!no"`,
			`1`, `true`)
	case t.Kind() == reflect.Bool:
		if g.clean {
			return pick(rng, `true`, `false`)
		}
		return pick(rng, `true`, `false`, `"true"`, `0`, `null`)
	case t.Kind() == reflect.Float64:
		if g.clean {
			return pick(rng, `1.5`, `-0`, `2E-3`)
		}
		return pick(rng, `1.5`, `-0`, `1e400`, `"1"`, `2E-3`)
	}
	if isIntKind(t.Kind()) || t.Kind() == reflect.Uint64 {
		if n, ok := g.bounded(st); ok {
			return strconv.FormatInt(n, 10)
		}
		if g.clean {
			return pick(rng, `1`, `3`, `0`)
		}
		return pick(rng, `0`, `1`, `-1`, `3`, `127`, `128`, `-129`, `40000`, `2147483648`, `9007199254740992`,
			`9223372036854775807`, `9223372036854775808`, `18446744073709551616`, `1.5`, `1.0`, `1e3`, `-0`, `"3"`)
	}
	if g.clean {
		if t.Kind() == reflect.Slice {
			return pick(rng, `"AQ=="`, `""`)
		}
		return pick(rng, `{"a":1}`, `{}`)
	}
	return pick(rng, `"AQID"`, `"!!"`, `{"a":1}`, `[1,2]`, `1`, `"s"`, `null`)
}

// bounded picks an integer at or next to a min or max tag: inside them
// for a clean body.
func (g gen) bounded(st reflect.StructTag) (int64, bool) {
	lo, errLo := strconv.ParseInt(st.Get("min"), 10, 64)
	hi, errHi := strconv.ParseInt(st.Get("max"), 10, 64)
	if errLo != nil && errHi != nil || g.rng.IntN(3) == 0 {
		return 0, false
	}
	if g.clean {
		if errLo != nil {
			lo = hi - 100
		}
		if errHi != nil {
			hi = lo + 100
		}
		return lo + g.rng.Int64N(min(hi-lo, 1000)+1), true
	}
	n := lo
	if errLo != nil || errHi == nil && g.rng.IntN(2) == 0 {
		n = hi
	}
	return n + int64(g.rng.IntN(3)) - 1, true
}

func pick(rng *rand.Rand, options ...string) string { return options[rng.IntN(len(options))] }

func space(rng *rand.Rand) string {
	if rng.IntN(6) > 0 {
		return ""
	}
	return pick(rng, " ", "\n", "\t", "\r", "  \n ")
}

// mutate damages a body a little: a byte changed, a token inserted, a
// range deleted or repeated.
func mutate(rng *rand.Rand, s string) string {
	tokens := []string{`null`, `"`, `\`, `\u`, `\ud800`, `\udc00`, `{`, `}`, `[`, `]`, `,`, `:`, ` `, "\t", `1e400`, `-0`,
		`"x"`, `\u0000`, `true`, `0`, `-`, `9223372036854775808`, "\xff", "\xc3", "é", `""`, `{"a":1}`, `[null]`, `\"`, "\x00"}
	b := []byte(s)
	for range 1 + rng.IntN(3) {
		if len(b) == 0 {
			b = append(b, tokens[rng.IntN(len(tokens))]...)
			continue
		}
		i := rng.IntN(len(b))
		j := i + rng.IntN(min(len(b)-i, 12)+1)
		switch rng.IntN(4) {
		case 0:
			b[i] = byte(rng.IntN(256))
		case 1:
			b = append(b[:i], append([]byte(tokens[rng.IntN(len(tokens))]), b[i:]...)...)
		case 2:
			b = append(b[:i], b[j:]...)
		case 3:
			b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
		}
	}
	return string(b)
}
