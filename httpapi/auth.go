package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/wire"
)

// KeyHeader carries the API key (SPEC section 5). Never a URL parameter.
const KeyHeader = "x-api-key"

// keyHeaderKey is KeyHeader in canonical form: Header.Get would
// canonicalise the lower-case spelling into a new string on every request.
const keyHeaderKey = "X-Api-Key"

// caller is the authenticated identity of a keyed request.
type caller struct {
	AccountID string
	KeyID     string
	Scopes    access.Scope
}

// callerOf is the caller authGuard found (zero on a public route).
func callerOf(c *gin.Context) caller { return stateOf(c).caller }

// HashKey is the stored form of a key value: hex SHA-256.
func HashKey(key string) string {
	h := keyHashHex(key)
	return string(h[:])
}

// keyHashHex is HashKey's text in an array, for a lookup that needs no
// string (authGuard hashes the key of every keyed request).
func keyHashHex(key string) [2 * sha256.Size]byte {
	// Hashed from a copy on the stack: []byte(key) of a key (52 bytes)
	// took the heap.
	var buf [128]byte
	sum := sha256.Sum256(append(buf[:0], key...))
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return h
}

// scopeBits maps a route's scope name to its bit.
func scopeBits(name string) access.Scope { return access.ParseScope(name) }

// refuseKeyInURL refuses, on every route, a request that puts an API key in
// the query string: honouring it would teach clients to leak keys into logs.
func refuseKeyInURL(s *Server, r *Route) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.URL.RawQuery == "" {
			return // nothing to parse (URL.Query would still make a map)
		}
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

// keyPrefix starts every API key (newAPIKey): "pdk_" and 48 hex digits.
const (
	keyPrefix    = "pdk_"
	keyHexDigits = 48
)

// keyShapeAt reports whether s holds a key's shape at i: the prefix in
// any case, then 48 hex digits.
func keyShapeAt(s string, i int) bool {
	if len(s)-i < len(keyPrefix)+keyHexDigits || !strings.EqualFold(s[i:i+len(keyPrefix)], keyPrefix) {
		return false
	}
	for _, ch := range []byte(s[i+len(keyPrefix) : i+len(keyPrefix)+keyHexDigits]) {
		if !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f' || 'A' <= ch && ch <= 'F') {
			return false
		}
	}
	return true
}

// hasKeyShape reports whether s holds anything shaped like an API key.
func hasKeyShape(s string) bool {
	for i := 0; i+len(keyPrefix)+keyHexDigits <= len(s); i++ {
		if s[i]|0x20 == 'p' && keyShapeAt(s, i) {
			return true
		}
	}
	return false
}

// redactKeys replaces the hex of anything shaped like an API key in s, for
// the request log.
func redactKeys(s string) string {
	if !hasKeyShape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if keyShapeAt(s, i) {
			b.WriteString(keyPrefix + "[redacted]")
			i += len(keyPrefix) + keyHexDigits
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// refuseKeyInPath refuses, before routing (so unmatched paths too), a
// request whose path or query holds something shaped like an API key: it
// has leaked into URLs, and so into proxies' and browsers' histories, and
// no answer may echo it back. The request log shows the path redacted.
func (s *Server) refuseKeyInPath(c *gin.Context) {
	if hasKeyShape(c.Request.URL.Path) || hasKeyShape(c.Request.URL.RawQuery) || hasKeyShape(unescapedQuery(c.Request.URL.RawQuery)) {
		fail(c, http.StatusUnauthorized, wire.CodeUnauthorized,
			"API keys are accepted only in the x-api-key header, never in a URL; rotate this key")
	}
}

// unescapedQuery is the query with its percent escapes resolved, so that a
// key with an escaped character is still seen; a malformed escape (which
// would make url.QueryUnescape give up on the whole query) stays as it is.
func unescapedQuery(raw string) string {
	if strings.IndexByte(raw, '%') < 0 {
		return raw
	}
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && i+2 < len(raw) && ishex(raw[i+1]) && ishex(raw[i+2]) {
			b = append(b, unhex(raw[i+1])<<4|unhex(raw[i+2]))
			i += 2
			continue
		}
		b = append(b, raw[i])
	}
	return string(b)
}

func ishex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
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
		if len(c.Request.Header[keyHeaderKey]) > 1 {
			// One reader takes the first, another the last: the account
			// charged would not be the one a proxy or an audit log saw.
			fail(c, http.StatusUnauthorized, wire.CodeUnauthorized, "header x-api-key is given more than once")
			return
		}
		key := c.GetHeader(keyHeaderKey)
		if key == "" {
			fail(c, http.StatusUnauthorized, wire.CodeUnauthorized, "missing x-api-key header")
			return
		}
		h := keyHashHex(key)
		cl, ok := s.lookupKey(&h)
		// arrived is the commit index this node knew when the request came:
		// "behind" means not yet applied that far. Entries committed since
		// (a busy leader always has some in flight) cannot hold a key the
		// client already had, so they do not turn a 401 into a 503.
		var arrived uint64
		if !ok {
			arrived = s.Node.Raft.CommitIndex()
			behind := s.behindOf(arrived)
			want, asked := s.minIndexAhead(c)
			linear := len(c.Request.Header[hdrConsistency]) == 1 && c.GetHeader(hdrConsistency) == "linearizable"
			if behind || asked || linear {
				// Waiting for the log comes before any key's budget can
				// apply, so the wait is drawn from the client address's
				// public read budget: made-up keys cannot hold a lagging
				// node's goroutines (or make it ask the leader for a read
				// index) beyond what one address may read.
				if !s.rateAnswer(c, "read", s.meter.take(s.budgets["read"], addressSubject(c), "", time.Now())) {
					return
				}
			}
			if behind && s.catchUp(c, arrived) {
				cl, ok = s.lookupKey(&h)
			}
			if !ok && asked {
				// X-Min-Index names an entry this node has not applied
				// (nor, it may be, heard is committed): the key may be
				// minted there, so it is judged after that entry.
				if err := s.Node.WaitApplied(c.Request.Context(), want); err != nil {
					unavailable(c, "this node has not applied index "+strconv.FormatUint(want, 10)+" yet; retry or ask another node")
					return
				}
				cl, ok = s.lookupKey(&h)
			}
			if !ok && linear {
				// A linearizable read sees every write committed before
				// it arrived, the key's mint included, which this node
				// may not yet have heard is committed: the key is judged
				// after the leader's commit index is applied here.
				if err := s.Node.LinearizableRead(c.Request.Context()); err != nil {
					s.log.Debug("linearizable read refused", "err", err)
					unavailable(c, "cannot confirm a linearizable read right now; retry or ask another node")
					return
				}
				stateOf(c).linearized = true
				cl, ok = s.lookupKey(&h)
			}
		}
		if !ok {
			if s.behindOf(arrived) {
				unavailable(c, "this node is catching up with the log and does not know this key yet; retry, or send X-Min-Index")
				return
			}
			if s.Node.StoreWriteFailing() {
				// It cannot append what the leader commits, so a key
				// minted since is unknown here, not invalid.
				unavailable(c, "this node cannot write its log and may not know this key yet; ask another node")
				return
			}
			fail(c, http.StatusUnauthorized, wire.CodeUnauthorized, "API key is not valid (unknown or revoked)")
			return
		}
		if !cl.Scopes.Has(need) {
			fail(c, http.StatusForbidden, wire.CodeInsufficientScope, "this key lacks the "+r.Scope+" scope")
			return
		}
		stateOf(c).caller = cl
		s.touch.seen(cl.KeyID)
	}
}

// minIndexAhead is the request's X-Min-Index when it lies past what this
// node has applied and within the reach of a wait (indexGuard refuses a
// malformed, doubled or far-off one, once the caller is known).
func (s *Server) minIndexAhead(c *gin.Context) (uint64, bool) {
	v := c.GetHeader(hdrMinIndex)
	if v == "" || len(c.Request.Header[hdrMinIndex]) > 1 {
		return 0, false
	}
	want, err := strconv.ParseUint(v, 10, 64)
	if err != nil || want <= s.Node.Machine().Applied() || s.Node.IndexOutOfReach(want) {
		return 0, false
	}
	return want, true
}

// keyLive reports whether the key with this id is live in the applied
// state.
func (s *Server) keyLive(id string) bool {
	var live bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		k := st.Access.Keys[id]
		live = k != nil && k.Live()
	})
	return live
}

// lookupKey finds the live key whose hash hex is h.
func (s *Server) lookupKey(h *[2 * sha256.Size]byte) (caller, bool) {
	var cl caller
	var ok bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		// access.State.KeyByHashHex, with the hash as the map key
		// without a string of its own.
		var k *access.Key
		if id, found := st.Access.KeyByHash[string(h[:])]; found {
			k = st.Access.Keys[id]
		}
		// The map lookup is by hash; the constant-time compare guards the
		// last step anyway, so timing reveals nothing of the key.
		if k != nil && k.Live() && subtle.ConstantTimeCompare([]byte(k.HashHex), h[:]) == 1 {
			cl, ok = caller{AccountID: k.AccountID, KeyID: k.ID, Scopes: k.Scopes}, true
		}
	})
	return cl, ok
}

// keyCatchUpWait bounds how long an unknown key waits for a lagging node to
// apply what it already knows is committed.
const keyCatchUpWait = time.Second

// catchUp waits, on a node that is behind, until it has applied the commit
// index it knows of (bounded). A key minted moments ago on another node is
// then found instead of being refused as unknown.
func (s *Server) catchUp(c *gin.Context, commit uint64) bool {
	ctx, cancel := context.WithTimeout(c.Request.Context(), keyCatchUpWait)
	defer cancel()
	return s.Node.WaitApplied(ctx, commit) == nil
}

// behindOf reports whether the node has not yet applied up to commit, a
// commit index it knew of (just restarted, or rejoined after a wipe), or
// has no state at all yet: a member that joined with a wiped data
// directory knows no key, and until its first entries arrive its commit
// index says nothing.
func (s *Server) behindOf(commit uint64) bool {
	if s.Node.Machine().Applied() < commit {
		return true
	}
	var genesis bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { genesis = st.Genesis != nil })
	return !genesis
}
