package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// Shapes a field added to State (or IdemStore) might take. For each, the
// field encoder either refuses the type when it reads its fields (at
// start-up, as for State) or writes exactly Marshal's bytes: never other
// bytes in silence, which would give a hash no replica of an older build
// shares and a snapshot Marshal's decoder reads differently.

type shapeOmitZero struct {
	A uint64         `cbor:"1,keyasint,omitzero"`
	M map[string]int `cbor:"2,keyasint,omitzero"`
}

type shapeInner struct {
	B int64 `cbor:"2,keyasint"`
}

type shapeEmbeddedUnexported struct {
	A int64 `cbor:"1,keyasint"`
	shapeInner
}

type shapeToArray struct {
	_ struct{} `cbor:",toarray"`
	A int64    `cbor:"1,keyasint"`
	B int64    `cbor:"2,keyasint"`
}

type shapeDuplicateKey struct {
	A int64 `cbor:"1,keyasint"`
	B int64 `cbor:"01,keyasint"`
}

// marshalerMap encodes itself: the encoder never finds it empty.
type marshalerMap map[string]int

func (m marshalerMap) MarshalCBOR() ([]byte, error) { return encMode.Marshal(len(m)) }

type shapeMarshalerOmitEmpty struct {
	A int64        `cbor:"1,keyasint"`
	M marshalerMap `cbor:"2,keyasint,omitempty"`
}

// binaryCount encodes as a byte string of MarshalBinary's bytes: empty
// when they are, whatever its own value.
type binaryCount uint64

func (c binaryCount) MarshalBinary() ([]byte, error) { return []byte{1}, nil }

type shapeBinaryOmitEmpty struct {
	A int64       `cbor:"1,keyasint"`
	C binaryCount `cbor:"2,keyasint,omitempty"`
}

// The shapes the encoder knows, for contrast: these must encode as Marshal.
type shapeKnown struct {
	Neg   int64             `cbor:"-3,keyasint"`
	A     int               `cbor:"1,keyasint,omitempty"`
	P     *Genesis          `cbor:"2,keyasint,omitempty"`
	M     map[string]int    `cbor:"3,keyasint,omitempty"`
	S     []byte            `cbor:"4,keyasint,omitempty"`
	U     uint32            `cbor:"300,keyasint,omitempty"`
	Skip  int               `cbor:"-"`
	Plain map[int64]string  `cbor:"25,keyasint"`
	Nil   map[string]uint64 `cbor:"26,keyasint"`
	hide  int
}

func TestFieldEncoderRefusesWhatItWouldEncodeOtherwise(t *testing.T) {
	for _, v := range []any{
		&shapeOmitZero{},
		&shapeOmitZero{A: 1, M: map[string]int{}},
		&shapeEmbeddedUnexported{A: 1, shapeInner: shapeInner{B: 2}},
		&shapeToArray{A: 1, B: 2},
		&shapeDuplicateKey{A: 1, B: 2},
		&shapeMarshalerOmitEmpty{A: 1},
		&shapeBinaryOmitEmpty{A: 1},
		&shapeKnown{Neg: -5, Plain: map[int64]string{-1: "a", 24: "b"}, hide: 1},
		&shapeKnown{A: -1, P: &Genesis{}, M: map[string]int{"": 0}, S: []byte{}, U: 1 << 20},
	} {
		t.Run(fmt.Sprintf("%T%+v", v, v), func(t *testing.T) {
			got, refused := fieldEncode(v)
			if refused != nil {
				if _, known := v.(*shapeKnown); known {
					t.Fatalf("a shape the field encoder knows was refused: %v", refused)
				}
				return
			}
			want, err := Marshal(v)
			if err != nil {
				t.Fatalf("Marshal refuses it (%v) but the field encoder wrote %x", err, got)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the field encoder wrote %x, Marshal %x", got, want)
			}
		})
	}
}

// fieldEncode encodes the struct v points to as writeState does State, or
// says why fieldsOf refused its type.
func fieldEncode(v any) (out []byte, refused any) {
	defer func() { refused = recover() }()
	rv := reflect.ValueOf(v).Elem()
	fields := fieldsOf(rv.Type())
	var w bytes.Buffer
	e := &fieldWriter{w: &w, buf: new(bytes.Buffer)}
	if err := e.structFields(rv, fields, nil); err != nil {
		panic(err)
	}
	return w.Bytes(), nil
}
