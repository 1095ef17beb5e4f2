package fsm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// Feature level 8, history review (2026-11-27).

// TestOrderAndTriggerEventsCarryTheViewsSeq: a resting limit order and a
// bracket with a trigger entry each emit events whose seq is the order's
// latest change. From LevelViewsShowSeq the event's data shows that seq
// too, as every other record's does and as GET /v1/orders shows it; below
// the level the data keeps its old bytes, without seq.
func TestOrderAndTriggerEventsCarryTheViewsSeq(t *testing.T) {
	for _, level := range []uint32{trade.LevelViewsShowSeq - 1, trade.LevelViewsShowSeq} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			w.events = nil
			created(t, w.order(acct, key, limitOrder("l1", "ETH-PERP", "buy", 10, usdQ8(3_000))), trade.StatusResting)
			created(t, w.order(acct, key, bracket("b", "buy", 100, usdQ8(101_000), usdQ8(95_000), usdQ8(110_000))), trade.StatusWorking)
			wantOK(t, w.cancel(acct, key, "l1", "del-l1"))
			n := 0
			for _, ev := range w.events {
				if ev.Kind != "order" && ev.Kind != "trigger" {
					continue
				}
				n++
				b, err := json.Marshal(ev.Data)
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				seq, has := m["seq"]
				if level < trade.LevelViewsShowSeq {
					if has {
						t.Fatalf("old level: %s event data gained seq: %s", ev.Kind, b)
					}
					continue
				}
				if seq != strconv.FormatUint(ev.Seq, 10) {
					t.Fatalf("%s event at seq %d shows seq %v: %s", ev.Kind, ev.Seq, seq, b)
				}
			}
			// l1 placed and canceled, the entry and its two legs placed.
			if n != 5 {
				t.Fatalf("%d order and trigger events, want 5", n)
			}
		})
	}
}
