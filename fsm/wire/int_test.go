package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseDecimalBoundaries(t *testing.T) {
	good := map[string]int64{"0": 0, "-0": 0, "007": 7, "-1": -1,
		"9223372036854775807": 9223372036854775807, "-9223372036854775808": -9223372036854775808}
	for s, want := range good {
		if got, err := ParseDecimal(s); err != nil || got != want {
			t.Errorf("%q: %d %v", s, got, err)
		}
	}
	for _, s := range []string{"", "-", "+1", "1.0", "1e3", " 1", "1 ", "0x10", "１"} {
		if _, err := ParseDecimal(s); !errors.Is(err, ErrNotDecimalString) {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"9223372036854775808", "-9223372036854775809"} {
		if _, err := ParseDecimal(s); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestIntTravelsAsAString(t *testing.T) {
	b, _ := json.Marshal(struct {
		V Int  `json:"v"`
		P *Int `json:"p"`
	}{V: -42})
	if string(b) != `{"v":"-42","p":null}` {
		t.Fatalf("%s", b)
	}
	var v Int
	if err := json.Unmarshal([]byte(`42`), &v); err == nil {
		t.Fatal("a JSON number was accepted")
	}
	if err := json.Unmarshal([]byte(`"42"`), &v); err != nil || v != 42 {
		t.Fatalf("%d %v", v, err)
	}
}
