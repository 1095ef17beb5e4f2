package httpapi

import (
	"regexp"
	"sort"
	"testing"
)

// unitNamed matches the field names that by their suffix hold a money,
// price, rate, timestamp, duration, contract count or sequence value.
var unitNamed = regexp.MustCompile(`(Msat|Sats|Q8|Q9|Q9PerH|Ms|Seq|Contracts)$|^(seq|contracts|tsMs)$`)

// TestUnitNamedFieldsCarryUnit: SPEC wire rule 3 has the description mark
// each such field with x-svc-unit (and rule 1 the decimal-integer
// pattern). A hand-formatted string field (lastAttestation.asOfTsMs of
// GET /v1/usdx) went out on the wire as a timestamp string but was
// described as a bare string.
func TestUnitNamedFieldsCarryUnit(t *testing.T) {
	a := newTestAPI(t)
	doc := a.srv.OpenAPI()
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	var bad []string
	var walk func(where string, s map[string]any)
	walk = func(where string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			if ps == nil {
				continue
			}
			if items, ok := ps["items"].(map[string]any); ok {
				walk(where+"."+name+"[]", items)
			}
			walk(where+"."+name, ps)
			if !unitNamed.MatchString(name) {
				continue
			}
			if _, isRef := ps["$ref"]; isRef {
				continue
			}
			branch := ps
			if one, ok := ps["oneOf"].([]any); ok {
				branch = nil
				for _, b := range one {
					if bm, _ := b.(map[string]any); bm != nil && bm["type"] != "null" {
						branch = bm
					}
				}
				if branch == nil {
					continue
				}
				if _, isRef := branch["$ref"]; isRef {
					continue
				}
			}
			if _, ok := branch["x-svc-unit"]; !ok {
				bad = append(bad, where+"."+name+": no x-svc-unit")
			} else if branch["pattern"] != "^-?[0-9]+$" {
				bad = append(bad, where+"."+name+": no decimal-integer pattern")
			}
		}
	}
	for name, s := range schemas {
		walk(name, s.(map[string]any))
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
