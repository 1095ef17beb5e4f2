package loadgen

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseMixReadsWeights(t *testing.T) {
	m, err := ParseMix(" market=40, limit = 30,cancel=15,read=15 ")
	if err != nil {
		t.Fatal(err)
	}
	if m[OpMarket] != 40 || m[OpLimit] != 30 || m[OpCancel] != 15 || m[OpRead] != 15 {
		t.Fatalf("mix %v", m)
	}
	if m.String() != DefaultMix {
		t.Fatalf("String %q, want %q", m.String(), DefaultMix)
	}
	only, err := ParseMix("read=1")
	if err != nil || only[OpMarket] != 0 || only[OpRead] != 1 || only.String() != "market=0,limit=0,cancel=0,read=1" {
		t.Fatalf("read only: %v %v", only, err)
	}
	if _, err := ParseMix(DefaultMix); err != nil {
		t.Fatalf("the default mix: %v", err)
	}
	if m, err := ParseMix("limit=1000000,cancel=0"); err != nil || m[OpLimit] != MaxWeight {
		t.Fatalf("the largest weight: %v %v", m, err)
	}
}

func TestParseMixRefusals(t *testing.T) {
	cases := map[string]string{
		"":                      "empty",
		"  ":                    "empty",
		"market":                "name=weight",
		"=5":                    "name=weight",
		"market=40,,read=1":     "name=weight",
		"buy=10":                "unknown operation",
		"Market=10":             "unknown operation",
		"market=1,market=2":     "twice",
		"market=-1":             "whole number",
		"market=+1":             "whole number",
		"market=1.5":            "whole number",
		"market=":               "whole number",
		"market=0x10":           "whole number",
		"market=1000001":        "whole number",
		"market=99999999999999": "whole number",
		"market=0,read=0":       "weighs nothing",
		"cancel=10,read=5":      "nothing to cancel",
		"cancel=1,limit=0":      "nothing to cancel",
	}
	for in, want := range cases {
		if _, err := ParseMix(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMix(%q) = %v, want an error naming %q", in, err, want)
		}
	}
}

func TestMixPickFollowsTheWeights(t *testing.T) {
	m, _ := ParseMix("market=60,limit=30,cancel=0,read=10")
	r := rand.New(rand.NewPCG(7, 7))
	n := map[string]int{}
	const draws = 100_000
	for i := 0; i < draws; i++ {
		n[m.pick(r)]++
	}
	if n[OpCancel] != 0 {
		t.Fatalf("a zero weight was drawn %d times", n[OpCancel])
	}
	for op, w := range map[string]int{OpMarket: 60, OpLimit: 30, OpRead: 10} {
		want := draws * w / 100
		if d := n[op] - want; d < -want/20 || d > want/20 {
			t.Errorf("%s drawn %d times of %d, want %d within 5%%", op, n[op], draws, want)
		}
	}
}
