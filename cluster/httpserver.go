package cluster

import (
	"crypto/tls"
	"net/http"
	"time"
)

// Timeouts of every HTTP server a node runs (public and admin), so a slow
// or silent client cannot hold a connection. A WebSocket is unaffected: the
// upgrade hijacks the connection and clears the server's deadlines, and the
// hub keeps its own ping and write deadlines. Admin routes that stream
// large bodies (snapshot, restore) lift the read or write deadline for
// their own request.
type Timeouts struct {
	ReadHeader time.Duration
	Read       time.Duration
	Write      time.Duration
	Idle       time.Duration
}

// DefaultTimeouts: headers within 5 s; a whole request (bodies are small)
// within 30 s; an answer written within 60 s, above the longest wait a
// handler makes (a linearizable read, a propose); idle keep-alives 2 min.
var DefaultTimeouts = Timeouts{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 2 * time.Minute}

// MaxHeaderBytes bounds a request's line and headers (net/http answers
// 431 past it). The largest request SPEC defines carries a few short
// headers; net/http's default of 1 MB let each connection hold about 1.3 MB
// of header bytes for the whole ReadHeader timeout, so one address's
// connections trickling headers kept hundreds of megabytes (a review of
// 2026-11-27: 300 connections, +410 MB of RSS), and a 1 MB request line
// cost 19 ms of CPU on an unmetered 404.
const MaxHeaderBytes = 64 << 10

// NewHTTPServer is how every node server is built: h with the timeouts and,
// when tc is set, TLS (the caller wraps its listener with tls.NewListener).
func NewHTTPServer(h http.Handler, t Timeouts, tc *tls.Config) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		TLSConfig:         tc,
	}
}

// liftDeadlines removes the server's read and write deadlines for one long
// streaming request (a snapshot download, a restore upload).
func liftDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}
