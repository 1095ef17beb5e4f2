package fsm

// Event is something applying an entry produced that subscribers may want:
// a fill, a deposit, a price print. Events carry the shared record Seq when
// they correspond to a history record (0 otherwise). Every replica emits the
// same events for the same entry, so a WebSocket client may use any node.
// Events are not part of State: after a restore nothing is replayed.
type Event struct {
	Seq     uint64 `json:"seq,string,omitempty"`
	Kind    string `json:"kind"`
	Account string `json:"-"`
	// Channel and Selector route market-data events (prices/feedId,
	// stats/marketId); account events route by Account.
	Channel  string `json:"-"`
	Selector string `json:"-"`
	Data     any    `json:"data"`
	TsMs     int64  `json:"tsMs,string"`
}
