package httpapi

import (
	"reflect"
	"strings"
)

// wireField is one JSON field of a request or response struct, as the
// decoder, the OpenAPI generator and the llms.txt index all see it.
type wireField struct {
	Name      string              // JSON name
	Index     int                 // struct field index
	Field     reflect.StructField // for its tags
	Type      reflect.Type        // the field's type, pointer removed
	Pointer   bool                // optional in requests; nullable or omitted in responses
	OmitEmpty bool                // ",omitempty": optional in responses
}

// wireFields lists the exported JSON fields of struct type t in order.
func wireFields(t reflect.Type) []wireField {
	var out []wireField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := jsonName(sf)
		if name == "" {
			continue
		}
		_, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		f := wireField{Name: name, Index: i, Field: sf, Type: sf.Type, OmitEmpty: strings.Contains(opts, "omitempty")}
		if f.Type.Kind() == reflect.Pointer {
			f.Type, f.Pointer = f.Type.Elem(), true
		}
		out = append(out, f)
	}
	return out
}

func jsonName(sf reflect.StructField) string {
	tag := sf.Tag.Get("json")
	if tag == "-" || !sf.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = sf.Name
	}
	return name
}
