package fsm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/node/tokenrail"
)

// Feature level 6: three fixes found by reviews on 2026-11-27. Each test
// runs at level 5 (the old rule, which must stay as it was for replay)
// and at level 6.

// TestBracketLegsArmIntoAFullIndex: a trigger-entry bracket takes room
// for its entry and both legs when it is placed, but only the entry enters
// the price index then. Reduce-only triggers of an account with no
// position fill the index meanwhile; when the entry fires it leaves (-1)
// and two legs come in (+2). Below the level the second insert failed and
// every replica halted on that print.
func TestBracketLegsArmIntoAFullIndex(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{trade.LevelLegsArmPast - 1, trade.LevelLegsArmPast} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			// Long 1,000 on a fall to 95,000, stop 90,000, take-profit 110,000.
			created(t, w.order(a, k, bracket("br", "buy", 1_000, usdQ8(95_000), usdQ8(90_000), usdQ8(110_000))), trade.StatusWorking)
			w.fillIndex("BTC-PERP", market.PriceIndexEntriesMax-2)
			b, kb := w.account(0) // no money, no position
			for i := range 2 {
				s := stopOrder(fmt.Sprintf("ro-%d", i), "BTC-PERP", "sell", 1_000, usdQ8(50_000))
				s.ReduceOnly = true
				created(t, w.order(b, kb, s), trade.StatusWorking)
			}
			res := w.print("BTCUSD", usdQ8(95_000))
			if level < trade.LevelLegsArmPast {
				if w.m.Halted() == nil {
					t.Fatalf("below the level the replica was expected to halt: %d %s", res.Status, res.Body)
				}
				return
			}
			if h := w.m.Halted(); h != nil {
				t.Fatalf("an oracle print halted the replica: %v", h)
			}
			wantOK(t, res)
			w.m.Read(func(st *State, _ uint64) {
				if n := st.Trade.Books["BTC-PERP"].Index.Len(); n != market.PriceIndexEntriesMax+1 {
					t.Errorf("index holds %d entries, want both legs in: %d", n, market.PriceIndexEntriesMax+1)
				}
			})
			for _, leg := range []string{"br" + trade.StopLegSuffix, "br" + trade.TakeProfitLegSuffix} {
				if o := w.orderOf(a, leg); o.TrigState != trade.TrigArmed {
					t.Errorf("leg %s: %s, want it armed", leg, o.TrigState)
				}
			}
			// Nothing new is placed while the index is past its bound.
			s := stopOrder("ro-late", "BTC-PERP", "sell", 1_000, usdQ8(50_000))
			s.ReduceOnly = true
			wantRefused(t, w.order(b, kb, s), 400, "validation")
		})
	}
}

// TestUSDxWithdrawalIDIsNeverPaidTwice: a withdrawal's id comes from the
// account and the client's idempotency key. Once it was trimmed and the
// key forgotten, the same key made a new withdrawal under the same id;
// the token rail (idempotent by id) answered the first transfer's ref and
// moved nothing, and the holder's USDx was marked paid. From the level
// the transfer id carries the withdrawal's seq.
func TestUSDxWithdrawalIDIsNeverPaidTwice(t *testing.T) {
	for _, level := range []uint32{usdx.LevelFreshRailIDs - 1, usdx.LevelFreshRailIDs} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			acct, key := w.account(btcBTC)
			w.balancedBy(1_000)
			w.mintN(acct, key, 300)
			rl := tokenrail.NewSim()
			const addr = "sprt1abcdefgh"
			const clientKey = "withdraw-1"
			id := "uwd_" + acct + "_" + clientKey // as httpapi's accountScopedID
			// pay is the token-rail driver: transfer under TransferID, then
			// report the custody transfer.
			pay := func(wid string, q int64) string {
				t.Helper()
				var railID string
				w.m.Read(func(st *State, _ uint64) { railID = st.USDx.Withdrawals[wid].TransferID() })
				ref, err := rl.Transfer(context.Background(), railID, q, addr)
				if err != nil {
					t.Fatal(err)
				}
				wantOK(t, w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: wid, IssuerRef: ref}))
				return ref
			}
			wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: id, Usdx: 1, SparkAddress: addr}, clientKey))
			firstRef := pay(id, 1)
			for i := range usdx.WithdrawalsKept {
				wid := fmt.Sprintf("uwd_other_%d", i)
				wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: wid, Usdx: 1, SparkAddress: addr}, wid))
				pay(wid, 1)
			}
			// A day passes: the idempotency store forgets the key.
			for end := w.ts + IdemRetentionMs + 60_000; w.ts < end; {
				w.ts += MaxClockStepMs - 1
				wantOK(t, w.at(&Command{Type: CmdTick}))
			}
			wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: id, Usdx: 50, SparkAddress: addr}, clientKey))
			secondRef := pay(id, 50)
			if reused := secondRef == firstRef; reused != (level < usdx.LevelFreshRailIDs) {
				t.Fatalf("second transfer's ref %q, first %q: reused %v at level %d", secondRef, firstRef, reused, level)
			}
		})
	}
}

// TestFaucetGrantIsBounded: an oversized grant (an operator's typo) made
// the first faucet call halt every replica: the grant was taken, then the
// settlement refused the amount. From the level genesis refuses it, and a
// faucet call the ledger could not credit is refused before the grant.
func TestFaucetGrantIsBounded(t *testing.T) {
	const t0 = 1_700_000_000_000
	start := func(t *testing.T) (*Machine, func(*Command) *Result) {
		m := NewMachine(Options{}) // production: a panic halts the replica
		idx := uint64(0)
		apply := func(c *Command) *Result {
			idx++
			b, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			res, _ := m.Apply(idx, b)
			return res
		}
		return m, apply
	}
	signupAndFaucet := func(t *testing.T, apply func(*Command) *Result) *Result {
		sum := sha256.Sum256([]byte("k"))
		wantOK(t, apply(mustCommand(t, CmdSignup, t0+1, access.NewAccount{AccountID: "acc_1", KeyID: "key_1",
			KeyHashHex: hex.EncodeToString(sum[:])})))
		c := mustCommand(t, CmdFaucet, t0+2, nil)
		c.Account, c.KeyID, c.IdemKey, c.ReqHash = "acc_1", "key_1", "acct:acc_1:f1", []byte("f1")
		return apply(c)
	}
	genesis := func(level uint32, grant int64) *Command {
		return mustCommand(t, CmdGenesis, t0, GenesisPayload{FeatureLevel: level, Seed: 1, Deployment: "testnet", FaucetGrantMsat: grant})
	}
	oversized := int64(funds.MaxMoneyMsat + 1000)

	t.Run("level=5", func(t *testing.T) {
		m, apply := start(t)
		wantOK(t, apply(genesis(LevelFaucetBounded-1, oversized)))
		signupAndFaucet(t, apply)
		if m.Halted() == nil {
			t.Fatal("below the level an oversized grant was expected to halt the replica")
		}
	})
	t.Run("level=6 genesis", func(t *testing.T) {
		m, apply := start(t)
		wantRefused(t, apply(genesis(LevelFaucetBounded, oversized)), 400, "validation")
		wantRefused(t, apply(genesis(LevelFaucetBounded, -1)), 400, "validation")
		wantOK(t, apply(genesis(LevelFaucetBounded, MaxFaucetGrantMsat)))
		wantOK(t, signupAndFaucet(t, apply))
		if m.Halted() != nil {
			t.Fatal(m.Halted())
		}
	})
	t.Run("level=6 ledger full", func(t *testing.T) {
		m, apply := start(t)
		wantOK(t, apply(genesis(LevelFaucetBounded, 0)))
		// The lifetime credit counter is one grant short of overflowing.
		m.Read(func(st *State, _ uint64) { st.Ledger.CreditedMsat = math.MaxInt64 - st.Access.Faucet.GrantMsat + 1 })
		res := signupAndFaucet(t, apply)
		wantRefused(t, res, 503, "feature_unavailable")
		if m.Halted() != nil {
			t.Fatal(m.Halted())
		}
		m.Read(func(st *State, _ uint64) {
			if left := st.Access.FaucetGrantsLeft("acc_1", t0+3); left != st.Access.Faucet.GrantsPerHour {
				t.Errorf("a refused faucet call took a grant: %d of %d left", left, st.Access.Faucet.GrantsPerHour)
			}
			if b := st.Ledger.Balance(ledger.Free("acc_1")); b != 0 {
				t.Errorf("a refused faucet call credited %d", b)
			}
		})
	})
}
