package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

// Feature level 8, oracle override review (2026-11-27). Each test runs at
// level 7 (the old behaviour, kept for replay) and at level 8.

// lastPriceFrame prints mid on BTCUSD and returns the prices frame's bytes.
func (w *tradeWorld) lastPriceFrame(midQ8 int64) []byte {
	w.t.Helper()
	from := len(w.events)
	wantOK(w.t, w.print("BTCUSD", midQ8))
	for _, ev := range w.events[from:] {
		if ev.Channel == "prices" && ev.Selector == "BTCUSD" {
			b, err := json.Marshal(ev.Data)
			if err != nil {
				w.t.Fatal(err)
			}
			return b
		}
	}
	w.t.Fatal("no prices frame")
	return nil
}

// TestPriceFrameShowsPinAndScript: an operator's pin made the prices frame
// of a feed held at 90,000 look exactly like a live oracle print. From
// LevelPriceSourceShown the frame says pinned, then scripted (also once
// the script has played its last point), then oracle after unpin; at
// level 7 the frame keeps its old bytes.
func TestPriceFrameShowsPinAndScript(t *testing.T) {
	for _, level := range []uint32{LevelPriceSourceShown - 1, LevelPriceSourceShown} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			want := func(frame []byte, source string) {
				t.Helper()
				if level < LevelPriceSourceShown {
					if strings.Contains(string(frame), "priceSource") {
						t.Fatalf("below the level the frame changed: %s", frame)
					}
					return
				}
				var v PriceEvent
				if err := json.Unmarshal(frame, &v); err != nil || v.PriceSource != source {
					t.Fatalf("frame %s, want priceSource %q", frame, source)
				}
			}
			want(w.lastPriceFrame(usdQ8(100_001)), "oracle")
			wantOK(t, w.at(mustCommand(t, CmdOraclePin, 0, OraclePinPayload{FeedID: "BTCUSD", MidQ8: usdQ8(90_000)})))
			want(w.lastPriceFrame(usdQ8(90_000)), "pinned")
			wantOK(t, w.at(mustCommand(t, CmdOracleScript, 0, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideStep,
				Points: []market.OverridePoint{{OffsetMs: 0, MidQ8: usdQ8(90_100)}, {OffsetMs: 10, MidQ8: usdQ8(90_200)}}})))
			w.walkTo(w.ts + 1_000) // past the script's last point
			want(w.lastPriceFrame(usdQ8(90_200)), "scripted")
			wantOK(t, w.at(mustCommand(t, CmdOracleUnpin, 0, OracleUnpinPayload{FeedID: "BTCUSD"})))
			want(w.lastPriceFrame(usdQ8(90_300)), "oracle")
			if level < LevelPriceSourceShown {
				// The exact old frame: what an entry of level 7 replays to.
				got := string(w.lastPriceFrame(usdQ8(90_400)))
				old := fmt.Sprintf(`{"feedId":"BTCUSD","midQ8":"%d","confQ9":"300000","tsMs":"%d","stalenessMs":"10000"}`, usdQ8(90_400), w.ts)
				if got != old {
					t.Fatalf("level 7 frame %s, want %s", got, old)
				}
			}
		})
	}
}

// TestMarketSetAnswerShowsPriceSourceFromLevel8: an operator's market
// change answers the public market view, which gains priceSource; the
// answer is a stored result, so below LevelPriceSourceShown it keeps its
// old bytes (no priceSource) and from it shows pinned on a pinned feed.
func TestMarketSetAnswerShowsPriceSourceFromLevel8(t *testing.T) {
	for _, level := range []uint32{LevelPriceSourceShown - 1, LevelPriceSourceShown} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			wantOK(t, w.at(mustCommand(t, CmdOraclePin, 0, OraclePinPayload{FeedID: "BTCUSD", MidQ8: usdQ8(90_000)})))
			halted := market.StatusHalted
			res := w.at(mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: "BTC-PERP", Status: &halted}))
			wantOK(t, res)
			has := strings.Contains(string(res.Body), `"priceSource":"pinned"`)
			if level < LevelPriceSourceShown && strings.Contains(string(res.Body), "priceSource") || level >= LevelPriceSourceShown && !has {
				t.Fatalf("level %d answer %s", level, res.Body)
			}
		})
	}
}
