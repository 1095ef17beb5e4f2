package wsapi

import "encoding/json"

// ProtocolVersion is echoed as `v` in the auth acknowledgement. The
// protocol is additive only.
const ProtocolVersion = 1

// clientFrame is any frame a client sends; unknown fields are ignored.
type clientFrame struct {
	Op       string `json:"op"`
	APIKey   string `json:"apiKey"`
	Channel  string `json:"channel"`
	FeedID   string `json:"feedId"`
	MarketID string `json:"marketId"`
}

type authAck struct {
	Op        string `json:"op"`
	OK        bool   `json:"ok"`
	V         int    `json:"v"`
	AccountID string `json:"accountId"`
}

type subAck struct {
	Op       string `json:"op"` // subscribed, unsubscribed
	Channel  string `json:"channel"`
	FeedID   string `json:"feedId,omitempty"`
	MarketID string `json:"marketId,omitempty"`
}

type errorFrame struct {
	Op    string `json:"op"` // error
	Code  string `json:"code"`
	Error string `json:"error"`
	BadOp string `json:"badOp,omitempty"`
}

type pingFrame struct {
	Op   string `json:"op"` // ping
	TsMs string `json:"tsMs"`
}

// eventFrame carries one event of a channel.
type eventFrame struct {
	Op       string          `json:"op"` // event
	Channel  string          `json:"channel"`
	FeedID   string          `json:"feedId,omitempty"`
	MarketID string          `json:"marketId,omitempty"`
	Kind     string          `json:"kind"`
	Seq      string          `json:"seq,omitempty"`
	TsMs     string          `json:"tsMs"`
	Data     json.RawMessage `json:"data"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
