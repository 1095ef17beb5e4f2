package httpapi

import (
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Free text a client sends (a label, a memo, a plan, a URL) is kept as it
// is, in the log and the state, and some of it is shown to others (every
// key of the account lists the labels; a payer reads an invoice's memo).
// An API key must enter the log only as its hash, so a request whose free
// text holds something shaped like a key is refused before it is
// proposed, as an idempotency-key or a path holding one is. So is text
// with control or bidirectional formatting characters (textProblem).

// freeTextMinLen is the shortest text that can hold a key.
const freeTextMinLen = len(keyPrefix) + keyHexDigits

// isFreeText reports whether a string field takes free text: no enum, and
// room for a key.
func isFreeText(f wireField) bool {
	if f.Field.Tag.Get("enum") != "" {
		return false
	}
	m := f.Field.Tag.Get("maxLen")
	if m == "" {
		return true
	}
	n, err := strconv.Atoi(m)
	return err != nil || n >= freeTextMinLen
}

var freeTextTypes sync.Map // reflect.Type -> bool

// hasFreeText reports whether a request type holds a free-text field,
// directly or inside a struct or a slice (cached: a request type without
// one, such as an order, is never walked).
func hasFreeText(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	if v, ok := freeTextTypes.Load(t); ok {
		return v.(bool)
	}
	freeTextTypes.Store(t, false) // a type that holds itself adds nothing
	has := false
	for _, f := range wireFields(t) {
		ft := f.Type
		for ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.String && isFreeText(f) || hasFreeText(ft) {
			has = true
			break
		}
	}
	freeTextTypes.Store(t, has)
	return has
}

// badFreeText names the first free-text field of v (a decoded request)
// whose text has a problem (textProblem), as the decoder names fields
// ("label", "channels[0].url"), and the problem.
func badFreeText(v reflect.Value, path string) (string, string) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", ""
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if p, why := badFreeText(v.Index(i), path+"["+strconv.Itoa(i)+"]"); why != "" {
				return p, why
			}
		}
	case reflect.Struct:
		if !hasFreeText(v.Type()) {
			return "", ""
		}
		for _, f := range wireFields(v.Type()) {
			name := f.Name
			if path != "" {
				name = path + "." + f.Name
			}
			fv := v.Field(f.Index)
			if texts := textOf(fv, f); texts != nil {
				for i, s := range texts {
					if why := textProblem(s); why != "" {
						if fv.Kind() == reflect.Slice {
							name += "[" + strconv.Itoa(i) + "]"
						}
						return name, why
					}
				}
				continue
			}
			if p, why := badFreeText(fv, name); why != "" {
				return p, why
			}
		}
	}
	return "", ""
}

// textProblem is why free text s may not be kept, or "". A key: it would
// be stored in clear. A control character other than tab and line breaks
// (an escape sequence rewrites the terminal of an operator listing it), or
// a bidirectional override or isolate (the text reads differently from
// what it holds): free text is shown to others, by the venue and by
// clients. Invalid UTF-8 has no text to show.
func textProblem(s string) string {
	if hasKeyShape(s) {
		return "holds an API key; send a key only in the x-api-key header, and rotate this one"
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return "holds a control character (only tab and line breaks may appear)"
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			return "holds a bidirectional override or isolate character"
		}
	}
	return ""
}

// textOf is the free text of a string or []string field (nil for any
// other field, or one that takes no free text).
func textOf(fv reflect.Value, f wireField) []string {
	ft := f.Type
	if ft.Kind() == reflect.Slice {
		ft = ft.Elem()
	}
	if ft.Kind() != reflect.String || !isFreeText(f) {
		return nil
	}
	for fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			return []string{}
		}
		fv = fv.Elem()
	}
	if fv.Kind() == reflect.String {
		return []string{fv.String()}
	}
	out := make([]string, 0, fv.Len())
	for i := 0; i < fv.Len(); i++ {
		e := fv.Index(i)
		if e.Kind() == reflect.Pointer {
			if e.IsNil() {
				continue
			}
			e = e.Elem()
		}
		out = append(out, e.String())
	}
	return out
}

// badTextInRequest is the refusal of a decoded request whose free text
// has a problem (textProblem): it names the field, never the text.
func badTextInRequest(req any) (string, bool) {
	v := reflect.ValueOf(req)
	if !hasFreeText(v.Type()) {
		return "", false
	}
	p, why := badFreeText(v, "")
	if why == "" {
		return "", false
	}
	return "field " + p + ": " + why, true
}
