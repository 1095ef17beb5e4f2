package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// RequestIDHeader carries a request's id on HTTP responses and on the
// forward of a write from a follower to the leader, so both nodes log the
// write under the same id.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDLen bounds an id taken from outside (a trusted proxy, a peer).
const MaxRequestIDLen = 64

type requestIDKey struct{}

// WithRequestID returns ctx carrying a request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the id ctx carries, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewRequestID draws a fresh id: 16 random bytes, hex.
func NewRequestID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ValidRequestID reports whether an id from outside may be used as is:
// 1 to MaxRequestIDLen characters of [A-Za-z0-9._:-]. Anything else (log
// injection with newlines or quotes, unbounded length) is replaced.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
