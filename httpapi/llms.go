package httpapi

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// LLMSText renders llms.txt (full: llms-full.txt), generated from the
// route table like the OpenAPI description, so the three never disagree.
func (s *Server) LLMSText(full bool) string {
	var b strings.Builder
	b.WriteString("# perpd\n\n")
	b.WriteString("> A sats-denominated perpetual-futures venue for automated and AI-agent traders. ")
	b.WriteString("Contract version " + ContractVersion + ". Machine-readable description: /openapi.json; the WebSocket /v1/ws: /asyncapi.json (AsyncAPI 3.0).\n\n")
	b.WriteString("Wire rules: every money, price, rate, timestamp, duration, contract count and sequence value is a JSON string of a decimal integer (^-?[0-9]+$); never parse it as a float. ")
	b.WriteString("Units: msat (1 sat = 1000 msat), sats, q8 (price x 1e8), q9 (rate x 1e9), ms, seq, contracts, int. ")
	b.WriteString("Errors are {error, code}; branch on code. Keyed routes take the key in the x-api-key header only. ")
	if full {
		b.WriteString("Fields: name!: required in a request; name?: may be absent from a response; type|null: present but may be null. ")
		b.WriteString("Any route may refuse 400 validation, 401 unauthorized, 404 not_found, 405 validation, 413 body_too_large, 429 rate_limited (with Retry-After), 500 or 503 unavailable; " +
			"keyed routes also 403 insufficient_scope; idem routes also 409 idempotency_key_reused (the key was used with another body) or conflict; " +
			"USDx, referral, promoter, leaderboard and Proof of Reserves routes also 503 feature_unavailable (the cluster's feature level is below them). " +
			"POST /v1/orders and POST /v1/cancel-all-after answer every such 404, 409 and 413 as 400 with the same code (SPEC: a refusal on order placement is 400). " +
			"A route's own refusals are listed under it (refuses:), as in /openapi.json. ")
	}
	b.WriteString("Routes marked idem need an idempotency-key header (scoped to the account): a retry with the same key and body within 24 hours " +
		"replays the first success (Idempotent-Replayed: true) and applies nothing twice, except that a key value is shown once only " +
		"(signup: the retry is 409 conflict; POST /v1/sessions: the replay has no apiKey); another body under the key is 409 idempotency_key_reused (400 on POST /v1/orders and POST /v1/cancel-all-after). " +
		"A key that begins with " + strings.Join(reservedIdemPrefixes, " or ") + " is refused (400 validation) on keyed routes " +
		"but POST /v1/usdx/redemptions (whose keys the prefix names) and DELETE /v1/orders/{id}. " +
		"A refused request does not bind its key: a retry is judged afresh and may succeed. ")
	b.WriteString(headDoc + " ")
	b.WriteString("Reads accept X-Min-Index: N (wait until this node applied log index N, as returned in X-Raft-Index) and X-Consistency: linearizable, each at most once (given twice: 400 validation). " +
		"Proof of Reserves: GET /por publishes each minute's tree roots, GET /v1/por/proof the caller's inclusion proof; the proof's field " +
		"descriptions in /openapi.json (ProofDoc.path, LeafDoc.accountTag, LeafDoc.balanceMsat) are the whole verification rule.\n\n")
	b.WriteString("Typical loop: POST /v1/signup, POST /v1/faucet, GET /v1/markets, subscribe to prices on /v1/ws, POST /v1/orders, POST /v1/sessions for a read+trade delegate key, POST /v1/cancel-all-after, POST /v1/withdrawals/quote then POST /v1/withdrawals.\n\n")
	if full {
		b.WriteString(contractMath())
	} else {
		b.WriteString("Contract math (the value of a contract, notional, spread and impact, execution price, fee, margin, entry, PnL, liquidation price, funding, withdrawal fees, each with its rounding): /llms-full.txt.\n\n")
	}
	b.WriteString("## Endpoints\n\n")
	lt := newLLMSTypes(s.Routes)
	routes := append([]*Route(nil), s.Routes...)
	sort.SliceStable(routes, func(i, j int) bool { return routes[i].Path < routes[j].Path })
	for _, r := range routes {
		auth := "public"
		if r.Auth == Keyed {
			auth = "key"
			if r.Scope != "" {
				auth += ", scope " + r.Scope
			}
		}
		if r.Idem {
			auth += ", idem"
		} else if r.IdemOptional {
			auth += ", idem optional"
		}
		fmt.Fprintf(&b, "- %s %s (%s): %s\n", r.Method, openapiPath(r.Path), auth, r.Summary)
		if !full {
			continue
		}
		if r.Query != nil {
			fmt.Fprintf(&b, "  query: %s\n", lt.fieldList(reflect.TypeOf(r.Query), true))
		}
		if r.Request != nil {
			fmt.Fprintf(&b, "  body: %s\n", lt.fieldList(reflect.TypeOf(r.Request), true))
		}
		statuses := make([]int, 0, len(r.Responses))
		for st := range r.Responses {
			statuses = append(statuses, st)
		}
		sort.Ints(statuses)
		for _, st := range statuses {
			if shape := lt.body(r, st); shape != "" {
				fmt.Fprintf(&b, "  %d: %s\n", st, shape)
			}
		}
		if len(r.Refuses) > 0 {
			fmt.Fprintf(&b, "  refuses: %s\n", refusesList(r.Refuses))
		}
		if r.IdemRetry != "" {
			fmt.Fprintf(&b, "  retry: %s\n", r.IdemRetry)
		}
	}
	if full {
		lt.writeTypes(&b)
		b.WriteString(wsProtocol)
	}
	return b.String()
}

// wsProtocol describes /v1/ws in llms-full.txt.
const wsProtocol = `
## WebSocket /v1/ws (protocol v1)

Every channel, frame and event payload, with the same wire conventions as /openapi.json: /asyncapi.json (AsyncAPI 3.0).

Client frames: {op:"auth", apiKey}, {op:"subscribe"|"unsubscribe", channel, feedId|marketId}, {op:"pong"}. Channels: prices (feedId), stats (marketId), account (after auth; key scope read).
Server frames: {op:"auth", ok, v, accountId}; {op:"subscribed"|"unsubscribed", channel, feedId|marketId}; {op:"event", channel, kind, seq?, tsMs, data}; {op:"error", code, error, badOp?, accountId?}; {op:"ping", tsMs} every 15 s (no reply needed).
Reconnect recipe: subscribe and wait for the acknowledgement, then take the REST snapshot from the same node, then drop events whose seq the snapshot already shows (or that were seen). The stream never backfills, so a snapshot taken before the acknowledgement can miss the events applied in between.
Close code 4000 (resync): the node closes a connection that would lose frames, because the client reads too slowly (its send queue is full), the node's event stream lost events (it fell behind, or installed a snapshot in place of log entries), or the stream ended (the node halted or is stopping; use another node). Every frame before the close was delivered in order; after it, follow the reconnect recipe.
Refusals: a frame without a field its op needs (auth without apiKey, prices without feedId, stats without marketId; an empty string counts as missing) or with a field that is not a string gets {op:"error", code:"validation", badOp} naming the field; a feedId or marketId that names nothing gets not_found; an unknown or revoked key unauthorized.
Limits: opening a connection draws one read token of the client address (429 rate_limited with Retry-After when empty); on a connection, auth, subscribe and unsubscribe frames draw a bucket of 10 a second (burst 128), past which a frame is refused with {op:"error", code:"rate_limited", badOp} and does nothing.
Authenticating again on an open connection: a key of the same account with scope read keeps the account subscription (key rotation); any other key ends it with {op:"unsubscribed", channel:"account"} before its auth acknowledgement. A refused auth (error frame, badOp auth: a key that is not valid, no key, over the frame budget) changes nothing: the connection keeps its earlier key, account and subscriptions, and the error's accountId names that account (absent: not authenticated).
A revoked key loses the account channel when the revocation applies: an error frame with code unauthorized, then no more account events on that connection (public channels stay).
`

// refusesList renders a route's own refusals: "400 a|b; 409 c".
func refusesList(m map[int][]string) string {
	statuses := make([]int, 0, len(m))
	for st := range m {
		statuses = append(statuses, st)
	}
	sort.Ints(statuses)
	parts := make([]string, len(statuses))
	for i, st := range statuses {
		codes := append([]string(nil), m[st]...)
		sort.Strings(codes)
		parts[i] = fmt.Sprintf("%d %s", st, strings.Join(codes, "|"))
	}
	return strings.Join(parts, "; ")
}

// llmsTypes renders shapes for llms-full.txt: a named struct is written
// by its name, the name /openapi.json gives it in components/schemas, and
// every name written is defined once under "## Types".
type llmsTypes struct {
	names   map[reflect.Type]string
	used    map[reflect.Type]bool // true: reached from a request
	pending []reflect.Type
}

// newLLMSTypes names the shapes of routes as OpenAPI does (same walk, same
// order), so a name in the index is a schema of the description.
func newLLMSTypes(routes []*Route) *llmsTypes {
	g := newSchemaGen()
	for _, r := range routes {
		g.operation(r)
	}
	return &llmsTypes{names: g.names, used: map[reflect.Type]bool{}}
}

// body renders the response body of status st of route r: a struct's
// fields, an array or a choice of named shapes; "" for a body that is not
// JSON (PNG, HTML, text) or has no fixed shape.
func (lt *llmsTypes) body(r *Route, st int) string {
	body := r.Responses[st]
	if body == nil || st < 400 && r.Content != "" && r.Content != "application/json" {
		return ""
	}
	if alts, ok := body.(oneOf); ok {
		parts := make([]string, len(alts))
		for i, alt := range alts {
			parts[i] = lt.label(reflect.TypeOf(alt), false)
		}
		return strings.Join(parts, " | ")
	}
	t := reflect.TypeOf(body)
	switch {
	case t.Kind() == reflect.Struct && t != intType:
		return lt.fieldList(t, false)
	case t.Kind() == reflect.Slice:
		return lt.label(t, false)
	}
	return ""
}

// fieldList renders a struct's fields as name:type[unit] in SPEC's
// notation, as the OpenAPI description reads them: "!" marks a required
// request field, "?" a response field that may be absent, and "|null" a
// value that may be null (a response pointer that is not omitted, or a
// request field tagged nullable).
func (lt *llmsTypes) fieldList(t reflect.Type, request bool) string {
	var parts []string
	for _, wf := range wireFields(t) {
		sf, name, ft := wf.Field, wf.Name, wf.Type
		mark := ""
		if !request && wf.OmitEmpty {
			mark = "?"
		}
		if request && sf.Tag.Get("req") == "true" {
			mark = "!"
		}
		typ := lt.label(ft, request)
		if u := sf.Tag.Get("unit"); u != "" {
			// A unit is a decimal-integer string (SPEC's str/<unit>), also
			// where the Go type is a string formatted by hand.
			if ft.Kind() == reflect.String {
				typ = "str"
			}
			typ += "/" + u
		}
		if e := sf.Tag.Get("enum"); e != "" {
			typ += "(" + strings.ReplaceAll(e, ",", "|") + ")"
		}
		if sf.Tag.Get("repeat") == "true" && ft.Kind() != reflect.Slice {
			// A repeatable query parameter: the description's array.
			typ = "[]" + typ
		}
		if request && sf.Tag.Get("nullable") == "true" || !request && wf.Pointer && !wf.OmitEmpty {
			typ += "|null"
		}
		parts = append(parts, name+mark+":"+typ)
	}
	if len(parts) == 0 {
		return "{}"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// label is a type in the index's words: str, string, bool, int (a JSON
// number), []T, {string:T}, any, or a named shape defined under Types.
func (lt *llmsTypes) label(t reflect.Type, request bool) string {
	if t == intType {
		return "str"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return lt.label(t.Elem(), request)
	case reflect.Slice, reflect.Array:
		return "[]" + lt.label(t.Elem(), request)
	case reflect.Map:
		return "{string:" + lt.label(t.Elem(), request) + "}"
	case reflect.Interface:
		return "any"
	case reflect.Struct:
		if t.Name() == "" {
			return lt.fieldList(t, request)
		}
		if _, seen := lt.used[t]; !seen {
			lt.pending = append(lt.pending, t)
			lt.used[t] = request
		}
		return lt.name(t)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.Kind().String()
}

func (lt *llmsTypes) name(t reflect.Type) string {
	if n, ok := lt.names[t]; ok {
		return n
	}
	return t.Name()
}

// writeTypes defines every named shape the index referred to (and those
// their fields refer to), by name.
func (lt *llmsTypes) writeTypes(b *strings.Builder) {
	defs := map[string]string{}
	for len(lt.pending) > 0 {
		t := lt.pending[0]
		lt.pending = lt.pending[1:]
		defs[lt.name(t)] = lt.fieldList(t, lt.used[t])
	}
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString("\n## Types\n\nThe named shapes above, in the same notation; each name is also a schema of /openapi.json (components/schemas).\n\n")
	for _, n := range names {
		fmt.Fprintf(b, "- %s: %s\n", n, defs[n])
	}
}
