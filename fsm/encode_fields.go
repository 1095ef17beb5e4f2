package fsm

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// State encoded one top-level field at a time. Canonical CBOR of a struct
// is a map head, then each present field's key and value in the order of
// the keys' bytes; encoding the whole State into one buffer needs the
// whole encoding in memory, twice over for the largest map's sort (150 MB
// of State held 300 MB while a hash or a snapshot ran, at every replica).
// Writing the head and keys here and each field's value through the same
// encoder gives the same bytes (TestSnapshotAndHashEncodeAsMarshal) with
// only the largest field's encoding in memory at once; the snapshot
// streams to its file and the hash to SHA-256.

// stateField is one of State's fields as the encoder writes it.
type stateField struct {
	name      string
	index     int    // in State
	key       []byte // the key's canonical encoding
	omitEmpty bool
	kind      reflect.Kind
}

// stateFields are State's fields in the canonical order of their keys
// (read once, after init has made the encoder).
var stateFields = sync.OnceValue(func() []stateField { return fieldsOf(reflect.TypeFor[State]()) })

// fieldsOf reads the cbor tags of t, a struct of keyasint fields, and
// refuses (at start-up) anything this encoder does not reproduce.
func fieldsOf(t reflect.Type) []stateField {
	var out []stateField
	seen := map[int]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("cbor")
		refuse := func(why string) {
			panic(fmt.Sprintf("fsm: %s.%s: tag %q: %s", t.Name(), f.Name, tag, why))
		}
		if tag == "-" {
			continue // the encoder leaves it out too
		}
		switch {
		case f.Name == "_" && tag != "":
			refuse("struct options (toarray) are not written by the field encoder")
		case f.Anonymous:
			// The encoder promotes an embedded struct's fields, exported
			// or not.
			refuse("the field encoder does not promote embedded fields")
		case !f.IsExported():
			continue // the encoder leaves it out too
		}
		parts := strings.Split(tag, ",")
		n, err := strconv.Atoi(parts[0])
		if err != nil || !hasOpt(parts, "keyasint") {
			refuse("the field encoder needs a keyasint field")
		}
		for _, opt := range parts[1:] {
			if opt != "keyasint" && opt != "omitempty" {
				refuse("the field encoder knows omitempty only") // omitzero leaves out other values
			}
		}
		if seen[n] {
			refuse("a key used twice (the encoder drops both)")
		}
		seen[n] = true
		sf := stateField{name: f.Name, index: i, omitEmpty: hasOpt(parts, "omitempty"), kind: f.Type.Kind()}
		switch sf.kind {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		default:
			refuse(fmt.Sprintf("the field encoder does not know a %s's emptiness", sf.kind))
		}
		if sf.omitEmpty && sf.kind != reflect.Pointer && marshals(f.Type) {
			// A marshaler is empty as the encoder judges its output
			// (never, for a cbor.Marshaler), not by its length or value.
			refuse("the field encoder does not know a marshaler's emptiness")
		}
		if sf.key, err = encMode.Marshal(n); err != nil {
			panic(err)
		}
		out = append(out, sf)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].key, out[j].key) < 0 })
	return out
}

// marshals says whether t (or *t) encodes itself.
func marshals(t reflect.Type) bool {
	for _, m := range []reflect.Type{reflect.TypeFor[cbor.Marshaler](), reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.TextMarshaler]()} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return true
		}
	}
	return false
}

func hasOpt(parts []string, opt string) bool {
	for _, p := range parts[1:] {
		if p == opt {
			return true
		}
	}
	return false
}

// empty says whether an omitempty field is left out, as the encoder
// decides it.
func (f stateField) empty(v reflect.Value) bool {
	switch f.kind {
	case reflect.Pointer:
		return v.IsNil()
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Int, reflect.Int64:
		return v.Int() == 0
	default:
		return v.Uint() == 0
	}
}

// writeState writes the canonical CBOR of st to w a field at a time,
// through buf (reset and reused for each value the encoder writes), and
// returns the largest such value's encoded size and the whole encoding's.
// The idempotency store, most of a busy State (500,000 records: 107 of a
// 117 MB State in the soak), goes one level further: its records and
// their order are written a record at a time.
func writeState(w io.Writer, st *State, buf *bytes.Buffer) (largest, total int, err error) {
	e := &fieldWriter{w: w, buf: buf}
	err = e.structFields(reflect.ValueOf(st).Elem(), stateFields(), map[string]func(reflect.Value) error{
		"Idem": func(fv reflect.Value) error {
			if fv.IsNil() {
				return e.value(fv.Interface())
			}
			return e.structFields(fv.Elem(), idemFields(), map[string]func(reflect.Value) error{
				"Records": e.idemRecords,
				"Order":   e.texts,
			})
		},
	})
	return e.largest, e.total, err
}

// idemFields are IdemStore's fields in canonical order.
var idemFields = sync.OnceValue(func() []stateField { return fieldsOf(reflect.TypeFor[IdemStore]()) })

// fieldWriter writes canonical CBOR to w, counting what it wrote and the
// largest value it encoded through buf.
type fieldWriter struct {
	w              io.Writer
	buf            *bytes.Buffer
	largest, total int
}

func (e *fieldWriter) raw(p []byte) error {
	n, err := e.w.Write(p)
	e.total += n
	return err
}

func (e *fieldWriter) text(s string) error {
	if err := e.head(0x60, uint64(len(s))); err != nil {
		return err
	}
	n, err := io.WriteString(e.w, s)
	e.total += n
	return err
}

// value writes v as the encoder does, through buf.
func (e *fieldWriter) value(v any) error {
	e.buf.Reset()
	if err := encMode.MarshalToBuffer(v, e.buf); err != nil {
		return err
	}
	e.largest = max(e.largest, e.buf.Len())
	return e.raw(e.buf.Bytes())
}

// head writes a CBOR head: major is the major type in the top three bits,
// n its argument, in the shortest form (as canonical CBOR requires).
func (e *fieldWriter) head(major byte, n uint64) error {
	var b [9]byte
	switch {
	case n < 24:
		b[0] = major | byte(n)
		return e.raw(b[:1])
	case n <= 0xff:
		b[0], b[1] = major|24, byte(n)
		return e.raw(b[:2])
	case n <= 0xffff:
		b[0] = major | 25
		binary.BigEndian.PutUint16(b[1:], uint16(n))
		return e.raw(b[:3])
	case n <= 0xffffffff:
		b[0] = major | 26
		binary.BigEndian.PutUint32(b[1:], uint32(n))
		return e.raw(b[:5])
	default:
		b[0] = major | 27
		binary.BigEndian.PutUint64(b[1:], n)
		return e.raw(b[:9])
	}
}

// structFields writes v, a struct of keyasint fields, as a map of its
// present fields in key order; a field named in deeper is written by its
// function (after its key), any other through the encoder.
func (e *fieldWriter) structFields(v reflect.Value, fields []stateField, deeper map[string]func(reflect.Value) error) error {
	present := 0
	for _, f := range fields {
		if !f.omitEmpty || !f.empty(v.Field(f.index)) {
			present++
		}
	}
	if err := e.head(0xa0, uint64(present)); err != nil {
		return err
	}
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && f.empty(fv) {
			continue
		}
		if err := e.raw(f.key); err != nil {
			return err
		}
		write := e.value
		if d, ok := deeper[f.name]; ok {
			write = func(any) error { return d(fv) }
		}
		if err := write(fv.Interface()); err != nil {
			return err
		}
	}
	return nil
}

// idemRecords writes the store's records a pair at a time, in canonical
// key order. A text key encodes as a head growing with its length, then
// its bytes, so the encodings' bytewise order is by length, then bytes.
func (e *fieldWriter) idemRecords(fv reflect.Value) error {
	records := fv.Interface().(map[string]*IdemRecord)
	if records == nil {
		return e.value(records)
	}
	keys := make([]string, 0, len(records))
	for k := range records {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j])
		}
		return keys[i] < keys[j]
	})
	if err := e.head(0xa0, uint64(len(keys))); err != nil {
		return err
	}
	for _, k := range keys {
		if err := e.text(k); err != nil {
			return err
		}
		if err := e.value(records[k]); err != nil {
			return err
		}
	}
	return nil
}

// texts writes a []string a string at a time.
func (e *fieldWriter) texts(fv reflect.Value) error {
	list := fv.Interface().([]string)
	if list == nil {
		return e.value(list)
	}
	if err := e.head(0x80, uint64(len(list))); err != nil {
		return err
	}
	for _, s := range list {
		if err := e.text(s); err != nil {
			return err
		}
	}
	return nil
}
