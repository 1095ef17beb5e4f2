// Package httpapi is the public REST surface: gin routes that decode and
// validate a request, authenticate it, meter it, and turn it into a command
// (through node.Propose) or a read of the node's applied state. It owns the
// error model of SPEC section 7 and the OpenAPI description, which is built
// from the same route table the server registers.
//
// It must never change state except by proposing a command, never log or
// echo an API key, and never answer with a Go panic or an HTML page.
package httpapi
