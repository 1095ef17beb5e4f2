package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkScaling is the cost table of docs/performance.md: how the
// common operations grow with the state. At each size N the world has N
// funded accounts, each with one open BTC-PERP position (alternately long
// and short, so open interest stays balanced) and one resting limit order
// 1-10% from the mid; the idempotency store holds their 2N placements. It
// measures a market order (accounts in turn, alternating buy and sell), a
// resting limit placement, an oracle print that crosses nothing, and the
// snapshot's encode and restore (with its size). The world is built once
// per size, outside the timer.
func BenchmarkScaling(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		var w *benchWorld
		world := func(b *testing.B) *benchWorld {
			if w == nil {
				w = scalingWorld(b, n)
			}
			return w
		}
		b.Run(fmt.Sprintf("accounts=%d/market", n), func(b *testing.B) {
			w := world(b)
			entries := make([][]byte, b.N)
			for i := range entries {
				side := "buy"
				if (i/n)%2 == 1 {
					side = "sell"
				}
				entries[i] = w.orderCmd(i%n, mktOrder(fmt.Sprintf("sm%d-%d", n, i), "BTC-PERP", side, 1_000))
			}
			b.ReportAllocs()
			b.ResetTimer()
			w.runEntries(entries, 1)
			b.StopTimer()
			reportOrdersPerSec(b)
		})
		b.Run(fmt.Sprintf("accounts=%d/limit", n), func(b *testing.B) {
			w := world(b)
			rng := rand.New(rand.NewPCG(5, uint64(n)))
			entries := make([][]byte, b.N)
			for i := range entries {
				entries[i] = w.orderCmd(i%n, restingLimit(rng, fmt.Sprintf("sl%d-%d", n, i), "BTC-PERP", i%2 == 0, 1_000, benchBTCMidQ8, benchTickBTC))
			}
			b.ReportAllocs()
			b.ResetTimer()
			w.runEntries(entries, 1)
			b.StopTimer()
			// Cancel them again, untimed, so the book stays at one order
			// per account (and under the per-account cap) for the next run.
			for i := range entries {
				w.mustOK(w.apply(mustCancel(w, i%n, fmt.Sprintf("sl%d-%d", n, i))))
			}
		})
		b.Run(fmt.Sprintf("accounts=%d/print", n), func(b *testing.B) {
			w := world(b)
			entries := make([][]byte, b.N)
			for i := range entries {
				mid := benchBTCMidQ8
				if i%2 == 0 {
					mid += benchTickBTC // a tick up and back: crosses nothing
				}
				entries[i] = w.printCmd("BTCUSD", mid)
			}
			b.ReportAllocs()
			b.ResetTimer()
			w.runEntries(entries, 1)
		})
		b.Run(fmt.Sprintf("accounts=%d/snapshot", n), func(b *testing.B) {
			w := world(b)
			var snap []byte
			b.ReportAllocs()
			for b.Loop() {
				s, err := w.m.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				snap = s
			}
			b.ReportMetric(float64(len(snap))/1e6, "MB")
			var tradeBytes, idemBytes int
			w.m.Read(func(st *State, _ uint64) {
				tb, _ := Marshal(st.Trade)
				ib, _ := Marshal(st.Idem)
				tradeBytes, idemBytes = len(tb), len(ib)
			})
			b.ReportMetric(float64(tradeBytes)/1e6, "trade-MB")
			b.ReportMetric(float64(idemBytes)/1e6, "idem-MB")
		})
		b.Run(fmt.Sprintf("accounts=%d/restore", n), func(b *testing.B) {
			w := world(b)
			snap, err := w.m.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := NewMachine(Options{}).Restore(snap); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// scalingWorld builds BenchmarkScaling's world of n accounts.
func scalingWorld(b *testing.B, n int) *benchWorld {
	b.Helper()
	w := newBenchWorld(b, n, btcBTC)
	rng := rand.New(rand.NewPCG(9, uint64(n)))
	entries := make([][]byte, 0, 2*n)
	for i := range n {
		side := "buy"
		if i%2 == 1 {
			side = "sell"
		}
		entries = append(entries, w.orderCmd(i, mktOrder(fmt.Sprintf("sp%d", i), "BTC-PERP", side, 1_000)))
		entries = append(entries, w.orderCmd(i, restingLimit(rng, fmt.Sprintf("sr%d", i), "BTC-PERP", i%2 == 0, 1_000, benchBTCMidQ8, benchTickBTC)))
	}
	w.runEntries(entries, 256)
	return w
}

// mustCancel is the cancel entry of account i's order id.
func mustCancel(w *benchWorld, i int, id string) *Command {
	acct, key := benchAcct(i)
	c := mustCommand(w.tb, CmdCancelOrder, 0, CancelOrderPayload{OrderID: id})
	c.Account, c.KeyID = acct, key
	return c
}
