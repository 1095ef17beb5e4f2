package httpapi

// The reflective decoder that decode.go replaced, kept verbatim (names
// prefixed ref) as the reference the differential fuzz test holds the
// single-pass decoder to: same verdict, same value, same message. One
// change since: it refuses a name given twice in an object (refRepeated,
// written with encoding/json's tokenizer rather than the scanner, so the
// two are not the same code), where it kept the last value.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/wire"
)

// Request structs describe their fields with tags that both the decoder
// and the OpenAPI generator read:
//
//	json:"name"      the wire name (",omitempty" marks an optional response field)
//	req:"true"       the field must be present and non-null
//	enum:"a,b"       allowed values (for strings and string slices)
//	min:"1" max:"9"  inclusive bounds for integers
//	unit:"msat"      the x-svc-unit of a decimal-string integer
//	maxLen:"64"      maximum string length (and element count for slices)
//
// Optional fields are pointers, so "absent" and "zero" differ.

// refDecodeJSON is decodeBody on bytes; exported to the fuzz test.
func refDecodeJSON(b []byte, dst any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	return refDecodeValue(json.RawMessage(b), reflect.ValueOf(dst).Elem(), "body")
}

var (
	refIntType       = reflect.TypeOf(wire.Int(0))
	refUnmarshalerTy = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

func refDecodeValue(raw json.RawMessage, v reflect.Value, path string) error {
	t := v.Type()
	if t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(refUnmarshalerTy) {
		return refDecodeStruct(raw, v, path)
	}
	switch {
	case t == refIntType:
		n, err := wire.ParseQuoted(bytes.TrimSpace(raw))
		if err != nil {
			return fieldErr(path, "%v", err)
		}
		v.SetInt(n)
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fieldErr(path, "must be an array")
		}
		out := reflect.MakeSlice(t, len(items), len(items))
		for i, it := range items {
			if err := refDecodeValue(it, out.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return fieldErr(path, "must be %s", refKindName(t))
	}
	if name, found := refRepeated(raw, true); found {
		return refRepeatedField(name, path)
	}
	return nil
}

func refRepeatedField(name, path string) error {
	if path == "body" {
		return fieldErr(name, "is given more than once")
	}
	return fieldErr(path+"."+name, "is given more than once")
}

// refRepeated finds the first name, in document order, that an object in
// raw (well-formed JSON) holds twice: in the outermost object only, or in
// every object at any depth.
func refRepeated(raw []byte, deep bool) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // 1e400 is a token, not a float64 overflow
	return refRepeatedIn(dec, deep)
}

func refRepeatedIn(dec *json.Decoder, deep bool) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			key, _ := dec.Token()
			name := key.(string)
			if seen[name] {
				return name, true
			}
			seen[name] = true
			if name, found := refRepeatedValue(dec, deep); found {
				return name, true
			}
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if name, found := refRepeatedValue(dec, deep); found {
				return name, true
			}
		}
		_, _ = dec.Token()
	}
	return "", false
}

// refRepeatedValue walks the next value if deep, else skips it.
func refRepeatedValue(dec *json.Decoder, deep bool) (string, bool) {
	if deep {
		return refRepeatedIn(dec, deep)
	}
	var skip json.RawMessage
	_ = dec.Decode(&skip)
	return "", false
}

func refKindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "a JSON integer"
	}
	return "of type " + t.String()
}

func refDecodeStruct(raw json.RawMessage, v reflect.Value, path string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return fieldErr(path, "must be a JSON object")
	}
	plan := refPlanOf(v.Type())
	if len(fields) > 0 {
		for name := range fields {
			if _, ok := plan.byName[name]; !ok {
				return refUnknownField(fields, plan.byName, path)
			}
		}
	}
	if name, found := refRepeated(raw, false); found {
		return refRepeatedField(name, path)
	}
	for i := range plan.fields {
		fp := &plan.fields[i]
		fpath := fp.Name
		if path != "body" {
			fpath = path + "." + fp.Name
		}
		fraw, present := fields[fp.Name]
		if !present || refIsNull(fraw) {
			if fp.required {
				return fieldErr(fpath, "is required")
			}
			continue
		}
		fv := v.Field(fp.Index)
		target := fv
		if fp.Pointer {
			target = reflect.New(fp.Type).Elem()
		}
		if err := fp.refDecode(fraw, target, fpath); err != nil {
			return err
		}
		if err := fp.refCheck(target, fpath); err != nil {
			return err
		}
		if fp.Pointer {
			fv.Set(target.Addr())
		}
	}
	return nil
}

func refIsNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// refStructPlan is what refDecodeStruct needs of a request type, worked out once
// per type from its tags (refPlanOf caches it): reading tags and parsing
// their numbers on every request cost more than the JSON itself.
type refStructPlan struct {
	fields []refFieldPlan
	byName map[string]struct{}
}

type refFieldPlan struct {
	wireField
	required       bool
	enum           []string
	hasMin, hasMax bool
	min, max       int64
	maxLen         int // -1: none
	scalar         refScalarKind
}

// refScalarKind picks a fast path for the commonest field types; the rest
// go through encoding/json.
type refScalarKind int

const (
	refOtherKind refScalarKind = iota
	refStringKind
	refBoolKind
	refWireIntKind
)

var refPlans sync.Map // reflect.Type -> *refStructPlan

func refPlanOf(t reflect.Type) *refStructPlan {
	if p, ok := refPlans.Load(t); ok {
		return p.(*refStructPlan)
	}
	p := &refStructPlan{byName: map[string]struct{}{}}
	for _, wf := range wireFields(t) {
		fp := refFieldPlan{wireField: wf, required: wf.Field.Tag.Get("req") == "true", maxLen: -1}
		if enum := wf.Field.Tag.Get("enum"); enum != "" {
			fp.enum = strings.Split(enum, ",")
		}
		if m := wf.Field.Tag.Get("min"); m != "" {
			fp.hasMin = true
			fp.min, _ = strconv.ParseInt(m, 10, 64)
		}
		if m := wf.Field.Tag.Get("max"); m != "" {
			fp.hasMax = true
			fp.max, _ = strconv.ParseInt(m, 10, 64)
		}
		if m := wf.Field.Tag.Get("maxLen"); m != "" {
			fp.maxLen, _ = strconv.Atoi(m)
		}
		switch {
		case wf.Type == refIntType:
			fp.scalar = refWireIntKind
		case wf.Type.Kind() == reflect.String && wf.Type.PkgPath() == "":
			fp.scalar = refStringKind
		case wf.Type.Kind() == reflect.Bool && wf.Type.PkgPath() == "":
			fp.scalar = refBoolKind
		}
		p.fields = append(p.fields, fp)
		p.byName[wf.Name] = struct{}{}
	}
	actual, _ := refPlans.LoadOrStore(t, p)
	return actual.(*refStructPlan)
}

// decode reads one present, non-null field. Plain strings (no escapes,
// valid UTF-8) and the literals true and false are read directly; anything
// else takes refDecodeValue, so the answers are encoding/json's.
func (fp *refFieldPlan) refDecode(raw json.RawMessage, v reflect.Value, path string) error {
	raw = bytes.TrimSpace(raw)
	switch fp.scalar {
	case refStringKind:
		if s, ok := refPlainString(raw); ok {
			v.SetString(s)
			return nil
		}
	case refBoolKind:
		switch string(raw) {
		case "true":
			v.SetBool(true)
			return nil
		case "false":
			v.SetBool(false)
			return nil
		}
	}
	return refDecodeValue(raw, v, path)
}

// refPlainString is the content of a JSON string literal that needs no
// unescaping: quoted, no backslash, no control character, valid UTF-8.
func refPlainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// check applies the field's enum, min, max and maxLen tags to its value.
func (fp *refFieldPlan) refCheck(v reflect.Value, path string) error {
	if fp.enum != nil {
		switch v.Kind() {
		case reflect.String:
			if err := fp.refCheckEnum(v.String(), path); err != nil {
				return err
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				if err := fp.refCheckEnum(v.Index(i).String(), path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	}
	if (fp.hasMin || fp.hasMax) && refIsInt(v) {
		n := v.Int()
		if fp.hasMin && n < fp.min {
			return fieldErr(path, "must be at least %d", fp.min)
		}
		if fp.hasMax && n > fp.max {
			return fieldErr(path, "must be at most %d", fp.max)
		}
	}
	if fp.maxLen >= 0 && (v.Kind() == reflect.String || v.Kind() == reflect.Slice) && v.Len() > fp.maxLen {
		return fieldErr(path, "is longer than %d%s", fp.maxLen, lenUnit(v.Kind()))
	}
	return nil
}

func (fp *refFieldPlan) refCheckEnum(s, path string) error {
	if slices.Contains(fp.enum, s) {
		return nil
	}
	return fieldErr(path, "must be one of %s", strings.Join(fp.enum, ", "))
}

// refUnknownField refuses a field the request type does not have: a client
// that sends "leverage" or misspells "reduceOnly" must learn that it was
// not applied, not have its order placed without it (the OpenAPI document
// closes every request object, additionalProperties false). The first
// unknown name in sorted order is reported, so the answer is stable.
func refUnknownField(fields map[string]json.RawMessage, known map[string]struct{}, path string) error {
	var unknown []string
	for name := range fields {
		if _, ok := known[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	if path == "body" {
		return fieldErr(unknown[0], "is not a field of this request")
	}
	return fieldErr(path+"."+unknown[0], "is not a field of this request")
}

func refIsInt(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// BenchmarkDecodeOrderRequestReference is BenchmarkDecodeOrderRequest on
// the reference decoder, for comparison.
func BenchmarkDecodeOrderRequestReference(b *testing.B) {
	body := []byte(`{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}`)
	b.ReportAllocs()
	for b.Loop() {
		var req OrderRequest
		if err := refDecodeJSON(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}
