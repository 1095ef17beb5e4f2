package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// decodeProbe has one field of every kind the decoder handles.
type decodeProbe struct {
	Amount *wire.Int     `json:"amount" req:"true" unit:"msat" min:"1"`
	Side   *string       `json:"side" enum:"buy,sell"`
	Flag   *bool         `json:"flag"`
	Count  *int64        `json:"count" min:"1" max:"9007199254740991"`
	Scopes []string      `json:"scopes" enum:"read,trade" maxLen:"2"`
	Label  *string       `json:"label" maxLen:"4"`
	Nested *nestedProbe  `json:"nested"`
	Levels []nestedProbe `json:"levels"`
}

type nestedProbe struct {
	Level *wire.Int `json:"level" req:"true"`
}

func TestStrictDecodingRefusals(t *testing.T) {
	cases := []struct {
		body, field string
	}{
		{`{"amount": 5}`, "amount"},                     // JSON number where a string is required
		{`{"amount": "1.5"}`, "amount"},                 // fraction
		{`{"amount": "+1"}`, "amount"},                  // plus sign
		{`{"amount": "1e3"}`, "amount"},                 // exponent
		{`{"amount": " 1"}`, "amount"},                  // space
		{`{"amount": "1 "}`, "amount"},                  // trailing space
		{`{"amount": ""}`, "amount"},                    // empty
		{`{"amount": "-"}`, "amount"},                   // sign alone
		{`{"amount": "9223372036854775808"}`, "amount"}, // out of int64 range
		{`{"amount": "0"}`, "amount"},                   // below min
		{`{}`, "amount"},                                // missing required
		{`{"amount": null}`, "amount"},                  // null required
		{`{"amount": "1", "side": "hold"}`, "side"},     // unknown enum value
		{`{"amount": "1", "side": 1}`, "side"},          // wrong type
		{`{"amount": "1", "flag": "true"}`, "flag"},     // string for bool
		{`{"amount": "1", "count": 1.5}`, "count"},      // fraction for integer
		{`{"amount": "1", "count": "3"}`, "count"},      // string for integer
		{`{"amount": "1", "count": 0}`, "count"},        // below min
		{`{"amount": "1", "count": 9007199254740992}`, "count"},
		{`{"amount": "1", "scopes": ["read", "fly"]}`, "scopes[1]"},
		{`{"amount": "1", "scopes": "read"}`, "scopes"},
		{`{"amount": "1", "scopes": ["read","trade","read"]}`, "scopes"},
		{`{"amount": "1", "label": "toolong"}`, "label"},
		{`{"amount": "1", "nested": {}}`, "nested.level"},
		{`{"amount": "1", "nested": {"level": 3}}`, "nested.level"},
		{`{"amount": "1", "levels": [{"level": "1"}, {}]}`, "levels[1].level"},
		{`{"amount": "1", "leverage": "5"}`, "leverage"},
		{`{"amount": "1", "nested": {"level": 3, "lvl": 4}}`, "nested.lvl"},
		{`[]`, "body"},
		{`"x"`, "body"},
		{`{"amount": "1"`, "body"},
	}
	for _, c := range cases {
		var p decodeProbe
		err := decodeJSON([]byte(c.body), &p)
		if err == nil {
			t.Errorf("%s: accepted", c.body)
			continue
		}
		if !strings.Contains(err.Error(), "field "+c.field+":") {
			t.Errorf("%s: error %q does not name field %s", c.body, err, c.field)
		}
	}
}

func TestStrictDecodingAccepts(t *testing.T) {
	var p decodeProbe
	body := `{"amount":"0012","side":"sell","flag":false,"count":9007199254740991,"scopes":["trade"],
		"label":"abcd","nested":{"level":"7"},"levels":[{"level":"1"}]}`
	if err := decodeJSON([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if *p.Amount != 12 || *p.Side != "sell" || *p.Flag || *p.Count != 9007199254740991 ||
		p.Scopes[0] != "trade" || *p.Nested.Level != 7 || *p.Levels[0].Level != 1 {
		t.Fatalf("decoded %+v", p)
	}
	var empty Empty
	if err := decodeJSON(nil, &empty); err != nil {
		t.Fatalf("an empty body reads as {}: %v", err)
	}
}

// FuzzDecode: the strict decoder never panics, and whatever it accepts
// re-encodes to JSON that it accepts again with the same meaning.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"amount":"1"}`, `{"amount":"-9223372036854775808","side":"buy"}`,
		`{"amount":"1","levels":[{"level":"2"}]}`, `{`, `null`, `{"amount":1e400}`, `{"scopes":[null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p decodeProbe
		if err := decodeJSON(b, &p); err != nil {
			return
		}
		if p.Amount == nil || *p.Amount < 1 {
			t.Fatalf("accepted without a valid required amount: %s", b)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q decodeProbe
		if err := decodeJSON(again, &q); err != nil {
			t.Fatalf("re-encoded body refused: %s: %v", again, err)
		}
		if *q.Amount != *p.Amount {
			t.Fatalf("round trip changed amount")
		}
	})
}

// BenchmarkDecodeOrderRequest decodes the body of a market order with
// leverage, the hottest request of the venue.
func BenchmarkDecodeOrderRequest(b *testing.B) {
	body := []byte(`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}`)
	b.ReportAllocs()
	for b.Loop() {
		var req OrderRequest
		if err := decodeJSON(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBracketOrder decodes a market order with a bracket, the
// largest order body.
func BenchmarkDecodeBracketOrder(b *testing.B) {
	body := []byte(`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"2","reduceOnly":false,"leverage":"5",` +
		`"bracket":{"entryKind":"trigger","entryLevel":"6500000000000","stopLevel":"6000000000000","takeProfitLevel":"7000000000000"}}`)
	b.ReportAllocs()
	for b.Loop() {
		var req OrderRequest
		if err := decodeJSON(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// Strings read as encoding/json reads them: escapes resolved, control
// characters refused, invalid UTF-8 replaced.
func TestPlainStringAgreesWithEncodingJSON(t *testing.T) {
	for _, lit := range []string{`"BTC-PERP"`, `""`, `"caf\u00e9"`, `"a\"b"`, `"tab\there"`, "\"caf\xc3\xa9\"",
		"\"bad\xff\"", "\"ctl\x01\"", `"back\\slash"`, `"\ud83d\ude00"`} {
		var want string
		werr := json.Unmarshal([]byte(lit), &want)
		var p struct {
			S string `json:"s"`
		}
		err := decodeJSON([]byte(`{"s":`+lit+`}`), &p)
		if (err != nil) != (werr != nil) || (err == nil && p.S != want) {
			t.Errorf("%q: decoded %q (%v), encoding/json %q (%v)", lit, p.S, err, want, werr)
		}
		if werr == nil {
			if got := jsonString([]byte(lit), nil); got != want {
				t.Errorf("%q: jsonString %q, want %q", lit, got, want)
			}
		}
	}
}

// A name given twice in one object is refused, wherever the object is:
// encoding/json keeps the last value, other parsers (a proxy, an audit
// log) the first, so the two would read different orders from one body.
func TestDecodeRefusesRepeatedNames(t *testing.T) {
	cases := []struct {
		target func() any
		body   string
		field  string
	}{
		{func() any { return new(OrderRequest) },
			`{"marketId":"BTC-PERP","side":"buy","type":"limit","contracts":"1","contracts":"2","reduceOnly":false,"limitPriceQ8":"1"}`, "contracts"},
		{func() any { return new(OrderRequest) }, // the same name, escaped
			`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","c\u006fntracts":"2","reduceOnly":false}`, "contracts"},
		{func() any { return new(OrderRequest) }, // null is a value too
			`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","reduceOnly":false,"leverage":"5","leverage":null}`, "leverage"},
		{func() any { return new(OrderRequest) }, // the first name that comes back is named
			`{"side":"buy","marketId":"A","type":"market","marketId":"B","side":"sell","contracts":"1","reduceOnly":false}`, "marketId"},
		{func() any { return new(OrderRequest) },
			`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","reduceOnly":false,"trigger":{"kind":"entry","level":"1","level":"2"}}`, "trigger.level"},
		{func() any { return new(OrderRequest) },
			`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","reduceOnly":false,"bracket":{"entryKind":"market","stopLevel":"1","stopLevel":"9"}}`, "bracket.stopLevel"},
		{func() any { return new(PromoterApplyRequest) },
			`{"displayName":"Ann","channels":[{"kind":"x","url":"u","audience":"a"},{"kind":"x","url":"u","url":"v","audience":"a"}],"plan":"p","jurisdictions":["DE"],"acceptedTermsVersion":"v"}`, "channels[1].url"},
		{func() any { return new(exoticProbe) }, `{"m":{"a":1,"a":2}}`, "m.a"},
		{func() any { return new(exoticProbe) }, `{"any":[{"x":{"y":1,"z":[],"y":2}}]}`, "any.y"},
		{func() any { return new(exoticProbe) }, `{"unm":{"k":1,"k":1}}`, "unm.k"},
	}
	for _, c := range cases {
		err := decodeJSON([]byte(c.body), c.target())
		if err == nil {
			t.Errorf("%s: accepted", c.body)
			continue
		}
		if want := "field " + c.field + ": is given more than once"; err.Error() != want {
			t.Errorf("%s: %q, want %q", c.body, err, want)
		}
	}
}

// Bodies are read into pooled buffers: a decoded request keeps nothing of
// the buffer, so decoding the next body into it changes no earlier value.
func TestDecodedRequestOutlivesItsBodyBuffer(t *testing.T) {
	decode := func(body string) OrderRequest {
		t.Helper()
		var o OrderRequest
		if err := decodeBody(httptest.NewRequest("POST", "/v1/orders", strings.NewReader(body)), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	first := decode(`{"marketId":"ETH-PERP","side":"buy","type":"limit","contracts":"7","reduceOnly":true,"limitPriceQ8":"1"}`)
	for i := range 50 {
		decode(`{"marketId":"XXX-XXXX","side":"sell","type":"market","contracts":"` + strconv.Itoa(i+100) + `","reduceOnly":false}`)
	}
	if first.MarketID != "ETH-PERP" || first.Side != "buy" || first.Type != "limit" || first.Contracts != 7 || !first.ReduceOnly ||
		first.LimitPriceQ8 == nil || *first.LimitPriceQ8 != 1 {
		t.Fatalf("the first request changed: %+v", first)
	}
	big := `{"marketId":"` + strings.Repeat("M", 5000) + `"}` // past maxPooledBody
	var o OrderRequest
	if err := decodeBody(httptest.NewRequest("POST", "/v1/orders", strings.NewReader(big)), &o); err == nil ||
		!strings.Contains(err.Error(), "marketId") {
		t.Fatalf("a long marketId: %v", err)
	}
}
