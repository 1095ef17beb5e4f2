package fsm

import (
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

func TestUnknownCommandTypeIsRefused(t *testing.T) {
	r := newReplica(t)
	r.apply(tickAt(1000))
	before := r.hash()
	for _, typ := range []CmdType{0, 999, 65535} {
		res := r.apply(&Command{Type: typ, TsMs: 1000, IdemKey: "K", ReqHash: []byte{1}})
		wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
		if res.Index != r.next-1 {
			t.Fatalf("refusal index %d, want %d", res.Index, r.next-1)
		}
	}
	if r.hash() != before {
		t.Fatal("an unknown command changed the state")
	}
	// Not stored under its key either: the key is still free.
	if res := r.apply(noopAt(1000, "K", []byte{2})); !res.OK() || res.Replay {
		t.Fatalf("key of a refused unknown command was stored: %+v", res)
	}
}

func TestUndecodableEntryIsRefused(t *testing.T) {
	r := newReplica(t)
	r.apply(tickAt(1000))
	before := r.hash()
	res := r.applyRaw([]byte{0xff, 0x00, 0x13})
	wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
	if res.Index != 2 {
		t.Fatalf("refusal carries index %d, want 2", res.Index)
	}
	if r.hash() != before {
		t.Fatal("an undecodable entry changed the state")
	}
}

func TestUndecodablePayloadIsRefused(t *testing.T) {
	r := newReplica(t)
	before := r.hash()
	res := r.apply(&Command{Type: CmdNodeMeta, Payload: []byte{0xff}})
	wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
	if r.hash() != before {
		t.Fatal("an undecodable payload changed the state")
	}
}

func TestRaftInternalEntriesOnlyAdvanceTheIndex(t *testing.T) {
	m := NewMachine(Options{CheckInvariants: true})
	_, h0, _ := m.StateHash()
	b, _ := tickAt(5).Encode()
	results, _ := m.ApplyBatch([]uint64{1, 2, 3}, [][]byte{nil, b, nil})
	if results[0] != nil || results[2] != nil || results[1] == nil || results[1].Index != 2 {
		t.Fatalf("results %+v", results)
	}
	idx, h, _ := m.StateHash()
	if idx != 3 {
		t.Fatalf("applied %d, want 3", idx)
	}
	if h == h0 {
		t.Fatal("the tick in the batch must have been applied")
	}
}

func TestGenesisOnlyOnce(t *testing.T) {
	r := newReplica(t)
	res := r.apply(mustCommand(t, CmdGenesis, 1000, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 7, Deployment: "prod"}))
	wantOK(t, res)
	var g Genesis
	r.m.Read(func(st *State, _ uint64) { g = *st.Genesis })
	if g.Seed != 7 || g.Deployment != "prod" || g.TsMs != 1000 {
		t.Fatalf("genesis %+v", g)
	}
	after := r.hash()
	res = r.apply(mustCommand(t, CmdGenesis, 1000, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 8, Deployment: "testnet"}))
	wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
	if r.hash() != after {
		t.Fatal("a second genesis changed the state")
	}
	r.m.Read(func(st *State, _ uint64) { g = *st.Genesis })
	if g.Seed != 7 || g.Deployment != "prod" {
		t.Fatalf("a second genesis overwrote the first: %+v", g)
	}
}

func TestNodeMetaNeedsIDAndRaftAddress(t *testing.T) {
	r := newReplica(t)
	before := r.hash()
	for _, m := range []NodeMeta{{}, {ID: "n1"}, {Raft: "127.0.0.1:1"}} {
		wantRefused(t, r.apply(mustCommand(t, CmdNodeMeta, 0, m)), http.StatusBadRequest, wire.CodeValidation)
	}
	if r.hash() != before {
		t.Fatal("refused node meta changed the state")
	}
	want := NodeMeta{ID: "n1", Raft: "127.0.0.1:1", HTTP: "127.0.0.1:2", Admin: "127.0.0.1:3"}
	wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, 0, want)))
	want.Admin = "127.0.0.1:4" // a node that moved re-announces itself
	wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, 0, want)))
	r.m.Read(func(st *State, _ uint64) {
		if len(st.Nodes) != 1 || *st.Nodes["n1"] != want {
			t.Fatalf("nodes %+v", st.Nodes)
		}
	})
}

func TestCommandEnvelopeRoundTrip(t *testing.T) {
	c := &Command{Type: CmdNoop, TsMs: -5, Account: "a", KeyID: "k", IdemKey: "a:K", ReqHash: []byte{1, 2}, Payload: []byte{0xa0}}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := got.Encode()
	if string(b) != string(b2) {
		t.Fatal("re-encoding a decoded command changed its bytes")
	}
	if got.Type != c.Type || got.TsMs != c.TsMs || got.IdemKey != c.IdemKey || string(got.ReqHash) != string(c.ReqHash) {
		t.Fatalf("decoded %+v", got)
	}
}

func TestRequestHashSeparatesParts(t *testing.T) {
	a := RequestHash([]byte("POST"), []byte("/v1/x"), []byte("{}"))
	b := RequestHash([]byte("POST/"), []byte("v1/x"), []byte("{}"))
	c := RequestHash([]byte("POST"), []byte("/v1/x"), []byte("{}"))
	if string(a) == string(b) {
		t.Fatal("moving bytes between parts must change the hash")
	}
	if string(a) != string(c) {
		t.Fatal("the same request must hash the same")
	}
}

func TestNodeGoneDropsTheRecord(t *testing.T) {
	r := newReplica(t)
	for _, id := range []string{"n1", "n2"} {
		wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, 1000, NodeMeta{ID: id, Raft: "r-" + id})))
	}
	wantOK(t, r.apply(mustCommand(t, CmdNodeGone, 1001, NodeGonePayload{ID: "n1"})))
	r.m.Read(func(st *State, _ uint64) {
		if _, ok := st.Nodes["n1"]; ok || st.Nodes["n2"] == nil {
			t.Fatalf("nodes after n1 left: %v", st.Nodes)
		}
	})
	// A repeat (the remove's own propose and the reconciliation racing)
	// is refused and changes nothing.
	before := r.hash()
	res := r.apply(mustCommand(t, CmdNodeGone, 1001, NodeGonePayload{ID: "n1"}))
	if res.OK() || res.Code != "not_found" {
		t.Fatalf("second removal answered %+v", res)
	}
	if r.hash() != before {
		t.Fatal("a refused removal changed the state")
	}
}
