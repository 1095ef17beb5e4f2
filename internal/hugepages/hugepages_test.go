package hugepages

import (
	"reflect"
	"slices"
	"testing"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{
		"always [madvise] never\n": ModeMadvise,
		"[always] madvise never\n": ModeAlways,
		"always madvise [never]\n": ModeNever,
		"always madvise never\n":   ModeUnknown,
		"[sometimes]":              ModeUnknown,
		"":                         ModeUnknown,
		"] [":                      ModeUnknown,
	} {
		if got := ParseMode([]byte(in)); got != want {
			t.Errorf("ParseMode(%q) = %q, want %q", in, got, want)
		}
	}
}

// HeapSpans keeps only private anonymous read-write mappings of at least
// 2 MiB inside the window: not files, not the process's [stack] or [heap],
// not read-only or shared ones, not the runtime's metadata far above.
func TestHeapSpansPicksTheHeapsMappings(t *testing.T) {
	maps := `00400000-02433000 r-xp 00000000 fe:00 10011519                           /usr/bin/perpd
0231f000-02433000 rw-p 01f1f000 fe:00 10011519                           /usr/bin/perpd
02433000-044a5000 rw-p 00000000 00:00 0 
23a98000-23ab9000 rw-p 00000000 00:00 0                                  [heap]
29e008c00000-29e019400000 rw-p 00000000 00:00 0 
29e019400000-29e019800000 rw-p 00000000 00:00 0                          [anon: Go: heap]
29e019800000-29e019900000 rw-p 00000000 00:00 0 
29e019900000-29e01a000000 r--p 00000000 00:00 0 
29e01a000000-29e01a400000 rw-s 00000000 00:01 77                         /dev/zero (deleted)
29e01a400000-29e01c000000 ---p 00000000 00:00 0 
7ff9a4000000-7ff9a4800000 rw-p 00000000 00:00 0 
7ffd1c000000-7ffd1c400000 rw-p 00000000 00:00 0                          [stack]
garbage line
29e01c000000-29e01b000000 rw-p 00000000 00:00 0 
zz-29e01d000000 rw-p 00000000 00:00 0 
`
	lo, hi := uintptr(0x29e000000000), uintptr(0x2a0000000000)
	got := HeapSpans([]byte(maps), lo, hi)
	want := []Span{
		{0x29e008c00000, 0x29e019400000},
		{0x29e019400000, 0x29e019800000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("HeapSpans = %#v, want %#v", got, want)
	}
	if got := HeapSpans([]byte(maps), 0x7ff000000000, 0x800000000000); len(got) != 1 || got[0].Start != 0x7ff9a4000000 {
		t.Fatalf("a window over the metadata finds %#v", got)
	}
}

func TestStallsSumsCompactionsAndReclaims(t *testing.T) {
	vmstat := `nr_free_pages 5371234
allocstall_dma 0
allocstall_normal 3
allocstall_movable 4
compact_stall 5
compact_fail 100
compact_success 200
thp_fault_alloc 6577
garbage
allocstall_device x
`
	if got := Stalls([]byte(vmstat)); got != 12 {
		t.Fatalf("Stalls = %d, want 12 (3+4+5; compact_fail and the rest are not waits)", got)
	}
	if Stalls(nil) != 0 {
		t.Fatal("an empty listing has stalls")
	}
}

func TestCoalesceJoinsTouchingSpans(t *testing.T) {
	got := Coalesce(map[Span]bool{{40, 50}: true, {0, 10}: true, {10, 20}: true, {30, 40}: true, {60, 70}: true})
	want := []Span{{0, 20}, {30, 50}, {60, 70}}
	if !slices.Equal(got, want) {
		t.Fatalf("Coalesce = %v, want %v", got, want)
	}
	for _, c := range []struct {
		s  Span
		in bool
	}{
		{Span{0, 20}, true}, {Span{5, 15}, true}, {Span{30, 50}, true}, {Span{60, 70}, true},
		{Span{0, 21}, false}, {Span{20, 30}, false}, {Span{15, 35}, false}, {Span{70, 80}, false}, {Span{50, 60}, false},
	} {
		if Covered(got, c.s) != c.in {
			t.Errorf("Covered(%v) = %v, want %v", c.s, !c.in, c.in)
		}
	}
	if Covered(nil, Span{0, 1}) {
		t.Error("nothing covers a span of an empty set")
	}
}
