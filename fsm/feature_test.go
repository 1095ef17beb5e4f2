package fsm

import (
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// TestFeatureLevelRisesOnlyToWhatEveryNodeAdvertises: the level is
// refused with no records, while any node advertises less (a build from
// before feature levels advertises 0), and when it does not rise; it rises
// once every record advertises it; a level beyond this build halts the
// replica instead of applying what it cannot.
func TestFeatureLevelRisesOnlyToWhatEveryNodeAdvertises(t *testing.T) {
	// Without CheckInvariants, as in production, so a panic halts the
	// replica instead of failing the test.
	r := &replica{t: t, m: NewMachine(Options{}), next: 1}
	ts := int64(1_700_000_000_000)
	raise := func(level uint32) *Result {
		ts += 10
		return r.apply(mustCommand(t, CmdSetFeatureLevel, ts, FeatureLevelPayload{Level: level}))
	}
	meta := func(id string, level uint32) {
		ts += 10
		wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, ts, NodeMeta{ID: id, Raft: id + ":7000", FeatureLevel: level})))
	}
	wantRefused(t, raise(1), http.StatusConflict, wire.CodeConflict) // nobody advertised yet
	meta("n1", 1)
	meta("n2", 1)
	meta("old", 0) // still on a build without feature levels
	res := raise(1)
	wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
	if !strings.Contains(string(res.Body), "[old]") {
		t.Fatalf("refusal does not name the old node: %s", res.Body)
	}
	if lvl, nodes, _ := func() (uint32, []string, bool) {
		var l uint32
		var n []string
		var ok bool
		r.m.Read(func(st *State, _ uint64) { l, n, ok = st.MinAdvertisedLevel() })
		return l, n, ok
	}(); lvl != 0 || len(nodes) != 1 || nodes[0] != "old" {
		t.Fatalf("min advertised %d %v", lvl, nodes)
	}
	meta("old", 1) // upgraded and restarted: it re-advertises
	wantOK(t, raise(1))
	var level uint32
	r.m.Read(func(st *State, _ uint64) { level = st.FeatureLevel })
	if level != 1 {
		t.Fatalf("level %d after the raise", level)
	}
	wantRefused(t, raise(1), http.StatusConflict, wire.CodeConflict) // levels only rise
	wantRefused(t, raise(0), http.StatusConflict, wire.CodeConflict)

	// Every node advertises a level this build lacks (they run a newer
	// one): applying the raise here would diverge, so the replica halts.
	meta("n1", FeatureLevel+1)
	meta("n2", FeatureLevel+1)
	meta("old", FeatureLevel+1)
	raise(FeatureLevel + 1)
	if h := r.m.Halted(); h == nil || !strings.Contains(h.Reason, "run a newer build") {
		t.Fatalf("a replica applying an unknown level did not halt: %v", h)
	}
}

// TestStateHashUnchangedAtFeatureLevelZero: the field is omitted at 0, so
// a state from before feature levels encodes (and hashes) as it did.
func TestStateHashUnchangedAtFeatureLevelZero(t *testing.T) {
	st := NewState()
	a, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	st.FeatureLevel = 1
	b, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) == string(b) {
		t.Fatal("the level is not part of the state")
	}
	m := NodeMeta{ID: "n", Raft: "r"}
	x, _ := Marshal(m)
	type oldMeta struct {
		ID    string `cbor:"1,keyasint"`
		Raft  string `cbor:"2,keyasint"`
		HTTP  string `cbor:"3,keyasint"`
		Admin string `cbor:"4,keyasint"`
	}
	y, _ := Marshal(oldMeta{ID: "n", Raft: "r"})
	if string(x) != string(y) {
		t.Fatal("a level-0 node record encodes differently from an old build's")
	}
}
