package loadgen

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

func expand(t *testing.T, tmpl string, v Vars) string {
	t.Helper()
	p, err := ParseTemplate(tmpl)
	if err != nil {
		t.Fatalf("ParseTemplate(%q): %v", tmpl, err)
	}
	return p.String(&v)
}

func TestTemplateExpandsPlaceholders(t *testing.T) {
	v := Vars{Worker: 7, Seq: 42, Run: "deadbeef", Key: "k-123"}
	for tmpl, want := range map[string]string{
		"":                                 "",
		"plain text":                       "plain text",
		"w{{worker}} s{{seq}}":             "w7 s42",
		"{{ worker }}":                     "7",
		"{{run}}/{{key}}":                  "deadbeef/k-123",
		"{{alt:buy|sell}}":                 "buy", // 42 mod 2
		"{{alt:a|b|c}}":                    "a",   // 42 mod 3
		"{{alt:|x}}":                       "",
		"{{b64:bench/{{worker}}/{{seq}}}}": base64.StdEncoding.EncodeToString([]byte("bench/7/42")),
		"{{b64:}}":                         "",
		"{{alt:{{b64:a|b}}|c}}":            base64.StdEncoding.EncodeToString([]byte("a|b")),
		// JSON passes through: a lone } or }} at the top is text.
		`{"a":{"b":"{{seq}}"}}`: `{"a":{"b":"42"}}`,
		`{"n":1}}`:              `{"n":1}}`,
		"a } b }} c":            "a } b }} c",
	} {
		if got := expand(t, tmpl, v); got != want {
			t.Errorf("%q expanded to %q, want %q", tmpl, got, want)
		}
	}
	// A worker alternates from request to request.
	p, _ := ParseTemplate(`{{alt:buy|sell}}`)
	var seq []string
	for s := uint64(0); s < 4; s++ {
		seq = append(seq, p.String(&Vars{Seq: s}))
	}
	if strings.Join(seq, ",") != "buy,sell,buy,sell" {
		t.Errorf("alt over four requests: %v", seq)
	}
}

func TestTemplateEtcdPutBody(t *testing.T) {
	body := expand(t, `{"key":"{{b64:bench/{{run}}/{{worker}}/{{seq}}}}","value":"{{b64:value-{{seq}}}}"}`,
		Vars{Worker: 3, Seq: 9, Run: "0a0b0c0d"})
	want := `{"key":"` + base64.StdEncoding.EncodeToString([]byte("bench/0a0b0c0d/3/9")) +
		`","value":"` + base64.StdEncoding.EncodeToString([]byte("value-9")) + `"}`
	if body != want {
		t.Fatalf("body %s, want %s", body, want)
	}
}

func TestTemplateUUIDIsFreshEveryTime(t *testing.T) {
	p, err := ParseTemplate("{{uuid}}")
	if err != nil {
		t.Fatal(err)
	}
	shape := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	v := Vars{}
	for i := 0; i < 1000; i++ {
		u := p.String(&v)
		if !shape.MatchString(u) {
			t.Fatalf("%q is not a version 4 UUID", u)
		}
		if seen[u] {
			t.Fatalf("%q came twice", u)
		}
		seen[u] = true
	}
	if r1, r2 := newRunID(), newRunID(); len(r1) != 8 || r1 == r2 {
		t.Fatalf("run ids %q %q", r1, r2)
	}
}

func TestTemplateRefusals(t *testing.T) {
	for tmpl, want := range map[string]string{
		"{{nope}}":      "unknown placeholder",
		"{{Seq}}":       "unknown placeholder",
		"{{}}":          "empty placeholder",
		"{{seq":         "unclosed",
		"{{b64:abc":     "unclosed",
		"{{b64:{{seq}}": "unclosed",
		"{{seq:1}}":     "takes no argument",
		"{{uuid:x}}":    "takes no argument",
		"{{b64}}":       "needs an argument",
		"{{alt}}":       "needs an argument",
		"{{alt:buy}}":   "at least two options",
		"{{b64:{{b64:{{b64:{{b64:{{seq}}}}}}}}}}":              "nested more than",
		strings.Repeat("x", MaxTemplateBytes+1):                "bytes",
		"{{alt:" + strings.Repeat("a|", MaxAltOptions) + "a}}": "more than 64 options",
	} {
		if _, err := ParseTemplate(tmpl); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTemplate(%.40q) = %v, want an error naming %q", tmpl, err, want)
		}
	}
	// Four levels are allowed.
	if _, err := ParseTemplate("{{b64:{{b64:{{b64:{{seq}}}}}}}}"); err != nil {
		t.Errorf("four levels: %v", err)
	}
}

func TestTemplateUsesAndStatic(t *testing.T) {
	p, _ := ParseTemplate(`{"k":"{{b64:{{alt:a|{{key}}}}}}"}`)
	if !p.Uses(PhKey) || !p.Uses(PhAlt) || !p.Uses(PhB64) || p.Uses(PhUUID) || p.Static() {
		t.Fatalf("uses key %v alt %v b64 %v uuid %v static %v", p.Uses(PhKey), p.Uses(PhAlt), p.Uses(PhB64), p.Uses(PhUUID), p.Static())
	}
	s, _ := ParseTemplate(`{"k":1}`)
	if !s.Static() || s.Uses(PhKey) {
		t.Fatal("a literal template")
	}
}

func TestParseHeader(t *testing.T) {
	h, err := ParseHeader(" idempotency-key :  {{uuid}} ")
	if err != nil || h.Name != "Idempotency-Key" || !h.Value.Uses(PhUUID) {
		t.Fatalf("%+v %v", h, err)
	}
	h, err = ParseHeader("x-api-key: {{key}}")
	if err != nil || h.Name != "X-Api-Key" || h.Value.String(&Vars{Key: "abc"}) != "abc" {
		t.Fatalf("%+v %v", h, err)
	}
	if h, err := ParseHeader("X-Empty:"); err != nil || h.Value.String(&Vars{}) != "" {
		t.Fatalf("an empty value: %+v %v", h, err)
	}
	for _, bad := range []string{"no colon", ": value", "two words: x", "x-h: {{nope}}", "x{{seq}}: 1"} {
		if _, err := ParseHeader(bad); err == nil {
			t.Errorf("ParseHeader(%q) accepted", bad)
		}
	}
}
