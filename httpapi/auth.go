package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/wire"
)

// KeyHeader carries the API key (SPEC section 5). Never a URL parameter.
const KeyHeader = "x-api-key"

// caller is the authenticated identity of a keyed request.
type caller struct {
	AccountID string
	KeyID     string
	Scopes    access.Scope
}

const callerKey = "perpd.caller"

func callerOf(c *gin.Context) caller {
	v, _ := c.Get(callerKey)
	cl, _ := v.(caller)
	return cl
}

// HashKey is the stored form of a key value: hex SHA-256.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// scopeBits maps a route's scope name to its bit.
func scopeBits(name string) access.Scope { return access.ParseScope(name) }

// refuseKeyInURL refuses, on every route, a request that puts an API key in
// the query string: honouring it would teach clients to leak keys into logs.
func refuseKeyInURL(s *Server, r *Route) gin.HandlerFunc {
	return func(c *gin.Context) {
		for name := range c.Request.URL.Query() {
			n := strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(name))
			if n == "apikey" || n == "xapikey" || n == "key" || n == "token" {
				fail(c, http.StatusUnauthorized, wire.CodeUnauthorized,
					"API keys are accepted only in the x-api-key header, never in a URL; rotate this key")
				return
			}
		}
	}
}

// authGuard authenticates keyed routes against the node's applied state and
// checks the route's scope. The state machine re-checks both when a write
// applies, so a key revoked earlier in the log never acts.
func authGuard(s *Server, r *Route) gin.HandlerFunc {
	if r.Auth != Keyed {
		return nil
	}
	need := scopeBits(r.Scope)
	return func(c *gin.Context) {
		key := c.GetHeader(KeyHeader)
		if key == "" {
			fail(c, http.StatusUnauthorized, wire.CodeUnauthorized, "missing x-api-key header")
			return
		}
		h := HashKey(key)
		cl, ok := s.lookupKey(h)
		if !ok && s.catchUp(c) {
			cl, ok = s.lookupKey(h)
		}
		if !ok {
			if s.behind() {
				unavailable(c, "this node is catching up with the log and does not know this key yet; retry, or send X-Min-Index")
				return
			}
			fail(c, http.StatusUnauthorized, wire.CodeUnauthorized, "API key is not valid (unknown or revoked)")
			return
		}
		if !cl.Scopes.Has(need) {
			fail(c, http.StatusForbidden, wire.CodeInsufficientScope, "this key lacks the "+r.Scope+" scope")
			return
		}
		c.Set(callerKey, cl)
		s.touch.seen(cl.KeyID)
	}
}

func (s *Server) lookupKey(h string) (caller, bool) {
	var cl caller
	var ok bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		k := st.Access.KeyByHashHex(h)
		// The map lookup is by hash; the constant-time compare guards the
		// last step anyway, so timing reveals nothing of the key.
		if k != nil && k.Live() && subtle.ConstantTimeCompare([]byte(k.HashHex), []byte(h)) == 1 {
			cl, ok = caller{AccountID: k.AccountID, KeyID: k.ID, Scopes: k.Scopes}, true
		}
	})
	return cl, ok
}

// keyCatchUpWait bounds how long an unknown key waits for a lagging node to
// apply what it already knows is committed.
const keyCatchUpWait = time.Second

// catchUp waits, when this node has applied less than the commit index it
// knows of, until it has applied it (bounded). A key minted moments ago on
// another node is then found instead of being refused as unknown.
func (s *Server) catchUp(c *gin.Context) bool {
	if !s.behind() {
		return false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), keyCatchUpWait)
	defer cancel()
	return s.Node.WaitApplied(ctx, s.Node.Raft.CommitIndex()) == nil
}

// behind reports whether the node knows of committed entries it has not
// applied yet (just restarted, or rejoined after a wipe), or has no state
// at all yet: a member that joined with a wiped data directory knows no
// key, and until its first entries arrive its commit index says nothing.
func (s *Server) behind() bool {
	if s.Node.Machine().Applied() < s.Node.Raft.CommitIndex() {
		return true
	}
	var genesis bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { genesis = st.Genesis != nil })
	return !genesis
}
