package market

import (
	"testing"

	"github.com/fxamacker/cbor/v2"
)

const (
	// launchMs is 2026-01-01T00:00:00Z, a day, hour and minute boundary.
	launchMs int64 = 1_767_225_600_000
	minuteMs int64 = 60_000
	hourMs   int64 = 3_600_000

	btcQ8 int64 = 97_000 * Q8
	ethQ8 int64 = 3_400 * Q8
)

func newTestState(t testing.TB) *State {
	t.Helper()
	s, err := New(launchMs, DefaultCatalogue())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func mustPrint(t testing.TB, s *State, feed string, midQ8, tsMs int64) {
	t.Helper()
	if err := s.ApplyPrint(tsMs, feed, midQ8, 300_000, tsMs); err != nil {
		t.Fatalf("ApplyPrint(%s, %d, %d): %v", feed, midQ8, tsMs, err)
	}
}

func mustCandles(t testing.TB, s *State, market string, interval int64, limit int, nowMs int64) []Candle {
	t.Helper()
	c, err := s.Candles(market, interval, limit, nowMs)
	if err != nil {
		t.Fatalf("Candles(%s, %d, %d): %v", market, interval, limit, err)
	}
	return c
}

// walkQ8 is a deterministic saw-tooth price path around base, so tests can
// recompute any bar from first principles.
func walkQ8(base, tsMs int64) int64 {
	step := (tsMs / 1000) % 600
	if step > 300 {
		step = 600 - step
	}
	return base + step*Q8
}

var canonical = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := canonical.Marshal(v)
	if err != nil {
		t.Fatalf("cbor encode: %v", err)
	}
	return b
}

func ptr(v int64) *int64 { return &v }
