package fsm

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("cbor")
		parts := strings.Split(tag, ",")
		n, err := strconv.Atoi(parts[0])
		if err != nil || !f.IsExported() || !hasOpt(parts, "keyasint") {
			panic(fmt.Sprintf("fsm: State.%s: tag %q: the field encoder needs an exported keyasint field", f.Name, tag))
		}
		sf := stateField{index: i, omitEmpty: hasOpt(parts, "omitempty"), kind: f.Type.Kind()}
		switch sf.kind {
		case reflect.Pointer, reflect.Map, reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		default:
			panic(fmt.Sprintf("fsm: State.%s: the field encoder does not know a %s's emptiness", f.Name, sf.kind))
		}
		if sf.key, err = encMode.Marshal(n); err != nil {
			panic(err)
		}
		out = append(out, sf)
	}
	if len(out) >= 24 {
		panic("fsm: State has 24 fields or more: the map head needs a longer form")
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].key, out[j].key) < 0 })
	return out
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
	case reflect.Map:
		return v.Len() == 0
	case reflect.Int, reflect.Int64:
		return v.Int() == 0
	default:
		return v.Uint() == 0
	}
}

// writeState writes the canonical CBOR of st to w a field at a time,
// through buf (reset and reused for each field's value), and returns the
// largest field's encoded size and the whole encoding's.
func writeState(w io.Writer, st *State, buf *bytes.Buffer) (largest, total int, err error) {
	v := reflect.ValueOf(st).Elem()
	fields := stateFields()
	present := 0
	for _, f := range fields {
		if !f.omitEmpty || !f.empty(v.Field(f.index)) {
			present++
		}
	}
	if _, err := w.Write([]byte{0xa0 | byte(present)}); err != nil { // a map of present pairs
		return 0, 0, err
	}
	total = 1
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && f.empty(fv) {
			continue
		}
		buf.Reset()
		buf.Write(f.key)
		if err := encMode.MarshalToBuffer(fv.Interface(), buf); err != nil {
			return 0, 0, err
		}
		largest, total = max(largest, buf.Len()), total+buf.Len()
		if _, err := w.Write(buf.Bytes()); err != nil {
			return 0, 0, err
		}
	}
	return largest, total, nil
}
