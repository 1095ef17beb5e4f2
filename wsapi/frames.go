package wsapi

import (
	"encoding/json"

	"github.com/perpd/perpd/fsm/wire"
)

// ProtocolVersion is echoed as `v` in the auth acknowledgement. The
// protocol is additive only.
const ProtocolVersion = 1

// The frame types below are what the hub sends and reads; the AsyncAPI
// description (asyncapi.go) is generated from them, so their tags (unit,
// enum, doc) are part of the contract like a REST view's.

// clientFrame is any frame a client sends; unknown fields are ignored.
type clientFrame struct {
	Op       string `json:"op" enum:"auth,subscribe,unsubscribe,pong"`
	APIKey   string `json:"apiKey" doc:"the API key (op auth)"`
	Channel  string `json:"channel" enum:"prices,stats,account"`
	FeedID   string `json:"feedId" doc:"the feed (channel prices)"`
	MarketID string `json:"marketId" doc:"the market (channel stats)"`
}

type authAck struct {
	Op        string `json:"op"`
	OK        bool   `json:"ok"`
	V         int    `json:"v" doc:"protocol version"`
	AccountID string `json:"accountId"`
}

type subAck struct {
	Op       string `json:"op"` // subscribed, unsubscribed
	Channel  string `json:"channel" enum:"prices,stats,account"`
	FeedID   string `json:"feedId,omitempty"`
	MarketID string `json:"marketId,omitempty"`
}

type errorFrame struct {
	Op    string `json:"op"` // error
	Code  string `json:"code"`
	Error string `json:"error"`
	BadOp string `json:"badOp,omitempty" doc:"the op of the client frame refused"`
	// AccountID answers a refused auth: a refused frame changes nothing,
	// so the client learns which identity the connection kept.
	AccountID string `json:"accountId,omitempty" doc:"on a refused auth (badOp auth): the account the connection still acts for, with its earlier key and subscriptions; absent when it is not authenticated"`
}

type pingFrame struct {
	Op   string   `json:"op"` // ping
	TsMs wire.Int `json:"tsMs" unit:"ms" doc:"the node's clock when sent"`
}

// eventFrame carries one event of a channel.
type eventFrame struct {
	Op       string          `json:"op"` // event
	Channel  string          `json:"channel" enum:"prices,stats,account"`
	FeedID   string          `json:"feedId,omitempty"`
	MarketID string          `json:"marketId,omitempty"`
	Kind     string          `json:"kind"`
	Seq      wire.Int        `json:"seq,omitempty" unit:"seq" doc:"the record's seq, shared with the REST histories (account events only)"`
	TsMs     wire.Int        `json:"tsMs" unit:"ms" doc:"log time of the entry that produced the event"`
	Data     json.RawMessage `json:"data"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
