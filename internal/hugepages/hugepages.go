// Package hugepages asks the kernel to back a node's Go heap with
// transparent huge pages where the machine leaves that to each program
// (transparent_hugepage "madvise", the default of most distributions).
//
// A node's state grows with every order, and on the machines measured a
// first touch of a fresh 4 KiB page costs 10-20 µs: the page faults of
// the growing heap were a fifth of a market order's apply. Go's runtime no
// longer asks for huge pages itself (since Go 1.21.1), and it maps its heap
// in fresh 4 MiB mappings as it grows, each without the advice, so a node
// watches its own mappings and advises each new heap mapping soon after it
// appears (docs/decisions.md, "Huge pages for the heap").
//
// Advised memory has a price the kernel's defaults make real: a fault in
// it may wait for the kernel to compact or reclaim memory when no huge page
// is free (golang/go#61718). The advisor watches the machine's count of
// such waits and withdraws its advice for good at the first one.
package hugepages

import (
	"bufio"
	"bytes"
	"slices"
	"strconv"
)

// Mode is the machine's transparent huge page setting.
type Mode string

const (
	ModeAlways  Mode = "always"  // every anonymous mapping already gets them
	ModeMadvise Mode = "madvise" // only advised mappings: the case this package serves
	ModeNever   Mode = "never"   // none, whatever a program asks
	ModeUnknown Mode = ""        // no THP on this kernel or not Linux
)

// ParseMode reads the bracketed choice of
// /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
func ParseMode(b []byte) Mode {
	i := bytes.IndexByte(b, '[')
	j := bytes.IndexByte(b, ']')
	if i < 0 || j < i {
		return ModeUnknown
	}
	switch m := Mode(b[i+1 : j]); m {
	case ModeAlways, ModeMadvise, ModeNever:
		return m
	}
	return ModeUnknown
}

// Span is one mapping, [Start, End).
type Span struct{ Start, End uintptr }

// minSpan is the smallest mapping worth advising: a huge page is 2 MiB and
// the heap grows by 4 MiB at a time.
const minSpan = 2 << 20

// HeapSpans lists the private anonymous read-write mappings of a
// /proc/self/maps listing that lie in [lo, hi) and are at least minSpan
// long: the heap's mappings, when lo and hi bound the heap's addresses.
func HeapSpans(maps []byte, lo, hi uintptr) []Span {
	var out []Span
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// "start-end perms offset dev inode [path]"
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 || !bytes.Equal(f[1], []byte("rw-p")) || !bytes.Equal(f[4], []byte("0")) {
			continue
		}
		if len(f) > 5 && !bytes.HasPrefix(f[5], []byte("[anon:")) {
			continue // a file, [stack], [heap] of libc and the like
		}
		dash := bytes.IndexByte(f[0], '-')
		if dash < 0 {
			continue
		}
		start, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
		end, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
		if err1 != nil || err2 != nil || end <= start || end-start < minSpan {
			continue
		}
		if uintptr(start) < lo || uintptr(end) > hi {
			continue
		}
		out = append(out, Span{uintptr(start), uintptr(end)})
	}
	return out
}

// Stalls sums a /proc/vmstat listing's direct compactions (compact_stall)
// and direct reclaims (allocstall_*): the waits a page fault can take when
// the kernel must make a huge page for advised memory and has none free.
func Stalls(vmstat []byte) uint64 {
	var n uint64
	sc := bufio.NewScanner(bytes.NewReader(vmstat))
	for sc.Scan() {
		name, val, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if !ok || !(bytes.Equal(name, []byte("compact_stall")) || bytes.HasPrefix(name, []byte("allocstall_"))) {
			continue
		}
		if v, err := strconv.ParseUint(string(val), 10, 64); err == nil {
			n += v
		}
	}
	return n
}

// Coalesce sorts spans and joins those that touch or overlap: the ranges
// the kernel may show as one mapping once their flags match.
func Coalesce(spans map[Span]bool) []Span {
	out := make([]Span, 0, len(spans))
	for s := range spans {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y Span) int {
		switch {
		case x.Start < y.Start:
			return -1
		case x.Start > y.Start:
			return 1
		}
		return 0
	})
	j := 0
	for _, s := range out {
		if j > 0 && s.Start <= out[j-1].End {
			out[j-1].End = max(out[j-1].End, s.End)
			continue
		}
		out[j] = s
		j++
	}
	return out[:j]
}

// Covered reports whether s lies wholly within one of the coalesced spans.
func Covered(coalesced []Span, s Span) bool {
	i, _ := slices.BinarySearchFunc(coalesced, s.Start, func(c Span, at uintptr) int {
		switch {
		case c.End <= at:
			return -1
		case c.Start > at:
			return 1
		}
		return 0
	})
	return i < len(coalesced) && coalesced[i].Start <= s.Start && s.End <= coalesced[i].End
}
