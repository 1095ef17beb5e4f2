package httpapi

import (
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perpd/perpd/fsm/wire"
)

// ContractVersion is info.version of /openapi.json: the API contract, not
// the build (SPEC section 9).
const ContractVersion = "1.4.0"

func init() { routeSets = append(routeSets, (*Server).docRoutes) }

func (s *Server) docRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: "/openapi.json", Budget: "read", Summary: "This OpenAPI 3.1 description", Content: "application/json",
			Responses: map[int]any{200: map[string]any{}, 304: nil}, Handler: s.serveDoc(docOpenAPI)},
		{Method: http.MethodGet, Path: "/asyncapi.json", Budget: "read", Summary: "AsyncAPI 3.0 description of the WebSocket /v1/ws", Content: "application/json",
			Responses: map[int]any{200: map[string]any{}, 304: nil}, Handler: s.serveDoc(docAsyncAPI)},
		{Method: http.MethodGet, Path: "/llms.txt", Budget: "read", Summary: "Agent index of the API", Content: "text/plain",
			Responses: map[int]any{200: "", 304: nil}, Handler: s.serveDoc(docLLMS)},
		{Method: http.MethodGet, Path: "/llms-full.txt", Budget: "read", Summary: "Agent index with every field", Content: "text/plain",
			Responses: map[int]any{200: "", 304: nil}, Handler: s.serveDoc(docLLMSFull)},
	}
}

// OpenAPI builds the description from the route table.
func (s *Server) OpenAPI() map[string]any {
	g := newSchemaGen()
	paths := map[string]any{}
	for _, r := range s.Routes {
		p := openapiPath(r.Path)
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(r.Method)] = g.operation(r)
	}
	if eb, ok := g.defs["ErrorBody"].(map[string]any); ok {
		codes := make([]any, len(wire.AllCodes))
		for i, c := range wire.AllCodes {
			codes[i] = c
		}
		eb["properties"].(map[string]any)["code"].(map[string]any)["enum"] = codes
	}
	servers := []any{map[string]any{"url": "/", "description": s.Node.Config().Deployment + " deployment (this node)"}}
	return map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": map[string]any{
			"title":   "perpd: sats-denominated perpetual futures",
			"license": map[string]any{"name": "All rights reserved"},
			"version": ContractVersion,
			"description": "Every money, price, rate, timestamp, duration, contract count and sequence value is a JSON string of a decimal integer (x-svc-unit names its unit). Errors are {error, code}. " +
				headDoc,
		},
		"servers": servers,
		"paths":   paths,
		"components": map[string]any{
			"schemas": g.defs,
			"securitySchemes": map[string]any{
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": KeyHeader},
			},
		},
	}
}

// headDoc says which paths answer HEAD (answersHead), once for all of them.
const headDoc = "Every GET operation but the WebSocket upgrade (/v1/ws) also answers HEAD: the status and headers the GET would " +
	"get, without the body, after the same authentication and drawing the same rate budget."

// openapiPath turns gin's /v1/markets/:id into /v1/markets/{id}.
func openapiPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

func pathParams(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			out = append(out, s[1:])
		}
	}
	return out
}

type schemaGen struct {
	defs  map[string]any
	names map[reflect.Type]string
}

func newSchemaGen() *schemaGen {
	return &schemaGen{defs: map[string]any{}, names: map[reflect.Type]string{}}
}

func (g *schemaGen) operation(r *Route) map[string]any {
	op := map[string]any{
		"summary":     r.Summary,
		"operationId": operationID(r),
	}
	var params []any
	for _, name := range pathParams(r.Path) {
		params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	if r.Idem || r.IdemOptional {
		params = append(params, map[string]any{"name": IdemHeader, "in": "header", "required": r.Idem,
			"description": idemDoc(r),
			"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": MaxIdemKeyLen}})
	}
	if r.Query != nil {
		params = append(params, g.queryParams(reflect.TypeOf(r.Query))...)
	}
	if params != nil {
		op["parameters"] = params
	}
	op["security"] = []any{} // public: no key
	if r.Auth == Keyed {
		op["security"] = []any{map[string]any{"apiKey": []any{}}}
		if r.Scope != "" {
			op["x-scope"] = r.Scope
		}
	}
	if r.Budget != "" {
		op["x-budget"] = r.Budget
	}
	if r.Request != nil {
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(r.Request), true)}}}
	}
	responses := map[string]any{}
	codes := refusalCodes(r)
	for st, body := range r.Responses {
		responses[strconv.Itoa(st)] = g.response(st, body, r.Content, codes[st])
	}
	for _, st := range commonErrors(r) {
		if _, ok := responses[strconv.Itoa(st)]; !ok {
			responses[strconv.Itoa(st)] = g.response(st, wire.ErrorBody{}, "", codes[st])
		}
	}
	for st := range r.Refuses {
		if _, ok := responses[strconv.Itoa(st)]; !ok {
			responses[strconv.Itoa(st)] = g.response(st, wire.ErrorBody{}, "", codes[st])
		}
	}
	for st, note := range r.Notes {
		if resp, ok := responses[strconv.Itoa(st)].(map[string]any); ok {
			resp["description"] = resp["description"].(string) + ". " + note
		}
	}
	op["responses"] = responses
	return op
}

// What a retry under the same idempotency-key does (docs/decisions.md,
// "Refusals are not stored in the idempotency store" and "Idempotency
// keys are scoped per account"). idemReplay is what a retry of a success
// gets on most routes; Route.IdemRetry replaces it where that differs.
const (
	idemReplay = "A retry with the same key and the same body within 24 hours gets the first success's status and body " +
		"again (header Idempotent-Replayed: true) and applies nothing twice."
	idemReused = "The same key on a different request (another body, path or route) is 409 idempotency_key_reused, but " +
		"cancels and USDx redemptions keep keys of their own (an order's id may be its cancel's key); a success whose " +
		"stored answer the bounded store dropped early answers 409 conflict and is not applied again. Money moves are also " +
		"bound to their key by the account's own records, whatever the store forgets: withdrawals, USDx withdrawals and " +
		"redemptions for at least two days, keyed stakes and unstakes while the account's last 1000 USDx activity records " +
		"name them, orders and mints while the order or quote is kept."
	idemRefused = "A refused request does not bind its key: a retry with the same key is judged afresh against the state " +
		"of its time and may succeed (after a top-up, say), so use a new key for a request you no longer want. " +
		"The key is stored as sent, so one shaped like an API key is refused (400 validation)."
)

// idemDoc describes a route's idempotency-key header.
func idemDoc(r *Route) string {
	replay := idemReplay
	if r.IdemRetry != "" {
		replay = r.IdemRetry
	}
	switch {
	case r.Auth != Keyed: // signup: its retry says it all
		return "Idempotency key, one namespace for every caller of this route. " + replay + " " + idemRefused
	case r.IdemOptional:
		return "Optional idempotency key, scoped to the calling account; without it every call is a new request. " +
			replay + " " + idemReused + " " + idemRefused + reservedDoc(r)
	}
	reused := idemReused
	if r.Refuses400 {
		// This route answers every refusal 400 (SPEC section 7).
		reused = strings.ReplaceAll(reused, "409 ", "400 ")
	}
	return "Idempotency key, scoped to the calling account. " + replay + " " + reused + " " + idemRefused + reservedDoc(r)
}

// reservedDoc says which key prefixes a route refuses (idemGuard).
func reservedDoc(r *Route) string {
	if r.Auth != Keyed || r.IdemOwnNamespace {
		return ""
	}
	return " A key that begins with " + strings.Join(reservedIdemPrefixes, " or ") +
		" is refused (400 validation): the prefix is reserved for the keys of USDx redemptions."
}

// refusalCodes are the error codes a route's refusals may carry, by
// status: those of every route of its kind (the guards in front of its
// handler, the engine, the state machine's answer to any command) and the
// route's own (Route.Refuses), sorted.
func refusalCodes(r *Route) map[int][]string {
	set := map[int]map[string]bool{}
	add := func(st int, codes ...string) {
		if set[st] == nil {
			set[st] = map[string]bool{}
		}
		for _, c := range codes {
			set[st][c] = true
		}
	}
	// Any route: a malformed X-Min-Index or body, a key in the URL, an
	// unknown resource, a method the path does not take, a body past
	// MaxBodyBytes, an empty budget, a bug, a wait for the log that timed
	// out or a halted replica.
	add(400, wire.CodeValidation)
	add(401, wire.CodeUnauthorized)
	add(404, wire.CodeNotFound)
	add(405, wire.CodeValidation)
	add(413, wire.CodeBodyTooLarge)
	add(429, wire.CodeRateLimited)
	add(500, wire.CodeUnavailable)
	add(503, wire.CodeUnavailable)
	if r.Auth == Keyed {
		add(403, wire.CodeInsufficientScope)
	}
	if r.Idem || r.IdemOptional {
		// A key reused with another body; a retry whose stored answer the
		// bounded idempotency store dropped early.
		add(409, wire.CodeIdempotencyReused, wire.CodeConflict)
	}
	if isDomainRoute(r.Path) {
		add(503, wire.CodeFeatureUnavailable)
	}
	for st, codes := range r.Refuses {
		add(st, codes...)
	}
	if r.Refuses400 {
		for _, st := range refusedAs400 {
			for c := range set[st] {
				add(400, c)
			}
			delete(set, st)
		}
	}
	out := map[int][]string{}
	for st, m := range set {
		for c := range m {
			out[st] = append(out[st], c)
		}
		sort.Strings(out[st])
	}
	return out
}

// commonErrors are the refusals any route of its kind may give.
func commonErrors(r *Route) []int {
	// 400: a malformed X-Min-Index or body on any route; 500: a bug,
	// still answered as JSON.
	// 401 on every route: a key sent in the URL is refused everywhere.
	// 429 on every route: one without a budget draws a read token before
	// an X-Min-Index or X-Consistency wait.
	out := []int{400, 401, 404, 405, 413, 429, 500, 503}
	if r.Auth == Keyed {
		out = append(out, 403)
	}
	if r.Idem || r.IdemOptional {
		out = append(out, 409)
	}
	if r.Refuses400 {
		out = slices.DeleteFunc(out, func(st int) bool { return slices.Contains(refusedAs400, st) })
	}
	return out
}

// refusedAs400 are the statuses a Refuses400 route answers 400
// (status400Writer).
var refusedAs400 = []int{http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge}

// oneOf is a response body that is one of several shapes, as the query
// decides (GET /v1/orders: the orders page, or the triggers page).
type oneOf []any

func (g *schemaGen) response(status int, body any, content string, codes []string) map[string]any {
	desc := http.StatusText(status)
	if status >= 400 {
		// Refusals are JSON whatever the success's content type.
		content = ""
		if body != nil && reflect.TypeOf(body).Kind() == reflect.Struct && hasCodeField(reflect.TypeOf(body)) && len(codes) > 0 {
			desc += "; code: " + strings.Join(codes, ", ")
		} else {
			codes = nil
		}
	}
	if content == "" {
		content = "application/json"
	}
	if content == "none" || body == nil {
		return map[string]any{"description": desc}
	}
	var schema any
	switch content {
	case "application/json":
		if alts, ok := body.(oneOf); ok {
			var refs []any
			for _, a := range alts {
				refs = append(refs, g.schema(reflect.TypeOf(a), false))
			}
			schema = map[string]any{"oneOf": refs}
		} else if m, ok := body.(map[string]any); ok && len(m) == 0 {
			schema = map[string]any{"type": "object"}
		} else {
			schema = g.schema(reflect.TypeOf(body), false)
			if len(codes) > 0 && hasCodeField(reflect.TypeOf(body)) {
				// The shared refusal body, with the codes this status
				// of this route may carry.
				enum := make([]any, len(codes))
				for i, c := range codes {
					enum[i] = c
				}
				schema = map[string]any{"allOf": []any{schema},
					"properties": map[string]any{"code": map[string]any{"enum": enum}}}
			}
		}
	case "text/plain", "text/html":
		schema = map[string]any{"type": "string"}
	default:
		schema = map[string]any{"type": "string", "format": "binary"}
	}
	out := map[string]any{"description": desc, "content": map[string]any{content: map[string]any{"schema": schema}}}
	switch status {
	case 429:
		out["headers"] = rateHeaders429
	case 503:
		out["headers"] = headers503
	}
	return out
}

// headers503 are the headers a 503 may carry: X-Not-Applied on the
// refusals given before anything was proposed (halt.go), so a client can
// tell a write that certainly was not applied from one that may have been.
var headers503 = map[string]any{
	HeaderNotApplied: map[string]any{"schema": map[string]any{"type": "string", "enum": []any{"1"}},
		"description": "present (1) when the request was refused before anything was proposed (a halted replica, or a node that has not applied the cluster's genesis): the write was not applied and can go to another node; a 503 without it may hide a committed write, so retry with the same idempotency-key"},
	"Retry-After": map[string]any{"schema": map[string]any{"type": "integer"},
		"description": "seconds to wait, when the node expects to serve soon"},
}

// rateHeaders429 are the headers of a 429 (SPEC section 8). Most 429s
// come from a token bucket; the hourly caps apply enforces (faucet,
// signup) describe the cap instead, as those routes' 429 says.
var rateHeaders429 = map[string]any{
	"Retry-After": map[string]any{"schema": map[string]any{"type": "integer"},
		"description": "seconds to wait before the request can be admitted"},
	"X-RateLimit-Limit": map[string]any{"schema": map[string]any{"type": "integer"},
		"description": "the binding budget's limit: a token bucket's per-minute limit, or an hourly cap's count per rolling hour"},
	"X-RateLimit-Remaining": map[string]any{"schema": map[string]any{"type": "integer"},
		"description": "what the binding budget has left: 0 on a refusal"},
	"X-RateLimit-Reset": map[string]any{"schema": map[string]any{"type": "integer"},
		"description": "epoch seconds when the binding budget next admits a request: the instant Retry-After counts to"},
}

// hasCodeField reports whether a body type carries the ErrorCode field.
func hasCodeField(t reflect.Type) bool {
	for _, wf := range wireFields(t) {
		if wf.Name == "code" {
			return true
		}
	}
	return false
}

func operationID(r *Route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	for _, p := range strings.FieldsFunc(r.Path, func(c rune) bool { return c == '/' || c == '-' || c == '.' || c == ':' }) {
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

func (g *schemaGen) queryParams(t reflect.Type) []any {
	var out []any
	for _, wf := range wireFields(t) {
		sf, name, ft := wf.Field, wf.Name, wf.Type
		schema := g.fieldSchema(sf, ft, true)
		p := map[string]any{"name": name, "in": "query", "required": sf.Tag.Get("req") == "true", "schema": schema}
		if ft.Kind() == reflect.Slice {
			p["explode"] = true
		}
		if sf.Tag.Get("repeat") == "true" && ft.Kind() != reflect.Slice {
			// A repeatable parameter is sent once per value (status=a&status=b):
			// an array, exploded, so that generated clients can send several.
			if d, ok := schema["description"]; ok {
				p["description"] = d
				delete(schema, "description")
			}
			p["schema"] = map[string]any{"type": "array", "items": schema}
			p["style"], p["explode"] = "form", true
		}
		out = append(out, p)
	}
	return out
}

// schema returns a $ref for named structs (defined once) or an inline
// schema. In requests a pointer means optional; in responses, nullable.
func (g *schemaGen) schema(t reflect.Type, request bool) map[string]any {
	if t.Kind() == reflect.Struct && t != intType && t.Name() != "" {
		name := g.defName(t, request)
		if _, done := g.defs[name]; !done {
			g.defs[name] = map[string]any{} // placeholder against recursion
			g.defs[name] = g.object(t, request)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return g.typeSchema(t, request)
}

func (g *schemaGen) defName(t reflect.Type, request bool) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	name := t.Name()
	for _, other := range g.names {
		if other == name {
			name = strings.ReplaceAll(t.PkgPath(), "/", "_") + "_" + t.Name()
			name = name[strings.LastIndex(name, "_perpd_")+len("_perpd_"):]
		}
	}
	g.names[t] = name
	return name
}

func (g *schemaGen) object(t reflect.Type, request bool) map[string]any {
	props := map[string]any{}
	var required []string
	for _, wf := range wireFields(t) {
		sf, name, ft, omitempty := wf.Field, wf.Name, wf.Type, wf.OmitEmpty
		// In a response a pointer is null when unset, unless the field is
		// omitted instead (omitempty): then it is optional, never null. In a
		// request a pointer is optional; `nullable:"true"` says the field
		// also takes an explicit null (SPEC's "string or null").
		nullable := wf.Pointer && !request && !omitempty || request && sf.Tag.Get("nullable") == "true"
		s := g.fieldSchema(sf, ft, request)
		if nullable {
			s = nullableOf(s)
		}
		props[name] = s
		if request {
			if sf.Tag.Get("req") == "true" {
				required = append(required, name)
			}
		} else if !omitempty {
			required = append(required, name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out
}

func nullableOf(s map[string]any) map[string]any {
	if ref, ok := s["$ref"]; ok {
		return map[string]any{"oneOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
	}
	c := map[string]any{}
	for k, v := range s {
		c[k] = v
	}
	if t, ok := c["type"].(string); ok {
		c["type"] = []any{t, "null"}
	}
	if e, ok := c["enum"].([]any); ok {
		c["enum"] = append(append([]any{}, e...), nil)
	}
	return c
}

func (g *schemaGen) fieldSchema(sf reflect.StructField, t reflect.Type, request bool) map[string]any {
	s := g.schema(t, request)
	if _, isRef := s["$ref"]; isRef {
		return s
	}
	if u := sf.Tag.Get("unit"); u != "" {
		s["x-svc-unit"] = u
		// Every unit is a decimal integer (SPEC wire rule 1), also where the
		// Go type is a plain string formatted by hand.
		if t.Kind() == reflect.String {
			s["pattern"] = "^-?[0-9]+$"
		}
	}
	if e := sf.Tag.Get("enum"); e != "" {
		var vals []any
		for _, v := range strings.Split(e, ",") {
			vals = append(vals, v)
		}
		target := s
		if t.Kind() == reflect.Slice {
			target, _ = s["items"].(map[string]any)
		}
		if target != nil {
			target["enum"] = vals
		}
	}
	if m := sf.Tag.Get("maxLen"); m != "" {
		n, _ := strconv.Atoi(m)
		if t.Kind() == reflect.Slice {
			s["maxItems"] = n
		} else if t.Kind() == reflect.String {
			s["maxLength"] = n
		}
	}
	if d := sf.Tag.Get("doc"); d != "" {
		s["description"] = d
	}
	if m := sf.Tag.Get("maxLen"); m != "" && t.Kind() == reflect.String {
		// The decoder counts bytes; maxLength counts characters, so it is
		// only an upper bound for text that is not ASCII.
		d, _ := s["description"].(string)
		if !strings.Contains(d, "bytes") {
			if d != "" {
				d += "; "
			}
			s["description"] = d + "at most " + m + " bytes of UTF-8 (maxLength counts characters: a character beyond ASCII takes 2 to 4 bytes)"
		}
	}
	if t.Kind() != reflect.Struct || t == intType {
		for _, k := range []string{"min", "max"} {
			if v := sf.Tag.Get(k); v != "" && t != intType {
				n, _ := strconv.ParseInt(v, 10, 64)
				if k == "min" {
					s["minimum"] = n
				} else {
					s["maximum"] = n
				}
			}
		}
	}
	return s
}

func (g *schemaGen) typeSchema(t reflect.Type, request bool) map[string]any {
	if t == intType {
		return map[string]any{"type": "string", "pattern": "^-?[0-9]+$"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem(), request)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem(), request)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem(), request)}
	case reflect.Struct:
		return g.object(t, request)
	}
	return map[string]any{}
}
