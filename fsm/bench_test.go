package fsm

import (
	"fmt"
	"io"
	"testing"

	"github.com/perpd/perpd/fsm/access"
)

// benchMachine returns a machine with n accounts, each with a master key.
func benchMachine(b *testing.B, accounts int) (*Machine, uint64) {
	b.Helper()
	m := NewMachine(Options{})
	idx := uint64(0)
	apply := func(c *Command) *Result {
		idx++
		data, err := c.Encode()
		if err != nil {
			b.Fatal(err)
		}
		r, _ := m.Apply(idx, data)
		return r
	}
	g, _ := NewCommand(CmdGenesis, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 1, Deployment: "testnet", FaucetGrantsPerHour: 1 << 30, SignupsPerHour: 1 << 30})
	g.TsMs = 1_800_000_000_000
	apply(g)
	for i := 0; i < accounts; i++ {
		c, _ := NewCommand(CmdSignup, access.NewAccount{AccountID: fmt.Sprintf("acc_%08d", i), UserID: "u",
			RailAddress: "sparkt1x", KeyID: fmt.Sprintf("key_%08d", i), KeyHashHex: fmt.Sprintf("%064d", i)})
		c.TsMs = g.TsMs
		if r := apply(c); !r.OK() {
			b.Fatalf("signup: %s", r.Body)
		}
	}
	return m, idx
}

// BenchmarkApplyFaucet measures one idempotent, money-moving command
// through decode, dispatch, idempotency store, ledger and record keeping.
func BenchmarkApplyFaucet(b *testing.B) {
	m, idx := benchMachine(b, 1000)
	cmds := make([][]byte, b.N)
	for i := range cmds {
		c, _ := NewCommand(CmdFaucet, nil)
		c.TsMs = 1_800_000_000_000 + int64(i)
		c.Account, c.KeyID = fmt.Sprintf("acc_%08d", i%1000), fmt.Sprintf("key_%08d", i%1000)
		c.IdemKey, c.ReqHash = fmt.Sprintf("acct:%s:%d", c.Account, i), []byte{1}
		cmds[i], _ = c.Encode()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idx++
		if r, _ := m.Apply(idx, cmds[i]); !r.OK() {
			b.Fatalf("faucet: %s", r.Body)
		}
	}
}

// BenchmarkSnapshot10kAccounts measures encoding the whole state, which
// raft's snapshot and the state hash both do.
func BenchmarkSnapshot10kAccounts(b *testing.B) {
	m, _ := benchMachine(b, 10_000)
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for i := 0; i < b.N; i++ {
		s, err := m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		size = len(s)
	}
	b.ReportMetric(float64(size), "bytes/snapshot")
}

// BenchmarkSnapshotAndRestore100kAccounts measures encoding and restoring
// the state of 100,000 funded accounts (SPEC-shaped: master key, ledger
// balance, deposit record): what a restarting replica or a snapshot
// install pays. Restore is what a new member waits for; encoding runs on
// the snapshot shadow, beside apply (node/shadow.go).
func BenchmarkSnapshotAndRestore100kAccounts(b *testing.B) {
	m, _ := benchMachine(b, 100_000)
	snap, err := m.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := m.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(snap)), "bytes/snapshot")
	})
	// What a node pays: Persist streams the snapshot to its file and the
	// state hash to SHA-256, a field of State at a time.
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := m.SnapshotTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(m.largestField.Load()), "bytes/largest-field")
	})
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := NewMachine(Options{}).Restore(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
}
