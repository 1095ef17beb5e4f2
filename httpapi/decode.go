package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"sync"

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
//
// The decoder reads a body in one pass over its bytes (decode_scan.go),
// guided by a plan worked out once per request type (planOf, in
// decode_plan.go), then reads each field's value where that pass found it.
// Its answers are those of the reflective decoder it replaced, which read
// the body into map[string]json.RawMessage and then every field with
// encoding/json: a malformed document anywhere is "must be a JSON object",
// unknown names and then repeated names are refused before any value is
// looked at (a repeated name inside a value encoding/json reads, a map
// say, once that value has been read), null counts as absent, fields are
// checked in declaration order, and strings read as encoding/json reads
// them (escapes resolved, invalid UTF-8 and lone surrogates replaced by
// U+FFFD). The old decoder lives on in decode_ref_test.go, taught to
// refuse repeated names too, and FuzzDecodeMatchesReference holds the two
// to the same verdict, value and message.

// decodeError names the failing field.
type decodeError struct{ msg string }

func (e *decodeError) Error() string { return e.msg }

func fieldErr(path, format string, args ...any) error {
	return &decodeError{msg: "field " + path + ": " + fmt.Sprintf(format, args...)}
}

// decodeBody reads the request body strictly into dst (a pointer to a
// struct). An empty body is read as {}.
func decodeBody(r *http.Request, dst any) error {
	bp := bodyBufs.Get().(*[]byte)
	b, err := readAll(r.Body, (*bp)[:0])
	if err == nil {
		err = decodeJSON(b, dst)
	} else {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = errBodyTooLarge
		} else {
			err = &decodeError{msg: "cannot read body"}
		}
	}
	// Nothing decoded refers to b: strings are copied out of it, and
	// encoding/json's unmarshalers must copy what they keep.
	if cap(b) <= maxPooledBody {
		*bp = b[:0]
		bodyBufs.Put(bp)
	}
	return err
}

// bodyBufs are the buffers request bodies are read into, each given back
// once its body is decoded. A buffer that grew past maxPooledBody (a body
// far larger than any order) is left to the collector.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledBody = 4 << 10

// readAll is io.ReadAll into b's room (growing it as io.ReadAll does).
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // room to read into
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}

var errBodyTooLarge = errors.New("body too large")

var emptyObject = []byte("{}")

// decodeJSON is decodeBody on bytes; exported to the fuzz test.
func decodeJSON(b []byte, dst any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		b = emptyObject
	}
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	if p, ok := plans.Load(t); ok {
		return decodeStruct(b, v, p.(*structPlan), "body")
	}
	if isPlainStruct(t) {
		return decodeStruct(b, v, planOf(t), "body")
	}
	return decodeTopValue(b, v)
}

// decodeTopValue reads a body into something other than a request struct,
// as the reflective decoder did; no route asks for that.
func decodeTopValue(b []byte, v reflect.Value) error {
	vp := valuePlanOf(v.Type())
	root := fieldPath{name: "body"}
	switch vp.kind {
	case wireIntKind:
		n, err := wire.ParseQuoted(bytes.TrimSpace(b))
		if err != nil {
			return fieldErr("body", "%v", err)
		}
		v.SetInt(n)
		return nil
	case otherKind:
		return decodeValue(b, v, vp, root, nil)
	}
	start := skipSpace(b, 0)
	end := scanValue(b, start, 0)
	if end < 0 || skipSpace(b, end) != len(b) {
		if vp.kind == sliceKind {
			return fieldErr("body", "must be an array")
		}
		return fieldErr("body", "must be %s", kindName(vp.typ))
	}
	return decodeValue(b[start:end], v, vp, root, nil)
}

// fieldPath names the value being read, for an error message: "body", then
// a field's name, "outer.inner" below that and "list[2]" for an element.
// It is turned into text only when there is an error to report or a
// struct or slice to descend into (and then only if it is nested), so the
// fields of an order and of its trigger or bracket cost no string.
type fieldPath struct {
	up    string // the enclosing value's path; "" for the body itself
	name  string
	index int
	elem  bool // up[index], not up.name
}

func (p fieldPath) String() string {
	switch {
	case p.elem:
		return p.up + "[" + strconv.Itoa(p.index) + "]"
	case p.up == "body" || p.up == "":
		return p.name
	}
	return p.up + "." + p.name
}

var (
	intType             = reflect.TypeOf(wire.Int(0))
	unmarshalerTy       = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// isPlainStruct: a struct the decoder reads field by field, rather than
// handing it to its own UnmarshalJSON.
func isPlainStruct(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerTy)
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

// span is where a value lies in the body; end 0 means absent.
type span struct{ start, end int }

// spanBuf is how many fields or elements decodeStruct and decodeSlice
// track without allocating; larger objects and arrays take the heap.
const spanBuf = 16

// decodeStruct reads the object b holds into v. A name that is no field,
// and then a name given twice, is refused before any value is read.
func decodeStruct(b []byte, v reflect.Value, plan *structPlan, path string) error {
	var buf [spanBuf]span
	spans := buf[:]
	if len(plan.names) > spanBuf {
		spans = make([]span, len(plan.names))
	}
	names, ok := readObject(b, plan, spans)
	if !ok {
		return fieldErr(path, "must be a JSON object")
	}
	if names.hasUnknown {
		return unknownField(names.unknown, path)
	}
	if names.hasRepeat {
		return repeatedField(names.repeated, path)
	}
	for i := range plan.fields {
		fp := &plan.fields[i]
		s := spans[fp.slot]
		raw := b[s.start:s.end]
		fpath := fieldPath{up: path, name: fp.Name}
		if s.end == 0 || string(raw) == "null" {
			if fp.required {
				return fieldErr(fpath.String(), "is required")
			}
			continue
		}
		if err := fp.decode(raw, v.Field(fp.Index), fpath); err != nil {
			return err
		}
	}
	return nil
}

// unknownField refuses a field the request type does not have: a client
// that sends "leverage" or misspells "reduceOnly" must learn that it was
// not applied, not have its order placed without it (the OpenAPI document
// closes every request object, additionalProperties false). The first
// unknown name in sorted order is reported, so the answer is stable.
func unknownField(name []byte, path string) error {
	fpath := fieldPath{up: path, name: string(name)}
	return fieldErr(fpath.String(), "is not a field of this request")
}

// repeatedField refuses a name given twice in one object. encoding/json
// would keep the last value and many other readers keep the first, so a
// proxy or an audit log in front of the venue could see another order
// than the one placed ({"contracts":"1","contracts":"2"}). The first name
// to come back, in the order of the bytes, is reported.
func repeatedField(name []byte, path string) error {
	fpath := fieldPath{up: path, name: string(name)}
	return fieldErr(fpath.String(), "is given more than once")
}

// decode reads one present, non-null field into fv and checks its tags.
// An optional field's pointer is set only once its value has passed.
func (fp *fieldPlan) decode(raw []byte, fv reflect.Value, p fieldPath) error {
	target := fv
	var ptr reflect.Value
	if fp.Pointer {
		ptr = reflect.New(fp.Type)
		target = ptr.Elem()
	}
	if err := decodeValue(raw, target, fp.value, p, fp.enum); err != nil {
		return err
	}
	if err := fp.check(target, p); err != nil {
		return err
	}
	if fp.Pointer {
		fv.Set(ptr)
	}
	return nil
}

// decodeValue reads raw, one well-formed JSON value, into v. A null leaves
// a string, boolean or integer as it was and makes a slice empty, as
// encoding/json does; fields never see it (null is absent), elements do.
// enum, if any, lets a string that is one of its values share its text.
func decodeValue(raw []byte, v reflect.Value, vp *valuePlan, p fieldPath, enum []string) error {
	switch vp.kind {
	case structKind:
		return decodeStruct(raw, v, planOf(vp.typ), p.String())
	case wireIntKind:
		n, err := wire.ParseQuoted(raw)
		if err != nil {
			return fieldErr(p.String(), "%v", err)
		}
		v.SetInt(n)
		return nil
	case sliceKind:
		return decodeSlice(raw, v, vp, p, enum)
	case stringKind:
		switch raw[0] {
		case '"':
			v.SetString(jsonString(raw, enum))
			return nil
		case 'n':
			return nil
		}
	case boolKind:
		switch raw[0] {
		case 't', 'f':
			v.SetBool(raw[0] == 't')
			return nil
		case 'n':
			return nil
		}
	case intKind:
		switch c := raw[0]; {
		case c == 'n':
			return nil
		case c == '-' || c >= '0' && c <= '9':
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err == nil && !v.OverflowInt(n) {
				v.SetInt(n)
				return nil
			}
		}
	default:
		if json.Unmarshal(raw, v.Addr().Interface()) == nil {
			if name, found := repeatedName(raw); found {
				return repeatedField(name, p.String())
			}
			return nil
		}
	}
	return fieldErr(p.String(), "must be %s", kindName(vp.typ))
}

// decodeSlice reads a JSON array (or null, an empty slice) into v.
func decodeSlice(raw []byte, v reflect.Value, vp *valuePlan, p fieldPath, enum []string) error {
	if string(raw) == "null" {
		v.Set(reflect.MakeSlice(vp.typ, 0, 0))
		return nil
	}
	if raw[0] != '[' {
		return fieldErr(p.String(), "must be an array")
	}
	var buf [spanBuf]span
	items := arrayItems(raw, buf[:0])
	out := reflect.MakeSlice(vp.typ, len(items), len(items))
	path := p.String()
	for i, it := range items {
		ipath := fieldPath{up: path, index: i, elem: true}
		if err := decodeValue(raw[it.start:it.end], out.Index(i), vp.elem, ipath, enum); err != nil {
			return err
		}
	}
	v.Set(out)
	return nil
}
