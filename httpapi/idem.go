package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/wire"
)

// IdemHeader is the idempotency header of `idem` routes.
const IdemHeader = "idempotency-key"

// idemHeaderKey is IdemHeader in canonical form (keyHeaderKey says why).
const idemHeaderKey = "Idempotency-Key"

// MaxIdemKeyLen bounds an idempotency key.
const MaxIdemKeyLen = 255

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
		st := stateOf(c)
		st.idemKey, st.hasIdem = k, true
	}
}
