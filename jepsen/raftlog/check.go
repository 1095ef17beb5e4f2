package raftlog

import (
	"fmt"
	"sort"

	"github.com/perpd/perpd/jepsen/checker"
)

// Check opens every stopped node's store (dirs by node id) and runs both
// checks against the state samples the nodes reported. A node whose
// store cannot be opened or replayed makes its check unknown, never
// valid.
func Check(dirs map[string]string, samples map[string][]checker.StateSample) (logs, replay checker.Result) {
	logs = checker.Result{Name: "log-matching", Verdict: checker.Valid}
	replay = checker.Result{Name: "replay", Verdict: checker.Valid}
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
	return logs, replay
}

func detail(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// unknown notes a check that could not be made; a violation stays one.
func unknown(r *checker.Result, format string, args ...any) {
	if r.Verdict == checker.Valid {
		r.Verdict = checker.Unknown
	}
	r.Details = append(r.Details, fmt.Sprintf(format, args...))
}
