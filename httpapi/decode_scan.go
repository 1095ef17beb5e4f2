package httpapi

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner below accepts exactly the documents encoding/json accepts:
// RFC 8259 syntax, whitespace being space, tab, CR and LF, and at most
// maxNestingDepth nested objects and arrays. It does not judge UTF-8:
// encoding/json reads invalid bytes in a string as U+FFFD, and so does
// jsonString. Each function takes the offset of a value's first byte and
// returns the offset just past it, or -1 if the bytes are not JSON.

// maxNestingDepth is encoding/json's limit on nesting.
const maxNestingDepth = 10000

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// objectNames is what readObject found wrong with an object's names.
type objectNames struct {
	unknown    []byte // the least name that is no field of the plan
	repeated   []byte // the first field name given a second time
	hasUnknown bool
	hasRepeat  bool
}

// readObject reads the object b holds, with nothing but whitespace around
// it, without decoding its values. The span of a member whose name is a
// field of plan goes into spans at the field's slot; a slot found filled
// already is a repeated name, and the first of those is kept, as is the
// least of the names that are no field. ok is false unless b is exactly
// one well-formed JSON value and that an object.
func readObject(b []byte, plan *structPlan, spans []span) (names objectNames, ok bool) {
	hint := 0
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return names, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return names, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return names, false
		}
		end, plain := scanString(b, i)
		if end < 0 {
			return names, false
		}
		name := b[i+1 : end-1]
		if !plain {
			name = appendUnquoted(nil, name)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return names, false
		}
		i = skipSpace(b, i+1)
		end = scanValue(b, i, 1)
		if end < 0 {
			return names, false
		}
		if slot, known := plan.slotOf(name, hint); known {
			if spans[slot].end != 0 && !names.hasRepeat {
				names.repeated, names.hasRepeat = name, true
			}
			spans[slot] = span{i, end}
			hint = slot + 1
		} else if !names.hasUnknown || bytes.Compare(name, names.unknown) < 0 {
			names.unknown, names.hasUnknown = name, true
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return names, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return names, skipSpace(b, i+1) == len(b)
		default:
			return names, false
		}
	}
}

// repeatedName finds the first name, in the order of the bytes, that an
// object anywhere in raw (one well-formed JSON value) holds twice. It
// serves values encoding/json reads (maps, interfaces, types with their
// own UnmarshalJSON), which keep a repeated name's last value silently.
func repeatedName(raw []byte) ([]byte, bool) {
	_, name, found := findRepeat(raw, skipSpace(raw, 0))
	return name, found
}

// findRepeat walks the value at b[i]; end is the offset past it.
func findRepeat(b []byte, i int) (end int, name []byte, found bool) {
	switch b[i] {
	case '{':
		var seen map[string]struct{} // a map: an object may have many names
		i = skipSpace(b, i+1)
		if b[i] == '}' {
			return i + 1, nil, false
		}
		for {
			end, plain := scanString(b, i)
			n := b[i+1 : end-1]
			if !plain {
				n = appendUnquoted(nil, n)
			}
			if _, dup := seen[string(n)]; dup {
				return 0, n, true
			}
			if seen == nil {
				seen = map[string]struct{}{}
			}
			seen[string(n)] = struct{}{}
			i = skipSpace(b, skipSpace(b, end)+1) // past ':'
			if i, name, found = findRepeat(b, i); found {
				return 0, name, true
			}
			if i = skipSpace(b, i); b[i] == '}' {
				return i + 1, nil, false
			}
			i = skipSpace(b, i+1) // past ','
		}
	case '[':
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return i + 1, nil, false
		}
		for {
			if i, name, found = findRepeat(b, i); found {
				return 0, name, true
			}
			if i = skipSpace(b, i); b[i] == ']' {
				return i + 1, nil, false
			}
			i = skipSpace(b, i+1)
		}
	}
	return scanValue(b, i, 0), nil, false
}

// arrayItems appends the spans of the elements of raw, a well-formed JSON
// array, to items.
func arrayItems(raw []byte, items []span) []span {
	i := skipSpace(raw, 1)
	if raw[i] == ']' {
		return items
	}
	for {
		end := scanValue(raw, i, 1)
		items = append(items, span{i, end})
		i = skipSpace(raw, end)
		if raw[i] == ']' {
			return items
		}
		i = skipSpace(raw, i+1) // past ','
	}
}

// scanValue skips the value at b[i]; depth is how deeply it is nested.
func scanValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		end, _ := scanString(b, i)
		return end
	case c == '{':
		return scanObject(b, i, depth+1)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	}
	return -1
}

func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		start := i + 1
		if i = skipDigits(b, start); i == start {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		if i = skipDigits(b, start); i == start {
			return -1
		}
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// scanString skips the string literal at b[i] (a '"'). plain: its bytes
// are its text (no escape, nothing but ASCII).
func scanString(b []byte, i int) (end int, plain bool) {
	plain = true
	for i++; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, plain
		case c == '\\':
			plain = false
			i++
			if i >= len(b) {
				return -1, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 || hex4(b[i+1:i+5]) < 0 {
					return -1, false
				}
				i += 4
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	return -1, false
}

func scanObject(b []byte, i, depth int) int {
	if depth > maxNestingDepth {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		if i, _ = scanString(b, i); i < 0 {
			return -1
		}
		if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
			return -1
		}
		if i = scanValue(b, skipSpace(b, i+1), depth); i < 0 {
			return -1
		}
		if i = skipSpace(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

func scanArray(b []byte, i, depth int) int {
	if depth > maxNestingDepth {
		return -1
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		if i = scanValue(b, i, depth); i < 0 {
			return -1
		}
		if i = skipSpace(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// hex4 is the value of four hex digits, or -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// jsonString is the text of lit, a string literal scanString accepted, as
// encoding/json reads it. If the text is one of enum, that value is
// returned instead of a copy: enumerated fields decode without allocating.
func jsonString(lit []byte, enum []string) string {
	text := lit[1 : len(lit)-1]
	for _, c := range text {
		if c == '\\' || c >= utf8.RuneSelf {
			text = appendUnquoted(nil, text)
			break
		}
	}
	for _, e := range enum {
		if e == string(text) {
			return e
		}
	}
	return string(text)
}

// appendUnquoted appends the text of a string literal's body, which
// scanString accepted, to dst: escapes resolved, a surrogate pair joined,
// a lone surrogate and each byte of invalid UTF-8 replaced by U+FFFD,
// just as encoding/json does.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if len(s)-r >= 6 && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							dst = utf8.AppendRune(dst, dec)
							r += 6
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}
