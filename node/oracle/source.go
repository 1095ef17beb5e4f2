package oracle

import "errors"

// Print is one oracle observation in the integer units of the FSM.
type Print struct {
	MidQ8  int64 // price, dollars x 1e8, > 0
	ConfQ9 int64 // confidence half-width as a fraction of mid, x 1e9
	TsMs   int64 // observation time, ms since the epoch
}

// Source produces prints for named feeds. The node's oracle driver calls it
// on the leader once per feed per tick (about once a second).
//
// Contract:
//   - Resume(feedID, lastMidQ8, lastTsMs) sets the feed's starting point to
//     the last print committed in the replicated state. The driver calls it
//     for every feed before the first Next on a new leader, so the feed
//     continues from the committed price and never jumps back to a seed
//     price. It fails for an unknown feed or a non-positive mid.
//   - Next(feedID, nowMs) returns the feed's next print, stamped nowMs. Its
//     TsMs is strictly after the previous print's (resumed or returned) and
//     its MidQ8 is positive. When nowMs is not after the previous print it
//     returns ErrNotAdvanced and changes nothing: the driver skips the tick
//     (a new leader's clock may trail the old leader's stamps by a little).
//   - A print the driver fails to commit needs no undo: the next Next
//     continues from it, and its timestamp is still after the state's.
//   - Implementations are safe for concurrent use: the driver, leadership
//     callbacks and the admin listener may call them from different
//     goroutines.
type Source interface {
	Resume(feedID string, lastMidQ8, lastTsMs int64) error
	Next(feedID string, nowMs int64) (Print, error)
}

// Errors returned by sources.
var (
	ErrUnknownFeed = errors.New("oracle: unknown feed")
	ErrNotAdvanced = errors.New("oracle: time has not advanced past the last print")
	ErrBadPrice    = errors.New("oracle: price must be positive")
	ErrBadScript   = errors.New("oracle: invalid script")
)

// Feed ids of the shipped markets.
const (
	FeedBTCUSD = "BTCUSD"
	FeedETHUSD = "ETHUSD"
)

// DefaultStartPricesQ8 returns the prices a fresh cluster's feeds start from
// (a fresh map each call, so no caller can change another's defaults).
func DefaultStartPricesQ8() map[string]int64 {
	return map[string]int64{
		FeedBTCUSD: 97_000 * 100_000_000,
		FeedETHUSD: 3_400 * 100_000_000,
	}
}
