package httpapi

import "reflect"

// wsDescriber is a WebSocket handler that describes its protocol as an
// AsyncAPI document (wsapi.Hub does). The handler names its frame and event
// types; this package turns them into schemas with the walker of
// /openapi.json, so both documents share one set of wire conventions.
// httpapi does not import wsapi: wsapi's tests import httpapi.
type wsDescriber interface {
	AsyncAPI(ref func(t reflect.Type) map[string]any, object func(t reflect.Type, request bool) map[string]any) map[string]any
}

// AsyncAPI builds the AsyncAPI 3.0 description of the mounted WebSocket;
// ok is false when none is mounted or it does not describe itself.
func (s *Server) AsyncAPI() (doc map[string]any, ok bool) {
	d, ok := s.ws.(wsDescriber)
	if !ok {
		return nil, false
	}
	g := newSchemaGen()
	doc = d.AsyncAPI(func(t reflect.Type) map[string]any { return g.schema(t, false) }, g.object)
	if info, _ := doc["info"].(map[string]any); info != nil {
		info["version"] = ContractVersion
	}
	if comps, _ := doc["components"].(map[string]any); comps != nil {
		comps["schemas"] = g.defs
	}
	return doc, true
}
