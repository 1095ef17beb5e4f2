package httpapi

import (
	"reflect"
	"strconv"
	"sync"
)

// Free text a client sends (a label, a memo, a plan, a URL) is kept as it
// is, in the log and the state, and some of it is shown to others (every
// key of the account lists the labels; a payer reads an invoice's memo).
// An API key must enter the log only as its hash, so a request whose free
// text holds something shaped like a key is refused before it is
// proposed, as an idempotency-key or a path holding one is.

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

// keyInFreeText names the first free-text field of v (a decoded request)
// that holds something shaped like an API key, as the decoder names
// fields ("label", "channels[0].url").
func keyInFreeText(v reflect.Value, path string) (string, bool) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if p, ok := keyInFreeText(v.Index(i), path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	case reflect.Struct:
		if !hasFreeText(v.Type()) {
			return "", false
		}
		for _, f := range wireFields(v.Type()) {
			name := f.Name
			if path != "" {
				name = path + "." + f.Name
			}
			fv := v.Field(f.Index)
			if texts := textOf(fv, f); texts != nil {
				for i, s := range texts {
					if hasKeyShape(s) {
						if fv.Kind() == reflect.Slice {
							name += "[" + strconv.Itoa(i) + "]"
						}
						return name, true
					}
				}
				continue
			}
			if p, ok := keyInFreeText(fv, name); ok {
				return p, true
			}
		}
	}
	return "", false
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

// keyInRequest is the refusal of a decoded request whose free text holds
// a key: it names the field, never the text.
func keyInRequest(req any) (string, bool) {
	v := reflect.ValueOf(req)
	if !hasFreeText(v.Type()) {
		return "", false
	}
	p, ok := keyInFreeText(v, "")
	if !ok {
		return "", false
	}
	return "field " + p + ": holds an API key; send a key only in the x-api-key header, and rotate this one", true
}
