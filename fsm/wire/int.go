package wire

import (
	"errors"
	"strconv"
)

// Int is an int64 that travels as a JSON string of a decimal integer
// (`^-?[0-9]+$`), as SPEC section 1 requires for every money, price, rate,
// timestamp, duration, contract count and sequence value.
type Int int64

// MarshalJSON writes the value as a quoted decimal string.
func (i Int) MarshalJSON() ([]byte, error) { return i.AppendJSON(make([]byte, 0, 24)), nil }

// AppendJSON appends the value as MarshalJSON writes it.
func (i Int) AppendJSON(b []byte) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, '"')
}

// ErrNotDecimalString is returned for anything but a quoted canonical decimal.
var ErrNotDecimalString = errors.New(`must be a JSON string of a decimal integer matching ^-?[0-9]+$`)

// ErrOutOfRange is returned for a decimal that does not fit a signed 64-bit integer.
var ErrOutOfRange = errors.New("integer out of range")

// UnmarshalJSON accepts only a JSON string holding a decimal integer: no JSON
// number, no sign other than a leading '-', no spaces, exponent or fraction.
func (i *Int) UnmarshalJSON(b []byte) error {
	v, err := ParseQuoted(b)
	if err != nil {
		return err
	}
	*i = Int(v)
	return nil
}

// ParseQuoted parses a raw JSON token that must be a quoted decimal integer.
func ParseQuoted(b []byte) (int64, error) {
	if len(b) < 3 || b[0] != '"' || b[len(b)-1] != '"' {
		return 0, ErrNotDecimalString
	}
	return ParseDecimal(string(b[1 : len(b)-1]))
}

// ParseDecimal parses s strictly as `^-?[0-9]+$` into an int64.
func ParseDecimal(s string) (int64, error) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, ErrNotDecimalString
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return 0, ErrNotDecimalString
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrOutOfRange
	}
	return v, nil
}

// Ptr returns a pointer to an Int, for optional and nullable fields.
func Ptr(v int64) *Int {
	i := Int(v)
	return &i
}

// PlainJSON reports whether encoding/json writes s as itself between
// quotes: printable ASCII with nothing it escapes (quote, backslash, and
// the HTML characters <, > and &). Hand-written encoders that must match
// encoding/json byte for byte write such text verbatim and leave the rest
// to it.
func PlainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
