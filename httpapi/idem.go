package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/wire"
)

// IdemHeader is the idempotency header of `idem` routes.
const IdemHeader = "idempotency-key"

// idemHeaderKey is IdemHeader in canonical form (keyHeaderKey says why).
const idemHeaderKey = "Idempotency-Key"

// MaxIdemKeyLen bounds an idempotency key.
const MaxIdemKeyLen = 255

// usdxRedeemIdemNS is the namespace of a keyed redemption's stored answers
// within its account's keys: "acct:<account>:usdx-redeem:<key>"
// (usdxRedeem). It stays as it was, so that a retry across an upgrade still
// finds its answer; a client key that begins with it, sent where keys live
// in the general namespace, would be that same stored key.
const usdxRedeemIdemNS = "usdx-redeem:"

// reservedIdemPrefixes are the client-key prefixes that name a namespace
// of their own within an account's keys (Route.IdemOwnNamespace). Only the
// redemptions' is one: a cancel's "cancel:" and the rails' and operator's
// "rail:" and "admin:" prefix the whole stored key, which on every other
// route begins "acct:", "route:" or "auto:", so no client key reaches them.
var reservedIdemPrefixes = []string{usdxRedeemIdemNS}

// reservedIdemPrefix is the reserved prefix k begins with, if any.
func reservedIdemPrefix(k string) (string, bool) {
	for _, p := range reservedIdemPrefixes {
		if strings.HasPrefix(k, p) {
			return p, true
		}
	}
	return "", false
}

// idemGuard requires a well-formed idempotency-key on idem routes, and
// checks one sent to a route where it is optional.
func idemGuard(s *Server, r *Route) gin.HandlerFunc {
	if !r.Idem && !r.IdemOptional {
		return nil
	}
	return func(c *gin.Context) {
		if len(c.Request.Header[idemHeaderKey]) > 1 {
			// One reader takes the first, another the last: the key
			// applied (an order's id) would not be the key a proxy or
			// an audit log saw, as with a body field given twice.
			fail(c, http.StatusBadRequest, wire.CodeValidation, "header idempotency-key is given more than once")
			return
		}
		k := c.GetHeader(idemHeaderKey)
		if k == "" && r.IdemOptional {
			return
		}
		if k == "" {
			fail(c, http.StatusBadRequest, wire.CodeValidation, "header idempotency-key is required on this route")
			return
		}
		if len(k) > MaxIdemKeyLen {
			fail(c, http.StatusBadRequest, wire.CodeValidation, "header idempotency-key is longer than 255 characters")
			return
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x21 || k[i] > 0x7e {
				fail(c, http.StatusBadRequest, wire.CodeValidation, "header idempotency-key must be printable ASCII without spaces")
				return
			}
		}
		if hasKeyShape(k) {
			// The idempotency key enters the log as it is (an order's id,
			// a withdrawal's idempotencyKey): an API key must not.
			fail(c, http.StatusBadRequest, wire.CodeValidation,
				"header idempotency-key holds an API key: send the key only in x-api-key, and a fresh random idempotency-key")
			return
		}
		if p, reserved := reservedIdemPrefix(k); reserved && r.Auth == Keyed && !r.IdemOwnNamespace {
			// It would be stored under another route's key (a refusal
			// rather than a new namespace for these keys: the stored key
			// of every request already answered stays as it is).
			fail(c, http.StatusBadRequest, wire.CodeValidation,
				"header idempotency-key must not begin with "+p+" on this route: that prefix is reserved for POST /v1/usdx/redemptions")
			return
		}
		st := stateOf(c)
		st.idemKey, st.hasIdem = k, true
	}
}
