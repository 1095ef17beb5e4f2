package market

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func sampleIndex(t testing.TB) *PriceIndex {
	t.Helper()
	x := NewPriceIndex()
	for _, e := range []struct {
		id    string
		level int64
		dir   Direction
	}{
		{"up-105-b", 105, Rising}, {"up-105-a", 105, Rising}, {"up-110", 110, Rising}, {"up-100", 100, Rising},
		{"dn-95-b", 95, Falling}, {"dn-95-a", 95, Falling}, {"dn-90", 90, Falling}, {"dn-100", 100, Falling},
	} {
		if err := x.Insert(e.id, e.level, e.dir); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

func TestPriceIndexCrossed(t *testing.T) {
	tests := []struct {
		name     string
		old, new int64
		want     []string
	}{
		{"unchanged", 100, 100, nil},
		{"rise within a gap", 101, 104, nil},
		{"rise onto a level crosses it", 101, 105, []string{"up-105-a", "up-105-b"}},
		{"rise from a level does not re-cross it", 105, 109, nil},
		{"rise through several, ascending then by id", 99, 200, []string{"up-100", "up-105-a", "up-105-b", "up-110"}},
		{"rise ignores falling entries", 80, 101, []string{"up-100"}},
		{"fall onto a level crosses it", 99, 95, []string{"dn-95-a", "dn-95-b"}},
		{"fall from a level does not re-cross it", 95, 91, nil},
		{"fall through several, descending then by id", 101, 1, []string{"dn-100", "dn-95-a", "dn-95-b", "dn-90"}},
		{"fall ignores rising entries", 120, 99, []string{"dn-100"}},
	}
	x := sampleIndex(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := x.Crossed(tc.old, tc.new); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Crossed(%d, %d) = %v, want %v", tc.old, tc.new, got, tc.want)
			}
		})
	}
	if x.Len() != 8 {
		t.Fatal("Crossed must not remove entries")
	}
}

func TestPriceIndexInsertMovesAndRemove(t *testing.T) {
	x := sampleIndex(t)
	if err := x.Insert("up-100", 95, Falling); err != nil { // move and flip
		t.Fatal(err)
	}
	if got := x.Crossed(99, 101); len(got) != 0 {
		t.Fatalf("moved entry still rising at 100: %v", got)
	}
	if got := x.Crossed(96, 95); !reflect.DeepEqual(got, []string{"dn-95-a", "dn-95-b", "up-100"}) {
		t.Fatalf("moved entry not at its new level: %v", got)
	}
	if !x.Remove("dn-95-a") || x.Remove("dn-95-a") {
		t.Fatal("Remove must report presence once")
	}
	if got := x.Crossed(96, 95); !reflect.DeepEqual(got, []string{"dn-95-b", "up-100"}) {
		t.Fatalf("removed entry still crossed: %v", got)
	}
	if x.Len() != 7 {
		t.Fatalf("len = %d, want 7", x.Len())
	}
}

func TestPriceIndexInsertRefusals(t *testing.T) {
	x := NewPriceIndex()
	for _, tc := range []struct {
		name  string
		id    string
		level int64
		dir   Direction
	}{
		{"empty id", "", 1, Rising},
		{"zero level", "a", 0, Rising},
		{"level over max", "a", PriceQ8Max + 1, Rising},
		{"no direction", "a", 1, 0},
	} {
		if err := x.Insert(tc.id, tc.level, tc.dir); !errors.Is(err, ErrIndexEntry) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
	if x.Len() != 0 {
		t.Fatal("refused inserts added entries")
	}
}

func TestPriceIndexSurvivesSnapshot(t *testing.T) {
	x := sampleIndex(t)
	raw := encode(t, x)
	var y PriceIndex
	if err := cbor.Unmarshal(raw, &y); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, encode(t, &y)) {
		t.Fatal("re-encoded index differs")
	}
	// The trees are rebuilt on first use and answer exactly as before.
	for _, mv := range [][2]int64{{99, 200}, {101, 1}, {101, 105}} {
		if a, b := x.Crossed(mv[0], mv[1]), y.Crossed(mv[0], mv[1]); !reflect.DeepEqual(a, b) {
			t.Fatalf("Crossed%v: original %v, decoded %v", mv, a, b)
		}
	}
	// The zero value works too.
	var z PriceIndex
	if err := z.Insert("a", 10, Rising); err != nil || !reflect.DeepEqual(z.Crossed(9, 10), []string{"a"}) {
		t.Fatalf("zero-value index: %v", err)
	}
}

func TestPriceIndexBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million entries")
	}
	x := NewPriceIndex()
	for i := range PriceIndexEntriesMax {
		if err := x.Insert(fmt.Sprint(i), int64(i+1), Rising); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Insert("one-more", 5, Falling); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("err = %v, want ErrIndexFull", err)
	}
	if err := x.Insert("7", 5, Falling); err != nil {
		t.Fatalf("moving an existing entry in a full index: %v", err)
	}
}

func TestPriceIndexReached(t *testing.T) {
	x := NewPriceIndex()
	for _, e := range []struct {
		id    string
		level int64
		dir   Direction
	}{{"r1", 100, Rising}, {"r2", 200, Rising}, {"r3", 300, Rising}, {"f1", 100, Falling}, {"f2", 200, Falling}, {"f3", 300, Falling}} {
		if err := x.Insert(e.id, e.level, e.dir); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(x.Reached(200)); got != "[r1 r2 f3 f2]" {
		t.Fatalf("reached at 200: %s", got)
	}
	if got := fmt.Sprint(x.Reached(50)); got != "[f3 f2 f1]" {
		t.Fatalf("reached at 50: %s", got)
	}
	if got := fmt.Sprint(x.Reached(301)); got != "[r1 r2 r3]" {
		t.Fatalf("reached at 301: %s", got)
	}
}

// TestPriceIndexCrossedNAndReachedNStopAtTheirLimit: the bounded forms give
// the unbounded answer's first limit ids, and say whether one more exists.
func TestPriceIndexCrossedNAndReachedNStopAtTheirLimit(t *testing.T) {
	x := sampleIndex(t)
	for limit := -1; limit <= 5; limit++ {
		all := x.Crossed(99, 200) // four rising entries
		got, more := x.CrossedN(99, 200, limit)
		want, wantMore := all, false
		if limit >= 0 && limit < len(all) {
			want, wantMore = all[:limit], true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || more != wantMore {
			t.Fatalf("CrossedN limit %d = %v, %v; want %v, %v", limit, got, more, want, wantMore)
		}
		all = x.Reached(100) // up-100, then dn-100
		got, more = x.ReachedN(100, limit)
		want, wantMore = all, false
		if limit >= 0 && limit < len(all) {
			want, wantMore = all[:limit], true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || more != wantMore {
			t.Fatalf("ReachedN limit %d = %v, %v; want %v, %v", limit, got, more, want, wantMore)
		}
	}
}
