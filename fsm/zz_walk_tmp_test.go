package fsm

import (
	"fmt"
	"reflect"
	"testing"
)

func TestTmpWalk(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		for tp.Kind() == reflect.Pointer {
			tp = tp.Elem()
		}
		switch tp.Kind() {
		case reflect.Struct:
			if seen[tp] {
				fmt.Println("CYCLE/REPEAT", path, tp)
				return
			}
			seen[tp] = true
			defer delete(seen, tp)
			for i := 0; i < tp.NumField(); i++ {
				f := tp.Field(i)
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				tag := f.Tag.Get("cbor")
				walk2(f.Type, p, tag, walk)
			}
		case reflect.Map, reflect.Slice, reflect.Array:
			fmt.Println("COLL", path, tp)
			walk(tp.Elem(), path+"[]")
		}
	}
	walk(reflect.TypeOf(State{}), "")
}

func walk2(tp reflect.Type, p, tag string, walk func(reflect.Type, string)) {
	t := tp
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Map || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		fmt.Printf("COLL %s %s  tag=%q\n", p, tp, tag)
		walk(t.Elem(), p+"[]")
		return
	}
	walk(tp, p)
}
