package raftlog

import (
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/node"
)

// Check opens every stopped node's store (dirs by node id) and runs the
// checks against the state samples the nodes reported. A node whose
// store cannot be opened or replayed makes its check unknown, never
// valid.
//
// Log matching compares, for each pair, the entries both could have
// applied from their logs (Store.From on) up to what both applied. The
// entries a node still holds below its From (left under a snapshot it
// installed, see Store) are the below-snapshot check's: each is compared
// with the committed entry at its index on another node, and one that
// differs is a violation there: a node holding it would send it to a
// follower were it to lead.
func Check(dirs map[string]string, samples map[string][]checker.StateSample) (logs, replay, below checker.Result) {
	logs = checker.Result{Name: "log-matching", Verdict: checker.Valid}
	replay = checker.Result{Name: "replay", Verdict: checker.Valid}
	below = checker.Result{Name: "below-snapshot", Verdict: checker.Valid}
	ids := make([]string, 0, len(dirs))
	for id := range dirs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	stores := map[string]*Store{}
	for _, id := range ids {
		s, err := Open(dirs[id])
		if err != nil {
			unknown(&logs, "%s: %v", id, err)
			unknown(&replay, "%s: %v", id, err)
			continue
		}
		defer s.Close()
		stores[id] = s
	}

	// What each node applied is committed; the pair's common part of that
	// must be one log.
	applied := map[string]uint64{}
	for id, ss := range samples {
		for _, s := range ss {
			applied[id] = max(applied[id], s.Applied)
		}
	}
	for _, id := range ids {
		if s := stores[id]; s != nil && s.From > s.First {
			logs.Details = append(logs.Details, detail("%s: its entries below its snapshot or gap at %d are compared in below-snapshot, not here",
				id, s.Below))
		}
	}
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			sa, sb := stores[a], stores[b]
			if sa == nil || sb == nil {
				continue
			}
			m, n, err := FirstMismatch(sa, sb, min(applied[a], applied[b]))
			switch {
			case err != nil:
				unknown(&logs, "%s and %s: %v", a, b, err)
			case m != nil:
				logs.Verdict = checker.Violation
				logs.Details = append(logs.Details, "the committed logs of "+a+" and "+b+" differ at "+m.String())
			default:
				logs.Details = append(logs.Details, detail("%s and %s: %d committed entries alike", a, b, n))
			}
		}
	}

	for _, id := range ids {
		checkBelow(&below, id, ids, stores, applied)
	}

	// The newest sample of each node, rebuilt from its own store.
	for _, id := range ids {
		s := stores[id]
		ss := samples[id]
		if s == nil || len(ss) == 0 {
			continue
		}
		last := ss[0]
		for _, x := range ss {
			if x.Applied > last.Applied {
				last = x
			}
		}
		if last.Applied > s.Last {
			unknown(&replay, "%s: reported index %d, its log ends at %d", id, last.Applied, s.Last)
			continue
		}
		h, err := s.HashAt(last.Applied)
		switch {
		case err != nil:
			unknown(&replay, "%s: replay to %d: %v", id, last.Applied, err)
		case h != last.Hash:
			replay.Verdict = checker.Violation
			replay.Details = append(replay.Details, detail("%s: replaying its store to index %d gives hash %.12s, the node reported %.12s", id, last.Applied, h, last.Hash))
		default:
			replay.Details = append(replay.Details, detail("%s: replay to index %d gives the reported hash", id, last.Applied))
		}
	}
	return logs, replay, below
}

// checkBelow compares the entries node id holds below its From with the
// committed entries at their indexes: those of the first other node that
// could have applied the index from its log and has.
func checkBelow(r *checker.Result, id string, ids []string, stores map[string]*Store, applied map[string]uint64) {
	s := stores[id]
	if s == nil || s.From <= s.First {
		return
	}
	to := min(s.From-1, s.Last)
	var held, compared, differ int
	var lastHeld uint64
	var first *Mismatch
	var firstWith string
	for i := s.First; i <= to; i++ {
		x, err := s.Entry(i)
		if errors.Is(err, raft.ErrLogNotFound) {
			continue // an older gap
		}
		if err != nil {
			unknown(r, "%s: %v", id, err)
			return
		}
		held++
		lastHeld = i
		for _, o := range ids {
			so := stores[o]
			if o == id || so == nil || i < so.From || i > min(so.Last, applied[o]) {
				continue
			}
			y, err := so.Entry(i)
			if err != nil {
				unknown(r, "%s: %v", o, err)
				return
			}
			compared++
			// A snapshot's point stands for the entry: only its term is
			// its claim.
			if node.IsSnapshotPoint(x) && x.Term == y.Term {
				break
			}
			if !sameEntry(x, y) {
				differ++
				if first == nil {
					first, firstWith = &Mismatch{Index: i, A: x, B: y}, o
				}
			}
			break
		}
	}
	if held == 0 {
		return
	}
	head := detail("%s: %d entries from %d to %d lie below its snapshot or gap at %d (not applied from this log)", id, held, s.First, lastHeld, s.Below)
	if differ == 0 {
		r.Details = append(r.Details, detail("%s; %d compared, all the committed ones", head, compared))
		return
	}
	r.Verdict = checker.Violation
	r.Details = append(r.Details, detail("%s; %d of %d compared are not the committed ones, first at %s (%s / %s): "+
		"raft kept entries the snapshot replaced (hashicorp/raft#697), which %s would send to a follower were it to lead",
		head, differ, compared, first, id, firstWith, id))
}

func detail(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// unknown notes a check that could not be made; a violation stays one.
func unknown(r *checker.Result, format string, args ...any) {
	if r.Verdict == checker.Valid {
		r.Verdict = checker.Unknown
	}
	r.Details = append(r.Details, fmt.Sprintf(format, args...))
}
