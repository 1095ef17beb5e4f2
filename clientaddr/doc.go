// Package clientaddr names the client a per-address limit counts: the REST
// meter's public budgets (httpapi) and the WebSocket connection cap (wsapi)
// use the same unit, so a client cannot pass one by changing the address
// the other already counts as its own. For IPv6, Site names the /48 whose
// /64s also share an aggregate public budget.
//
// It is a pure function of an address string: no state, no I/O, no
// knowledge of proxies (the caller decides which address is the client's).
package clientaddr
