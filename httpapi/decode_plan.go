package httpapi

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// structPlan is what decodeStruct needs of a request type, worked out once
// per type from its tags (planOf caches it): reading tags and parsing
// their numbers on every request cost more than the JSON itself.
type structPlan struct {
	fields []fieldPlan
	names  []string       // slot -> wire name
	index  map[string]int // wire name -> slot, for a type with many
}

// linearSlots is how many names slotOf compares one by one before a map
// lookup is faster.
const linearSlots = 16

// slotOf finds a member's name among the type's wire names. Clients
// mostly send fields in declaration order, so the slot after the last
// one found is tried first.
func (p *structPlan) slotOf(name []byte, hint int) (int, bool) {
	if hint < len(p.names) && p.names[hint] == string(name) {
		return hint, true
	}
	if p.index != nil {
		slot, ok := p.index[string(name)]
		return slot, ok
	}
	for slot, n := range p.names {
		if n == string(name) {
			return slot, true
		}
	}
	return 0, false
}

type fieldPlan struct {
	wireField
	slot           int // where readObject puts its value
	required       bool
	enum           []string
	hasMin, hasMax bool
	min, max       int64
	maxLen         int // -1: none
	value          *valuePlan
}

// valuePlan says how to read a value of one Go type.
type valuePlan struct {
	kind valueKind
	typ  reflect.Type
	elem *valuePlan // sliceKind
}

// valueKind picks the reader of a type. The scalar kinds are types with no
// unmarshal method of their own; anything else encoding/json reads.
type valueKind int

const (
	otherKind   valueKind = iota // encoding/json
	structKind                   // field by field, by its plan
	sliceKind                    // element by element
	wireIntKind                  // wire.Int: a quoted decimal
	stringKind
	boolKind
	intKind // signed integers, from JSON numbers
)

var plans sync.Map // reflect.Type -> *structPlan

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{}
	slots := map[string]int{}
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
		slot, seen := slots[wf.Name]
		if !seen {
			slot = len(p.names)
			slots[wf.Name] = slot
			p.names = append(p.names, wf.Name)
		}
		fp.slot = slot
		fp.value = valuePlanOf(wf.Type)
		p.fields = append(p.fields, fp)
	}
	if len(p.names) > linearSlots {
		p.index = slots
	}
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*structPlan)
}

// valuePlanOf mirrors the reflective decoder's choice: plain structs field
// by field, wire.Int by wire.ParseQuoted, slices (but []byte) element by
// element, everything else by encoding/json. A struct's own plan is looked
// up when it is read, so a type may contain itself.
func valuePlanOf(t reflect.Type) *valuePlan {
	vp := &valuePlan{typ: t}
	switch {
	case isPlainStruct(t):
		vp.kind = structKind
	case t == intType:
		vp.kind = wireIntKind
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		vp.kind = sliceKind
		vp.elem = valuePlanOf(t.Elem())
	case reflect.PointerTo(t).Implements(unmarshalerTy) || reflect.PointerTo(t).Implements(textUnmarshalerType):
		vp.kind = otherKind
	case t.Kind() == reflect.String:
		vp.kind = stringKind
	case t.Kind() == reflect.Bool:
		vp.kind = boolKind
	case isIntKind(t.Kind()):
		vp.kind = intKind
	}
	return vp
}

// check applies the field's enum, min, max and maxLen tags to its value.
func (fp *fieldPlan) check(v reflect.Value, p fieldPath) error {
	switch fp.value.kind {
	case structKind, boolKind:
		return nil
	case stringKind:
		s := v.String()
		if fp.enum != nil && !slices.Contains(fp.enum, s) {
			return fp.enumErr(p.String())
		}
		if fp.maxLen >= 0 && len(s) > fp.maxLen {
			return fieldErr(p.String(), "is longer than %d bytes", fp.maxLen)
		}
		return nil
	case wireIntKind, intKind:
		return fp.checkInt(v.Int(), p)
	}
	if fp.enum != nil {
		switch v.Kind() {
		case reflect.String:
			if !slices.Contains(fp.enum, v.String()) {
				return fp.enumErr(p.String())
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				if !slices.Contains(fp.enum, v.Index(i).String()) {
					ipath := fieldPath{up: p.String(), index: i, elem: true}
					return fp.enumErr(ipath.String())
				}
			}
		}
	}
	if isIntKind(v.Kind()) {
		if err := fp.checkInt(v.Int(), p); err != nil {
			return err
		}
	}
	if fp.maxLen >= 0 && (v.Kind() == reflect.String || v.Kind() == reflect.Slice) && v.Len() > fp.maxLen {
		return fieldErr(p.String(), "is longer than %d%s", fp.maxLen, lenUnit(v.Kind()))
	}
	return nil
}

// lenUnit names what a maxLen bound counts: bytes of a string (UTF-8, as
// /openapi.json says beside maxLength), elements of an array.
func lenUnit(k reflect.Kind) string {
	if k == reflect.String {
		return " bytes"
	}
	return ""
}

func (fp *fieldPlan) checkInt(n int64, p fieldPath) error {
	if fp.hasMin && n < fp.min {
		return fieldErr(p.String(), "must be at least %d", fp.min)
	}
	if fp.hasMax && n > fp.max {
		return fieldErr(p.String(), "must be at most %d", fp.max)
	}
	return nil
}

func (fp *fieldPlan) enumErr(path string) error {
	return fieldErr(path, "must be one of %s", strings.Join(fp.enum, ", "))
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}
