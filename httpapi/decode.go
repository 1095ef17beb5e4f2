package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// decodeError names the failing field.
type decodeError struct{ msg string }

func (e *decodeError) Error() string { return e.msg }

func fieldErr(path, format string, args ...any) error {
	return &decodeError{msg: "field " + path + ": " + fmt.Sprintf(format, args...)}
}

// decodeBody reads the request body strictly into dst (a pointer to a
// struct). An empty body is read as {}.
func decodeBody(r *http.Request, dst any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errBodyTooLarge
		}
		return &decodeError{msg: "cannot read body"}
	}
	return decodeJSON(b, dst)
}

var errBodyTooLarge = errors.New("body too large")

// decodeJSON is decodeBody on bytes; exported to the fuzz test.
func decodeJSON(b []byte, dst any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	return decodeValue(json.RawMessage(b), reflect.ValueOf(dst).Elem(), "body")
}

var (
	intType       = reflect.TypeOf(wire.Int(0))
	unmarshalerTy = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

func decodeValue(raw json.RawMessage, v reflect.Value, path string) error {
	t := v.Type()
	if t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerTy) {
		return decodeStruct(raw, v, path)
	}
	switch {
	case t == intType:
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
			if err := decodeValue(it, out.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return fieldErr(path, "must be %s", kindName(t))
	}
	return nil
}

func kindName(t reflect.Type) string {
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

func decodeStruct(raw json.RawMessage, v reflect.Value, path string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return fieldErr(path, "must be a JSON object")
	}
	plan := planOf(v.Type())
	if len(fields) > 0 {
		for name := range fields {
			if _, ok := plan.byName[name]; !ok {
				return unknownField(fields, plan.byName, path)
			}
		}
	}
	for i := range plan.fields {
		fp := &plan.fields[i]
		fpath := fp.Name
		if path != "body" {
			fpath = path + "." + fp.Name
		}
		fraw, present := fields[fp.Name]
		if !present || isNull(fraw) {
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
		if err := fp.decode(fraw, target, fpath); err != nil {
			return err
		}
		if err := fp.check(target, fpath); err != nil {
			return err
		}
		if fp.Pointer {
			fv.Set(target.Addr())
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// structPlan is what decodeStruct needs of a request type, worked out once
// per type from its tags (planOf caches it): reading tags and parsing
// their numbers on every request cost more than the JSON itself.
type structPlan struct {
	fields []fieldPlan
	byName map[string]struct{}
}

type fieldPlan struct {
	wireField
	required       bool
	enum           []string
	hasMin, hasMax bool
	min, max       int64
	maxLen         int // -1: none
	scalar         scalarKind
}

// scalarKind picks a fast path for the commonest field types; the rest
// go through encoding/json.
type scalarKind int

const (
	otherKind scalarKind = iota
	stringKind
	boolKind
	wireIntKind
)

var plans sync.Map // reflect.Type -> *structPlan

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{byName: map[string]struct{}{}}
	for _, wf := range wireFields(t) {
		fp := fieldPlan{wireField: wf, required: wf.Field.Tag.Get("req") == "true", maxLen: -1}
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
		case wf.Type == intType:
			fp.scalar = wireIntKind
		case wf.Type.Kind() == reflect.String && wf.Type.PkgPath() == "":
			fp.scalar = stringKind
		case wf.Type.Kind() == reflect.Bool && wf.Type.PkgPath() == "":
			fp.scalar = boolKind
		}
		p.fields = append(p.fields, fp)
		p.byName[wf.Name] = struct{}{}
	}
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*structPlan)
}

// decode reads one present, non-null field. Plain strings (no escapes,
// valid UTF-8) and the literals true and false are read directly; anything
// else takes decodeValue, so the answers are encoding/json's.
func (fp *fieldPlan) decode(raw json.RawMessage, v reflect.Value, path string) error {
	raw = bytes.TrimSpace(raw)
	switch fp.scalar {
	case stringKind:
		if s, ok := plainString(raw); ok {
			v.SetString(s)
			return nil
		}
	case boolKind:
		switch string(raw) {
		case "true":
			v.SetBool(true)
			return nil
		case "false":
			v.SetBool(false)
			return nil
		}
	}
	return decodeValue(raw, v, path)
}

// plainString is the content of a JSON string literal that needs no
// unescaping: quoted, no backslash, no control character, valid UTF-8.
func plainString(raw []byte) (string, bool) {
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
func (fp *fieldPlan) check(v reflect.Value, path string) error {
	if fp.enum != nil {
		switch v.Kind() {
		case reflect.String:
			if err := fp.checkEnum(v.String(), path); err != nil {
				return err
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				if err := fp.checkEnum(v.Index(i).String(), path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	}
	if (fp.hasMin || fp.hasMax) && isInt(v) {
		n := v.Int()
		if fp.hasMin && n < fp.min {
			return fieldErr(path, "must be at least %d", fp.min)
		}
		if fp.hasMax && n > fp.max {
			return fieldErr(path, "must be at most %d", fp.max)
		}
	}
	if fp.maxLen >= 0 && (v.Kind() == reflect.String || v.Kind() == reflect.Slice) && v.Len() > fp.maxLen {
		return fieldErr(path, "is longer than %d", fp.maxLen)
	}
	return nil
}

func (fp *fieldPlan) checkEnum(s, path string) error {
	if slices.Contains(fp.enum, s) {
		return nil
	}
	return fieldErr(path, "must be one of %s", strings.Join(fp.enum, ", "))
}

// unknownField refuses a field the request type does not have: a client
// that sends "leverage" or misspells "reduceOnly" must learn that it was
// not applied, not have its order placed without it (the OpenAPI document
// closes every request object, additionalProperties false). The first
// unknown name in sorted order is reported, so the answer is stable.
func unknownField(fields map[string]json.RawMessage, known map[string]struct{}, path string) error {
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

func isInt(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}
