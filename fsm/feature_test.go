package fsm

import (
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// TestFeatureLevelRisesOnlyWhenEveryRecordedNodeImplementsIt: the raise
// carries what each node's build implements; it is refused while a node
// the state records is missing from it or implements less (a build from
// before feature levels: 0), and when the level does not rise; a level
// beyond this build halts the replica instead of applying what it cannot.
func TestFeatureLevelRisesOnlyWhenEveryRecordedNodeImplementsIt(t *testing.T) {
	// Without CheckInvariants, as in production, so a panic halts the
	// replica instead of failing the test.
	r := &replica{t: t, m: NewMachine(Options{}), next: 1}
	ts := int64(1_700_000_000_000)
	raise := func(level uint32, nodes ...AdvertisedLevel) *Result {
		ts += 10
		return r.apply(mustCommand(t, CmdSetFeatureLevel, ts, FeatureLevelPayload{Level: level, Nodes: nodes}))
	}
	meta := func(id string) {
		ts += 10
		wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, ts, NodeMeta{ID: id, Raft: id + ":7000"})))
	}
	level := func() uint32 {
		var l uint32
		r.m.Read(func(st *State, _ uint64) { l = st.FeatureLevel })
		return l
	}
	wantRefused(t, raise(1), http.StatusConflict, wire.CodeConflict) // nobody recorded
	meta("n1")
	meta("n2")
	meta("old")
	res := raise(1, AdvertisedLevel{"n1", 1}, AdvertisedLevel{"n2", 1}, AdvertisedLevel{"old", 0})
	wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
	if !strings.Contains(string(res.Body), "old (0)") {
		t.Fatalf("refusal does not name the old build: %s", res.Body)
	}
	res = raise(1, AdvertisedLevel{"n1", 1}, AdvertisedLevel{"n2", 1}) // a recorded node left out
	wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
	if !strings.Contains(string(res.Body), "old") {
		t.Fatalf("refusal does not name the missing node: %s", res.Body)
	}
	if level() != 0 {
		t.Fatalf("a refused raise changed the level to %d", level())
	}
	all := []AdvertisedLevel{{"n1", 1}, {"n2", 1}, {"old", 1}} // old upgraded
	wantOK(t, raise(1, all...))
	if level() != 1 {
		t.Fatalf("level %d after the raise", level())
	}
	wantRefused(t, raise(1, all...), http.StatusConflict, wire.CodeConflict) // levels only rise
	wantRefused(t, raise(0, all...), http.StatusConflict, wire.CodeConflict)

	// Every node implements a level this build lacks (they run a newer
	// one): applying the raise here would diverge, so the replica halts.
	next := FeatureLevel + 1
	raise(next, AdvertisedLevel{"n1", next}, AdvertisedLevel{"n2", next}, AdvertisedLevel{"old", next})
	if h := r.m.Halted(); h == nil || !strings.Contains(h.Reason, "run a newer build") {
		t.Fatalf("a replica applying an unknown level did not halt: %v", h)
	}
}

// TestStateHashUnchangedAtFeatureLevelZero: the field is omitted at 0, so
// a state from before feature levels encodes (and hashes) as it did.
func TestStateHashUnchangedAtFeatureLevelZero(t *testing.T) {
	st := NewState()
	keys := func() map[int]bool {
		b, err := Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var m map[int]any
		if err := Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out := map[int]bool{}
		for k := range m {
			out[k] = true
		}
		return out
	}
	if keys()[40] {
		t.Fatal("a level-0 state encodes the feature level: states from before feature levels would hash differently")
	}
	st.FeatureLevel = 1
	if !keys()[40] {
		t.Fatal("the level is not part of the state")
	}
}
