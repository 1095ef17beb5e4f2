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
	known := wireFields(v.Type())
	if err := unknownField(fields, known, path); err != nil {
		return err
	}
	for _, wf := range known {
		sf, name := wf.Field, wf.Name
		fpath := name
		if path != "body" {
			fpath = path + "." + name
		}
		fraw, present := fields[name]
		if !present || bytes.Equal(bytes.TrimSpace(fraw), []byte("null")) {
			if sf.Tag.Get("req") == "true" {
				return fieldErr(fpath, "is required")
			}
			continue
		}
		fv := v.Field(wf.Index)
		target := fv
		if fv.Kind() == reflect.Pointer {
			target = reflect.New(fv.Type().Elem()).Elem()
		}
		if err := decodeValue(fraw, target, fpath); err != nil {
			return err
		}
		if err := checkTags(sf, target, fpath); err != nil {
			return err
		}
		if fv.Kind() == reflect.Pointer {
			p := reflect.New(fv.Type().Elem())
			p.Elem().Set(target)
			fv.Set(p)
		}
	}
	return nil
}

// unknownField refuses a field the request type does not have: a client
// that sends "leverage" or misspells "reduceOnly" must learn that it was
// not applied, not have its order placed without it (the OpenAPI document
// closes every request object, additionalProperties false). The first
// unknown name in sorted order is reported, so the answer is stable.
func unknownField(fields map[string]json.RawMessage, known []wireField, path string) error {
	var unknown []string
	for name := range fields {
		found := false
		for _, wf := range known {
			if wf.Name == name {
				found = true
				break
			}
		}
		if !found {
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

func checkTags(sf reflect.StructField, v reflect.Value, path string) error {
	if enum := sf.Tag.Get("enum"); enum != "" {
		allowed := strings.Split(enum, ",")
		check := func(s string, p string) error {
			for _, a := range allowed {
				if s == a {
					return nil
				}
			}
			return fieldErr(p, "must be one of %s", strings.Join(allowed, ", "))
		}
		switch v.Kind() {
		case reflect.String:
			if err := check(v.String(), path); err != nil {
				return err
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				if err := check(v.Index(i).String(), path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	}
	if isInt(v) {
		n := v.Int()
		if m := sf.Tag.Get("min"); m != "" {
			if lo, _ := strconv.ParseInt(m, 10, 64); n < lo {
				return fieldErr(path, "must be at least %s", m)
			}
		}
		if m := sf.Tag.Get("max"); m != "" {
			if hi, _ := strconv.ParseInt(m, 10, 64); n > hi {
				return fieldErr(path, "must be at most %s", m)
			}
		}
	}
	if m := sf.Tag.Get("maxLen"); m != "" {
		limit, _ := strconv.Atoi(m)
		if (v.Kind() == reflect.String || v.Kind() == reflect.Slice) && v.Len() > limit {
			return fieldErr(path, "is longer than %d", limit)
		}
	}
	return nil
}

func isInt(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}
