package fsm

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/trade"
)

// collectionSize is what stateSizes measures of one collection path: the
// entries summed over every parent, the largest parent's, and how many
// parents hold it.
type collectionSize struct {
	total, maxPer, parents int
}

// stateSizes walks a State value as stateCollections walks its type and
// measures every map and slice by path ("Trade.Accounts[].Fills").
func stateSizes(st *State) map[string]*collectionSize {
	out := map[string]*collectionSize{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Map, reflect.Slice:
			c := out[path]
			if c == nil {
				c = &collectionSize{}
				out[path] = c
			}
			n := v.Len()
			c.total += n
			c.parents++
			c.maxPer = max(c.maxPer, n)
			if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
				return
			}
			if v.Kind() == reflect.Map {
				for it := v.MapRange(); it.Next(); {
					walk(it.Value(), path+"[]")
				}
			} else {
				for i := range n {
					walk(v.Index(i), path+"[]")
				}
			}
		case reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), path)
			}
		case reflect.Struct:
			if !strings.HasPrefix(v.Type().PkgPath(), "github.com/perpd/perpd") {
				return // an outside container (a B-tree): not measured
			}
			for i := range v.NumField() {
				p := v.Type().Field(i).Name
				if path != "" {
					p = path + "." + p
				}
				walk(v.Field(i), p)
			}
		}
	}
	walk(reflect.ValueOf(st), "")
	return out
}

// soakBounds are the numeric bounds, from docs/decisions.md, that a soak
// run's state is checked against: at most perParent in any one parent
// (an account's fills), at most total over the whole state.
var soakBounds = map[string]struct{ perParent, total int }{
	"Idem.Records":                        {total: IdemMaxRecords},
	"Idem.Order":                          {total: 2*IdemMaxRecords + 1},
	"Trade.Accounts[].Fills":              {perParent: trade.FillsKept},
	"Trade.Accounts[].Closed":             {perParent: trade.ClosedOrdersKept},
	"Trade.Accounts[].Live":               {perParent: trade.RestingOrdersPerAccountMax},
	"Trade.Accounts[].Triggers":           {perParent: trade.RestingOrdersPerAccountMax},
	"Trade.Accounts[].OrderNos":           {perParent: trade.RestingOrdersPerAccountMax + trade.ClosedOrdersKept},
	"Trade.Accounts[].FundingFlows":       {perParent: trade.FundingFlowsKept},
	"Trade.Accounts[].Liquidations":       {perParent: trade.LiquidationsKept},
	"Access.Accounts[].KeyIDs":            {perParent: access.MaxKeysPerAccount},
	"Market.MarketsByID[].Minute":         {perParent: market.MinuteBarsMax},
	"Market.MarketsByID[].Funding":        {perParent: market.FundingHistoryMax},
	"Trade.Books[].Index.Entries":         {perParent: 2 * market.PriceIndexEntriesMax},
	"Access.Accounts[].FaucetGrantsTsMs":  {perParent: 1000}, // GrantsPerHour (bench profile: x1000)
	"Market.MarketsByID[].Hour":           {perParent: market.HourBarsMax},
	"Market.MarketsByID[].Day":            {perParent: market.DayBarsMax},
	"PoR.History":                         {total: por.HistoryMax},
	"Growth.Board.Rows[]":                 {perParent: growth.BoardRowsMax},
	"Growth.Board.Traders[].Snap.Curve":   {perParent: growth.CurveDays},
	"Growth.Board.Traders[].Snap.Ranks":   {perParent: 6}, // boards x windows
	"Growth.Board.Traders[].Snap.Windows": {perParent: 3},
}

// perAccountSlack is how much more per account a collection without a
// numeric bound may hold at the end of a soak run than at its middle (as
// a fraction), plus a fixed few entries for the small ones.
const (
	perAccountSlack      = 0.15
	perAccountSlackFixed = 16
)

// soakGrowthProblems compares two states of one run: a collection without
// a numeric bound in soakBounds must grow no faster than the accounts do
// (accounts are never deleted and come at most at the signup cap; what
// hangs off them is bounded per account). Byte slices (answer bodies,
// hashes) are measured as collections too.
func soakGrowthProblems(mid, end map[string]*collectionSize, midAccounts, endAccounts int) []string {
	var out []string
	if midAccounts == 0 {
		return nil
	}
	for p, e := range end {
		if _, ok := soakBounds[p]; ok || strings.HasPrefix(p, "Idem.") {
			continue // checked against its number; the store by its own
		}
		m := mid[p]
		midTotal := 0
		if m != nil {
			midTotal = m.total
		}
		allowed := float64(midTotal)/float64(midAccounts)*float64(endAccounts)*(1+perAccountSlack) + perAccountSlackFixed
		if float64(e.total) > allowed {
			out = append(out, fmt.Sprintf("%s: %d entries at the end for %d accounts, %d at the middle for %d: grows faster than the accounts",
				p, e.total, endAccounts, midTotal, midAccounts))
		}
	}
	sort.Strings(out)
	return out
}

// TestSoakStateSizes measures the collections of the snapshot files named
// by PERPD_SOAK_SNAPSHOT (comma-separated, oldest first: `perpd admin
// snapshot` files; bench/soak.sh takes one at the middle of its run and
// one at the end), prints them side by side, and fails for a collection
// of the newest past its bound in soakBounds. Skipped without the
// variable.
func TestSoakStateSizes(t *testing.T) {
	files := os.Getenv("PERPD_SOAK_SNAPSHOT")
	if files == "" {
		t.Skip("PERPD_SOAK_SNAPSHOT names no snapshot")
	}
	var b strings.Builder
	var all []map[string]*collectionSize
	var accounts []int
	paths := map[string]bool{}
	for _, file := range strings.Split(files, ",") {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// A backup file (`perpd admin snapshot`) heads the raw snapshot
		// with its magic line and a metadata line.
		if rest, ok := bytes.CutPrefix(data, []byte("perpd-snapshot v1\n")); ok {
			if _, raw, ok := bytes.Cut(rest, []byte("\n")); ok {
				data = raw
			}
		}
		st, index, err := decodeSnapshot(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		sizes := stateSizes(st)
		all = append(all, sizes)
		accounts = append(accounts, len(st.Access.Accounts))
		for p, c := range sizes {
			if c.total > 0 {
				paths[p] = true
			}
		}
		fmt.Fprintf(&b, "%s: index %d, %d bytes encoded, %d accounts, idempotency store %d records %d bytes counted (bound %d, %d)\n",
			file, index, len(data), len(st.Access.Accounts), len(st.Idem.Records), st.Idem.Bytes, IdemMaxRecords, IdemMaxBytes)
		problems := soakSizeProblems(st, sizes)
		for _, e := range problems {
			t.Error(e)
			fmt.Fprintf(&b, "PAST ITS BOUND: %s\n", e)
		}
	}
	for i := 1; i < len(all); i++ {
		for _, e := range soakGrowthProblems(all[i-1], all[i], accounts[i-1], accounts[i]) {
			t.Error(e)
			fmt.Fprintf(&b, "GROWS: %s\n", e)
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	fmt.Fprintf(&b, "%-40s", "collection: entries (largest one) per snapshot")
	for range all {
		fmt.Fprintf(&b, " %20s", "")
	}
	fmt.Fprintf(&b, "  bound\n")
	for _, p := range sorted {
		fmt.Fprintf(&b, "%-40s", p)
		for _, sizes := range all {
			if c := sizes[p]; c != nil {
				fmt.Fprintf(&b, " %20s", fmt.Sprintf("%d (%d)", c.total, c.maxPer))
			} else {
				fmt.Fprintf(&b, " %20s", "-")
			}
		}
		if bd, ok := soakBounds[p]; ok {
			if bd.perParent > 0 {
				fmt.Fprintf(&b, "  %d each", bd.perParent)
			} else {
				fmt.Fprintf(&b, "  %d", bd.total)
			}
		}
		b.WriteString("\n")
	}
	if out := os.Getenv("PERPD_SOAK_SIZES_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("\n" + b.String())
	}
}

// soakSizeProblems lists every bound of soakBounds the state exceeds.
func soakSizeProblems(st *State, sizes map[string]*collectionSize) []string {
	var out []string
	for p, b := range soakBounds {
		c := sizes[p]
		if c == nil {
			continue
		}
		if b.perParent > 0 && c.maxPer > b.perParent {
			out = append(out, fmt.Sprintf("%s: %d in one parent, bound %d", p, c.maxPer, b.perParent))
		}
		if b.total > 0 && c.total > b.total {
			out = append(out, fmt.Sprintf("%s: %d in all, bound %d", p, c.total, b.total))
		}
	}
	if st.Idem.Bytes > IdemMaxBytes {
		out = append(out, fmt.Sprintf("idempotency store: %d bytes, bound %d", st.Idem.Bytes, IdemMaxBytes))
	}
	kept := trade.RestingOrdersPerAccountMax + trade.ClosedOrdersKept
	if n, accts := len(st.Trade.Orders), len(st.Trade.Accounts); n > kept*accts {
		out = append(out, fmt.Sprintf("Trade.Orders: %d for %d accounts, bound %d each", n, accts, kept))
	}
	sort.Strings(out)
	return out
}

// TestStateSizesMeasuresEveryCollectionAndBound checks the measuring on a
// small state: a map, a slice inside its values, and a bound that fails.
func TestStateSizesMeasuresEveryCollectionAndBound(t *testing.T) {
	st := NewState()
	st.Trade.Accounts["a"] = &trade.Account{Fills: make([]*trade.Fill, 3)}
	st.Trade.Accounts["b"] = &trade.Account{Fills: make([]*trade.Fill, trade.FillsKept+1)}
	sizes := stateSizes(st)
	if c := sizes["Trade.Accounts"]; c == nil || c.total != 2 || c.parents != 1 {
		t.Fatalf("Trade.Accounts measured %+v", c)
	}
	if c := sizes["Trade.Accounts[].Fills"]; c == nil || c.total != trade.FillsKept+4 || c.maxPer != trade.FillsKept+1 || c.parents != 2 {
		t.Fatalf("Trade.Accounts[].Fills measured %+v", c)
	}
	got := soakSizeProblems(st, sizes)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Trade.Accounts[].Fills: 1001 in one parent") {
		t.Fatalf("problems %q, want the one account past FillsKept", got)
	}
	// A collection that grows faster than the accounts fails; one that
	// grows with them passes.
	mid := map[string]*collectionSize{"Trade.Orders": {total: 100}, "Access.Accounts": {total: 10}}
	end := map[string]*collectionSize{"Trade.Orders": {total: 300}, "Access.Accounts": {total: 20}}
	got = soakGrowthProblems(mid, end, 10, 20)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Trade.Orders: 300 entries") {
		t.Fatalf("growth problems %q, want Trade.Orders only", got)
	}
	// Every path measured is one stateCollections lists, so the bounds
	// table and the measuring name collections alike.
	known := stateCollections(t)
	for p := range sizes {
		if _, ok := known[p]; !ok {
			t.Errorf("measured %s, which State has no collection of", p)
		}
	}
}
