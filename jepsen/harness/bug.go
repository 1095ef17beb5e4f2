package harness

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/workload"
)

// bugs are client-side planted bugs, registered only by files built with
// the jepsen_bug tag (bug_client.go): production harness builds have none.
var bugs = map[string]func([]workload.Kind) []workload.Kind{}

// viewBugs are planted replica bugs: each rewrites the final view the
// harness read from a node, as a replica with that bug would have listed
// it. Registered like bugs, only under the jepsen_bug tag.
var viewBugs = map[string]func(node string, nodes []string, v *checker.TraderView){}

// withdrawalBugs are planted bugs of the final withdrawal reads: each
// rewrites what the harness read from a node before the checker sees it.
var withdrawalBugs = map[string]func(node string, nodes []string, v *checker.WithdrawerView){}

func checkBug(name string) error {
	if name == "" {
		return nil
	}
	_, kind := bugs[name]
	_, view := viewBugs[name]
	_, wd := withdrawalBugs[name]
	if !kind && !view && !wd {
		var known []string
		for k := range bugs {
			known = append(known, k)
		}
		for k := range viewBugs {
			known = append(known, k)
		}
		for k := range withdrawalBugs {
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

func plantBug(name string, kinds []workload.Kind) []workload.Kind {
	if plant, ok := bugs[name]; ok {
		return plant(kinds)
	}
	return kinds
}

// corruptView applies the planted replica bug, if any, to node's view.
func (r *run) corruptView(node string, v *checker.TraderView) {
	if plant, ok := viewBugs[r.opts.Bug]; ok {
		plant(node, r.env.Nodes, v)
	}
}

// corruptWithdrawals applies the planted withdrawal-read bug, if any, to
// node's view.
func (r *run) corruptWithdrawals(node string, v *checker.WithdrawerView) {
	if plant, ok := withdrawalBugs[r.opts.Bug]; ok {
		plant(node, r.env.Nodes, v)
	}
}
