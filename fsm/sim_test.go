package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// The deterministic simulation of DESIGN.md: random command streams are
// applied to three replicas, each fed differently (one entry at a time, in
// raft-sized batches, and through snapshot/restore round trips). After
// every entry the replicas must agree on the state hash and on the answer,
// the ledger invariants must hold (CheckInvariants panics otherwise), and
// the answers must match a model of the clock and the idempotency store.

const simEntries = 3000

func TestDeterministicSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			runSimulation(t, seed, simEntries, false)
		})
	}
}

// Every registered and unregistered command type, with random payloads,
// must still be deterministic and never break an invariant.
func TestDeterministicSimulationWithForeignTypes(t *testing.T) {
	runSimulation(t, 99, simEntries, true)
}

type simModel struct {
	nowMs int64
	idem  map[string]simRecord
}

type simRecord struct {
	hash      []byte
	expiresMs int64
	index     uint64
	body      []byte
}

func (m *simModel) advance(ts int64) {
	if ts <= m.nowMs {
		return
	}
	if m.nowMs != 0 && ts-m.nowMs > MaxClockStepMs {
		ts = m.nowMs + MaxClockStepMs
	}
	m.nowMs = ts
	for k, r := range m.idem {
		if r.expiresMs <= ts {
			delete(m.idem, k)
		}
	}
}

type simEntry struct {
	data []byte   // nil for a raft-internal entry
	cmd  *Command // nil for bytes that are not a command
}

func runSimulation(t *testing.T, seed uint64, entries int, foreign bool) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	gen := &simGen{rng: rng, clock: 1_700_000_000_000, foreign: foreign}

	single := newReplica(t)                                // one entry per Apply
	twin := newReplica(t)                                  // the same, compared after every entry
	batched := NewMachine(Options{CheckInvariants: true})  // raft-sized batches
	restored := NewMachine(Options{CheckInvariants: true}) // batches plus snapshot round trips
	model := &simModel{idem: map[string]simRecord{}}

	var pending [][]byte
	var pendingIdx []uint64
	flush := func() {
		if len(pending) == 0 {
			return
		}
		rb, _ := batched.ApplyBatch(pendingIdx, pending)
		rr, _ := restored.ApplyBatch(pendingIdx, pending)
		for i := range rb {
			if !sameResult(rb[i], rr[i]) {
				t.Fatalf("entry %d: batched and restored replicas answered differently: %+v vs %+v", pendingIdx[i], rb[i], rr[i])
			}
		}
		want := single.hash()
		for name, m := range map[string]*Machine{"batched": batched, "restored": restored} {
			idx, h, err := m.StateHash()
			if err != nil {
				t.Fatal(err)
			}
			if idx != single.next-1 || h != want {
				t.Fatalf("%s replica at %d/%s, single at %d/%s", name, idx, h, single.next-1, want)
			}
		}
		pending, pendingIdx = pending[:0], pendingIdx[:0]
		if rng.IntN(4) == 0 {
			snap, err := restored.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			fresh := NewMachine(Options{CheckInvariants: true})
			if err := fresh.Restore(snap); err != nil {
				t.Fatal(err)
			}
			restored = fresh
		}
	}

	for range entries {
		e := gen.next()
		index := single.next
		if e.data == nil {
			for _, r := range []*replica{single, twin} {
				if rs, _ := r.m.ApplyBatch([]uint64{index}, [][]byte{nil}); rs[0] != nil {
					t.Fatalf("entry %d: a raft-internal entry got a result", index)
				}
				r.next++
			}
		} else {
			res := single.applyRaw(e.data)
			if other := twin.applyRaw(e.data); !sameResult(res, other) {
				t.Fatalf("entry %d: replicas answered %+v and %+v", index, res, other)
			}
			checkAgainstModel(t, model, e, index, res)
		}
		if single.hash() != twin.hash() {
			t.Fatalf("entry %d: replicas diverged", index)
		}
		if single.now() != model.nowMs {
			t.Fatalf("entry %d: now %d, model %d", index, single.now(), model.nowMs)
		}
		pending = append(pending, e.data)
		pendingIdx = append(pendingIdx, index)
		if len(pending) >= 1+rng.IntN(64) {
			flush()
		}
	}
	flush()
}

func checkAgainstModel(t *testing.T, model *simModel, e simEntry, index uint64, res *Result) {
	t.Helper()
	if res.Index == 0 {
		t.Fatalf("entry %d: result without an index", index)
	}
	if e.cmd == nil {
		if res.OK() || res.Index != index {
			t.Fatalf("entry %d: garbage answered %+v", index, res)
		}
		return
	}
	c := e.cmd
	model.advance(c.TsMs)
	if c.Type != CmdNoop || c.IdemKey == "" {
		if res.Index != index {
			t.Fatalf("entry %d: answer carries index %d", index, res.Index)
		}
		return
	}
	rec, ok := model.idem[c.IdemKey]
	switch {
	case ok && bytes.Equal(rec.hash, c.ReqHash):
		if !res.Replay || res.Index != rec.index || !bytes.Equal(res.Body, rec.body) {
			t.Fatalf("entry %d: retry of %q (first at %d) answered %+v", index, c.IdemKey, rec.index, res)
		}
	case ok:
		if res.Status != http.StatusConflict || res.Code != wire.CodeIdempotencyReused {
			t.Fatalf("entry %d: reuse of %q answered %+v", index, c.IdemKey, res)
		}
	default:
		if !res.OK() || res.Replay || res.Index != index {
			t.Fatalf("entry %d: new key %q answered %+v", index, c.IdemKey, res)
		}
		model.idem[c.IdemKey] = simRecord{hash: c.ReqHash, expiresMs: model.nowMs + IdemRetentionMs, index: index, body: res.Body}
	}
}

func sameResult(a, b *Result) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Code == b.Code && a.Replay == b.Replay && a.Index == b.Index && bytes.Equal(a.Body, b.Body)
}

// simGen draws the command stream. The leader's clock mostly moves forward
// a little, sometimes jumps hours (past the idempotency retention), and
// sometimes runs backwards (a new leader whose clock lags).
type simGen struct {
	rng     *rand.Rand
	clock   int64
	foreign bool
}

func (g *simGen) stamp() int64 {
	switch r := g.rng.IntN(100); {
	case r < 70:
		g.clock += g.rng.Int64N(1500)
	case r < 85:
		g.clock -= g.rng.Int64N(5000)
	case r < 95:
		g.clock += g.rng.Int64N(2 * 60 * 60 * 1000)
	default:
		g.clock += g.rng.Int64N(30 * 60 * 60 * 1000)
	}
	return g.clock
}

func (g *simGen) next() simEntry {
	rng := g.rng
	var c *Command
	switch r := rng.IntN(100); {
	case r < 30:
		c = &Command{Type: CmdTick, TsMs: g.stamp()}
	case r < 70:
		// A small key space, so retries and reuses are common.
		c = &Command{Type: CmdNoop, TsMs: g.stamp(), IdemKey: fmt.Sprintf("acct%d:k%d", rng.IntN(3), rng.IntN(12))}
		if rng.IntN(5) > 0 {
			c.ReqHash = []byte{byte(rng.IntN(2))}
		}
	case r < 75:
		c = &Command{Type: CmdNoop, TsMs: g.stamp()}
	case r < 85:
		m := NodeMeta{ID: fmt.Sprintf("node%d", rng.IntN(5)), Raft: fmt.Sprintf("127.0.0.1:%d", 7000+rng.IntN(3)), HTTP: "h", Admin: fmt.Sprintf("a%d", rng.IntN(2))}
		if rng.IntN(6) == 0 {
			m.Raft = ""
		}
		c = mustSimCommand(CmdNodeMeta, g.stamp(), m)
	case r < 88:
		c = mustSimCommand(CmdGenesis, g.stamp(), GenesisPayload{Seed: rng.Uint64(), Deployment: "testnet"})
	case r < 91:
		c = &Command{Type: CmdType(1000 + rng.IntN(100)), TsMs: g.stamp()}
	case r < 94:
		return simEntry{data: nil}
	case r < 96:
		b := make([]byte, 1+rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[0] = 0xff // a CBOR "break" cannot start an item: never a command
		return simEntry{data: b}
	default:
		if !g.foreign {
			c = &Command{Type: CmdTick, TsMs: g.stamp()}
			break
		}
		payload := make([]byte, rng.IntN(40))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		c = &Command{Type: CmdType(rng.IntN(64)), TsMs: g.stamp(), Account: fmt.Sprintf("acct%d", rng.IntN(3)), Payload: payload}
		if rng.IntN(2) == 0 {
			c.Payload = nil
		}
	}
	b, err := c.Encode()
	if err != nil {
		panic(err)
	}
	return simEntry{data: b, cmd: c}
}

func mustSimCommand(t CmdType, ts int64, payload any) *Command {
	c, err := NewCommand(t, payload)
	if err != nil {
		panic(err)
	}
	c.TsMs = ts
	return c
}
