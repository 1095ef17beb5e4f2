package harness

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perpd/perpd/jepsen/workload"
)

// bugs are client-side planted bugs, registered only by files built with
// the jepsen_bug tag (bug_client.go): production harness builds have none.
var bugs = map[string]func([]workload.Kind) []workload.Kind{}

func checkBug(name string) error {
	if name == "" {
		return nil
	}
	if _, ok := bugs[name]; !ok {
		var known []string
		for k := range bugs {
			known = append(known, k)
		}
		sort.Strings(known)
		if len(known) == 0 {
			return fmt.Errorf("bug %q: this harness was built without -tags jepsen_bug", name)
		}
		return fmt.Errorf("unknown bug %q (known: %s)", name, strings.Join(known, ", "))
	}
	return nil
}

func plantBug(name string, kinds []workload.Kind) []workload.Kind { return bugs[name](kinds) }
