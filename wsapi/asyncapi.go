package wsapi

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// EventKind is one kind of event a channel carries: the `kind` of its
// frames and the Go type of their `data`, the type the state machine emits.
type EventKind struct {
	Channel string
	Kind    string
	Data    reflect.Type
	Summary string
}

// EventKinds lists every event the hub forwards, by channel. A test checks
// it against the kinds the state machine emits.
var EventKinds = []EventKind{
	{channelPrices, "price", reflect.TypeOf(fsm.PriceEvent{}), "One oracle print of the feed; priceSource says whether the live oracle or an operator's pin or script drove it."},
	{channelStats, "stats", reflect.TypeOf(fsm.StatsEvent{}), "The market's live figures, on every print of its feed (after the fills it caused) and every parameter change; open interest moved by orders shows at the next print."},
	{channelStats, "funding", reflect.TypeOf(fsm.FundingBoundaryView{}), "A funding boundary was recorded (hourly)."},
	{channelAccount, "deposit", reflect.TypeOf(fsm.DepositView{}), "A deposit was credited (faucet grants included)."},
	{channelAccount, "withdrawal", reflect.TypeOf(funds.WithdrawalView{}), "A withdrawal was requested or changed state; seq is the record's latest change."},
	{channelAccount, KindSessionRevoked, reflect.TypeOf(fsm.SessionRevokedView{}), "Keys of the account were revoked; a connection authenticated with one of them loses the account channel (an error frame with code unauthorized follows)."},
	{channelAccount, "order", reflect.TypeOf(trade.OrderView{}), "A market or limit order was created or changed status; seq is the order's latest change (GET /v1/orders pages on it)."},
	{channelAccount, "trigger", reflect.TypeOf(trade.TriggerView{}), "A trigger (stop, take-profit, entry, bracket leg) was created or changed status; seq is its latest change (GET /v1/orders?state= pages on it)."},
	{channelAccount, "fill", reflect.TypeOf(trade.FillView{}), "A fill; seq equals the fill's in GET /v1/fills."},
	{channelAccount, "position", reflect.TypeOf(trade.PositionChange{}), "The position in a market after a fill or a liquidation (position null when flat); funding's margin changes come as funding_flow."},
	{channelAccount, "liquidation", reflect.TypeOf(trade.LiquidationView{}), "A position was liquidated (partially or fully); seq equals the record's in GET /v1/liquidations."},
	{channelAccount, "funding_flow", reflect.TypeOf(trade.FundingFlowView{}), "A position paid or received funding at an hourly boundary; seq equals the record's in GET /v1/funding."},
	{channelAccount, "usdx", reflect.TypeOf(usdx.ActivityView{}), "A USDx event of the account (mint, redemption, stake, unstake, release, USDx withdrawal); seq equals the record's in GET /v1/usdx/activity."},
	{channelAccount, "referral_earning", reflect.TypeOf(growth.EarningView{}), "A referee's fill earned the account a referral reward (accrued); seq equals the earning's in GET /v1/referral/earnings. Later status changes (claimed, forfeited) are read there."},
	{channelAccount, "promoter_earning", reflect.TypeOf(growth.EarningView{}), "A referee of one of the account's promoter codes earned it a reward (accrued); seq equals the earning's in GET /v1/promoter/earnings."},
}

// MessageName is the AsyncAPI message of an event kind.
// (session_revoked: sessionRevokedEvent).
func (k EventKind) MessageName() string {
	parts := strings.Split(k.Kind, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "") + "Event"
}

// Schema makers handed in by the HTTP layer, which owns the wire schema
// conventions (decimal strings, x-svc-unit) shared with /openapi.json: ref
// returns a $ref to a response schema in components.schemas, object an
// inline object schema of a struct (request: fields optional unless tagged
// req).
type (
	refSchema    = func(t reflect.Type) map[string]any
	objectSchema = func(t reflect.Type, request bool) map[string]any
)

// AsyncAPI describes /v1/ws as an AsyncAPI 3.0 document from the point of
// view of the node: it receives client frames and sends the rest. The
// caller adds info.version and components.schemas.
func (h *Hub) AsyncAPI(ref refSchema, object objectSchema) map[string]any {
	return Describe(ref, object)
}

// Describe builds the AsyncAPI document (see Hub.AsyncAPI).
func Describe(ref refSchema, object objectSchema) map[string]any {
	d := &describer{ref: ref, object: object, messages: map[string]any{},
		channels: map[string]map[string]any{}, operations: map[string]any{}}
	d.channel("control", nil, "Frames about the connection itself, outside any subscription: authentication, subscription acknowledgements, errors and pings.", nil)
	d.channel(channelPrices, "prices/{feedId}", "Oracle prints of one feed; subscribe with {op:'subscribe', channel:'prices', feedId}.",
		map[string]any{"feedId": map[string]any{"description": "An oracle feed id, as in GET /v1/markets (oracleFeedId)."}})
	d.channel(channelStats, "stats/{marketId}", "Live figures and funding boundaries of one market; subscribe with {op:'subscribe', channel:'stats', marketId}.",
		map[string]any{"marketId": map[string]any{"description": "A market id, as in GET /v1/markets."}})
	d.channel(channelAccount, "account", "Every change of the authenticated account, as applied, with the seq of the REST histories; "+
		"subscribe with {op:'subscribe', channel:'account'} after auth (key scope read). De-duplicate on seq after a reconnect.", nil)

	d.clientMessages()
	d.serverMessages()
	for _, k := range EventKinds {
		d.message(k.Channel, k.MessageName(), "event "+k.Kind, k.Summary, d.eventPayload(k))
	}
	d.operations["sendPrices"] = d.op("send", channelPrices, "Oracle prints of a subscribed feed.", nil, d.eventNames(channelPrices)...)
	d.operations["sendStats"] = d.op("send", channelStats, "Live figures of a subscribed market.", nil, d.eventNames(channelStats)...)
	d.operations["sendAccount"] = d.op("send", channelAccount, "Account changes, in seq order.", nil, d.eventNames(channelAccount)...)

	channels := map[string]any{}
	for name, c := range d.channels {
		channels[name] = c
	}
	return map[string]any{
		"asyncapi": "3.0.0",
		"info": map[string]any{
			"title": "perpd WebSocket /v1/ws (protocol v" + strconv.Itoa(ProtocolVersion) + ")",
			"description": "The node's WebSocket, described from the node's side: it receives the client frames and sends the others. " +
				"Every frame is one JSON object in a text message, told apart by op (and, for op event, by channel and kind). " +
				"Every money, price, rate, timestamp, duration, contract count and sequence value is a JSON string of a decimal integer (x-svc-unit names its unit), as in /openapi.json. " +
				"The node sends {op:'ping'} every " + strconv.FormatInt(PingEvery.Milliseconds()/1000, 10) + " s; no reply is needed. " +
				"Close code " + strconv.Itoa(CloseResync) + " (resync): the node closes a connection that would lose frames (the client reads too slowly, the node's event stream lost events, or it ended because the node halted or is stopping: use another node); every frame before the close was delivered in order. " +
				"Reconnect recipe: subscribe and wait for the acknowledgement, then take the REST snapshot from the same node, then drop account events whose seq the snapshot already shows. " +
				"The stream never backfills, so a snapshot taken before the acknowledgement can miss the events applied in between. " +
				"Client frames that are not JSON objects or carry no op are ignored; an unknown op gets an error frame. " +
				"Every client frame (pong, ignored and refused ones included, and protocol-level pings and pongs) counts toward a raw budget of " + strconv.Itoa(RawFramesPerSecond) + " a second (burst " + strconv.Itoa(RawFrameBurst) + "); past it the node closes the connection: with 1008 (policy violation) after a message frame, without a close frame after a protocol ping or pong.",
		},
		"defaultContentType": "application/json",
		"servers": map[string]any{
			"node": map[string]any{"host": "{host}", "protocol": "ws", "pathname": "/v1/ws",
				"description": "Any node of the cluster (every node emits the same events); wss behind TLS.",
				"variables":   map[string]any{"host": map[string]any{"description": "The node's HTTP host and port, as for /openapi.json."}}},
		},
		"channels":   channels,
		"operations": d.operations,
		"components": map[string]any{"messages": d.messages},
		// AsyncAPI has no place for WebSocket close codes: an extension.
		"x-svc-close-codes": []any{map[string]any{"code": CloseResync, "name": "resync",
			"description": "Reconnect (to another node when the stream ended), subscribe and wait for the acknowledgement, then take a REST snapshot.", "reasons": []any{ReasonSlowConsumer, ReasonEventsLost, ReasonStreamEnded}}},
		"x-svc-protocol-version": ProtocolVersion,
		"x-svc-ping-every-ms":    PingEvery.Milliseconds(),
		"x-svc-limits": map[string]any{"maxConnectionsPerNode": MaxConnections, "maxConnectionsPerAddress": MaxConnectionsPerAddress, "maxConnectionsPerIPv6Site": SiteConnectionsFactor * MaxConnectionsPerAddress,
			"maxAccountChannelConnectionsPerNode": MaxAccountConnections, "maxSubscriptionsPerConnection": MaxSubscriptions,
			"maxClientFrameBytes": MaxFrameBytes, "sendBufferFrames": SessionBufferMsgs,
			"rawFramesPerSecond": RawFramesPerSecond, "rawFrameBurst": RawFrameBurst},
	}
}

type describer struct {
	ref        refSchema
	object     objectSchema
	messages   map[string]any
	channels   map[string]map[string]any
	operations map[string]any
}

func (d *describer) channel(name string, address any, desc string, params map[string]any) {
	c := map[string]any{"address": address, "description": desc, "messages": map[string]any{}}
	if params != nil {
		c["parameters"] = params
	}
	d.channels[name] = c
}

// message defines a message in components and lists it on its channel.
func (d *describer) message(channel, name, title, summary string, payload map[string]any) {
	d.messages[name] = map[string]any{"name": name, "title": title, "summary": summary, "payload": payload}
	d.channels[channel]["messages"].(map[string]any)[name] = map[string]any{"$ref": "#/components/messages/" + name}
}

func msgRef(channel, name string) map[string]any {
	return map[string]any{"$ref": "#/channels/" + channel + "/messages/" + name}
}

// op is an operation on channel with its messages, and an optional reply
// (on the control channel).
func (d *describer) op(action, channel, summary string, reply []string, msgs ...string) map[string]any {
	refs := make([]any, len(msgs))
	for i, m := range msgs {
		refs[i] = msgRef(channel, m)
	}
	o := map[string]any{"action": action, "summary": summary,
		"channel": map[string]any{"$ref": "#/channels/" + channel}, "messages": refs}
	if reply != nil {
		rr := make([]any, len(reply))
		for i, m := range reply {
			rr[i] = msgRef("control", m)
		}
		o["reply"] = map[string]any{"channel": map[string]any{"$ref": "#/channels/control"}, "messages": rr}
	}
	return o
}

func (d *describer) eventNames(channel string) []string {
	var out []string
	for _, k := range EventKinds {
		if k.Channel == channel {
			out = append(out, k.MessageName())
		}
	}
	return out
}

// frame is the inline schema of a frame type with op fixed and only the
// named properties kept (all of them when keep is empty).
func (d *describer) frame(v any, request bool, op string, keep ...string) (map[string]any, map[string]any) {
	s := d.object(reflect.TypeOf(v), request)
	props := s["properties"].(map[string]any)
	if len(keep) > 0 {
		want := map[string]bool{"op": true}
		for _, k := range keep {
			want[k] = true
		}
		for name := range props {
			if !want[name] {
				delete(props, name)
			}
		}
		if req, ok := s["required"].([]string); ok {
			var kept []string
			for _, r := range req {
				if want[r] {
					kept = append(kept, r)
				}
			}
			s["required"] = kept
		}
	}
	setKey(props, "op", "const", op)
	delete(props["op"].(map[string]any), "enum")
	return s, props
}

func (d *describer) clientMessages() {
	client := func(name, op, summary string, required []string, keep ...string) map[string]any {
		s, _ := d.frame(clientFrame{}, true, op, keep...)
		delete(s, "additionalProperties") // unknown fields are ignored
		s["required"] = append([]string{"op"}, required...)
		d.message("control", name, "client "+op, summary, s)
		return s
	}
	auth := client("auth", "auth", "Authenticate the connection with an API key (any scope); needed for the account channel. "+
		"An accepted auth replaces the previous one: a key of the same account with the read scope keeps the account subscription, any other ends it with an unsubscribed frame before the acknowledgement. "+
		"A refused auth (an error frame with badOp auth) changes nothing: the connection keeps its earlier key, account and subscriptions, and the error's accountId names that account (absent: not authenticated).",
		[]string{"apiKey"}, "apiKey")
	// An empty key or selector is refused like a missing one (validation),
	// not looked up.
	setKey(auth["properties"].(map[string]any), "apiKey", "minLength", 1)
	nonEmpty := func(field string) map[string]any {
		return map[string]any{"required": []string{field},
			"properties": map[string]any{field: map[string]any{"minLength": 1}}}
	}
	for _, op := range []string{"subscribe", "unsubscribe"} {
		s := client(op, op, op+" a channel: prices needs feedId, stats needs marketId, account needs a prior auth.",
			[]string{"channel"}, "channel", "feedId", "marketId")
		s["allOf"] = []any{
			map[string]any{"if": map[string]any{"properties": map[string]any{"channel": map[string]any{"const": channelPrices}}},
				"then": nonEmpty("feedId")},
			map[string]any{"if": map[string]any{"properties": map[string]any{"channel": map[string]any{"const": channelStats}}},
				"then": nonEmpty("marketId")},
		}
	}
	client("pong", "pong", "Optional answer to a ping; accepted and ignored.", nil)
	d.operations["receiveAuth"] = d.op("receive", "control", "Authenticate.", []string{"authAck", "error"}, "auth")
	d.operations["receiveSubscribe"] = d.op("receive", "control", "Subscribe to a channel.", []string{"subscribed", "error"}, "subscribe")
	d.operations["receiveUnsubscribe"] = d.op("receive", "control", "Unsubscribe from a channel.", []string{"unsubscribed", "error"}, "unsubscribe")
	d.operations["receivePong"] = d.op("receive", "control", "Optional answer to a ping.", nil, "pong")
}

func (d *describer) serverMessages() {
	s, props := d.frame(authAck{}, false, "auth")
	setKey(props, "ok", "const", true)
	setKey(props, "v", "const", ProtocolVersion)
	d.message("control", "authAck", "auth acknowledgement", "The key is valid: the connection acts for accountId under protocol version v.", s)
	for _, op := range []string{"subscribed", "unsubscribed"} {
		s, _ := d.frame(subAck{}, false, op)
		desc := "Acknowledges an " + map[string]string{"subscribed": "subscribe", "unsubscribed": "unsubscribe"}[op] + ", echoing channel and feedId or marketId."
		if op == "unsubscribed" {
			desc += " Also sent unasked, with channel account, when an auth frame ends the account subscription (a key of another account, or one without the read scope); a key of the same account with read keeps it."
		}
		d.message("control", op, op, desc, s)
	}
	s, props = d.frame(errorFrame{}, false, "error")
	setKey(props, "code", "enum", []any{wire.CodeUnauthorized, wire.CodeValidation, wire.CodeNotFound, wire.CodeInsufficientScope, wire.CodeRateLimited})
	d.message("control", "error", "error", "A client frame was refused (badOp names its op), or the key was revoked and the account channel closed (no badOp). "+
		"Codes: unauthorized (unknown or revoked key, account before auth), validation (unknown op or channel; a required field missing or empty: apiKey for auth, feedId for prices, marketId for stats, the message names it; a field that is not a string; too many subscriptions), not_found (a feedId or marketId that names nothing), insufficient_scope (account without the read scope), rate_limited (more frames than the connection's budget, or more connections on the account channel than a node allows). "+
		"A refused frame changes nothing. On a refused auth, accountId names the account the connection still acts for, with its earlier key and subscriptions (absent: it is not authenticated).", s)
	s, _ = d.frame(pingFrame{}, false, "ping")
	d.message("control", "ping", "ping", "Sent every "+strconv.FormatInt(PingEvery.Milliseconds()/1000, 10)+" s to every connection; no reply needed.", s)
	d.operations["sendError"] = d.op("send", "control", "Refusals, and the end of the account channel when the key is revoked.", nil, "error")
	d.operations["sendPing"] = d.op("send", "control", "Application-level keepalive.", nil, "ping")
}

// eventPayload is the event frame of one kind: channel and kind fixed, the
// channel's selector required, data the emitted type.
func (d *describer) eventPayload(k EventKind) map[string]any {
	s, props := d.frame(eventFrame{}, false, "event")
	props["channel"] = map[string]any{"type": "string", "const": k.Channel}
	props["kind"] = map[string]any{"type": "string", "const": k.Kind}
	props["data"] = d.ref(k.Data)
	required := []string{"channel", "data", "kind", "op", "tsMs"}
	switch k.Channel {
	case channelPrices:
		delete(props, "marketId")
		delete(props, "seq")
		required = append(required, "feedId")
	case channelStats:
		delete(props, "feedId")
		delete(props, "seq")
		required = append(required, "marketId")
	default:
		delete(props, "feedId")
		delete(props, "marketId")
		required = append(required, "seq")
	}
	s["required"] = required
	return s
}

func setKey(props map[string]any, prop, key string, v any) { props[prop].(map[string]any)[key] = v }
