package raftlog

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/node"
)

// Apply archives (node/archive.go) hold what each replica's live machine
// applied, across restarts and wipes: an incarnation starts whenever the
// index goes back (a restart replays the log; a wiped node restores a
// snapshot). Every record of an index, on any node and in any
// incarnation, must agree: the entry, and the state after it where a hash
// was taken. The first index where they do not is the divergence, and
// whether the entries there agree says what kind it is.

// archived is what one incarnation recorded at an index.
type archived struct {
	who   string // node id and incarnation, "n1#2"
	entry *raft.Log
	sum   [32]byte
	state *node.ArchiveRecord
}

// readArchive reads one node's archive into records by index.
func readArchive(id, path string, into map[uint64][]*archived) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	incarnation, last, lines := 0, uint64(0), 0
	cur := map[uint64]*archived{}
	for sc.Scan() {
		var r node.ArchiveRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A kill can cut the last line short.
			continue
		}
		lines++
		if r.Restore || (r.Hash == "" && r.Index <= last) {
			incarnation++
			cur = map[uint64]*archived{}
		}
		who := fmt.Sprintf("%s#%d", id, incarnation)
		a := cur[r.Index]
		if a == nil {
			a = &archived{who: who}
			cur[r.Index] = a
			into[r.Index] = append(into[r.Index], a)
		}
		switch {
		case r.Restore:
			last = r.Index
		case r.Hash != "":
			rec := r
			a.state = &rec
		default:
			a.entry = &raft.Log{Index: r.Index, Term: r.Term, Type: raft.LogType(r.Kind), Data: r.Data}
			a.sum = sha256.Sum256(r.Data)
			last = r.Index
		}
	}
	return lines, sc.Err()
}

// CheckArchives compares the nodes' apply archives (paths by node id).
func CheckArchives(paths map[string]string) checker.Result {
	res := checker.Result{Name: "apply-archive", Verdict: checker.Valid}
	ids := make([]string, 0, len(paths))
	for id := range paths {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	byIndex := map[uint64][]*archived{}
	for _, id := range ids {
		n, err := readArchive(id, paths[id], byIndex)
		if err != nil {
			unknown(&res, "%s: %v", id, err)
			continue
		}
		res.Details = append(res.Details, detail("%s: %d records", id, n))
	}
	indexes := make([]uint64, 0, len(byIndex))
	for i := range byIndex {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })

	entryOK, stateOK := true, true
	var compared, hashes int
	for _, i := range indexes {
		recs := byIndex[i]
		var ref, refState *archived
		for _, a := range recs {
			if a.entry != nil {
				if ref == nil {
					ref = a
				} else if entryOK && (a.entry.Term != ref.entry.Term || a.entry.Type != ref.entry.Type || a.sum != ref.sum) {
					entryOK = false
					res.Verdict = checker.Violation
					res.Details = append(res.Details, detail("entry %d differs: %s applied %s; %s applied %s",
						i, ref.who, Describe(ref.entry), a.who, Describe(a.entry)))
				} else {
					compared++
				}
			}
			if a.state != nil {
				if refState == nil {
					refState = a
				} else if stateOK && !sameState(a.state, refState.state) {
					stateOK = false
					res.Verdict = checker.Violation
					why := "every entry up to it agrees on every replica that applied it: the state machine is not deterministic"
					if !entryOK {
						why = "an entry before it already differs"
					}
					res.Details = append(res.Details, detail("state after entry %d differs: %s has hash %.12s seq %d time %d; %s has hash %.12s seq %d time %d (%s)",
						i, refState.who, refState.state.Hash, refState.state.Seq, refState.state.NowMs,
						a.who, a.state.Hash, a.state.Seq, a.state.NowMs, why))
				} else {
					hashes++
				}
			}
		}
	}
	res.Details = append(res.Details, detail("%d entries and %d states matched a second record", compared, hashes))
	return res
}

func sameState(a, b *node.ArchiveRecord) bool {
	return a.Hash == b.Hash && a.Seq == b.Seq && a.NowMs == b.NowMs
}
