package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// command builds the envelope of a client write. The idempotency key is
// scoped by account (or by route for public writes such as signup), and the
// request hash covers the method, the path and the decoded body, so the
// same request sent with other whitespace or key order is still "the same".
// Writes without a client key get a random one, so node-level retries after
// a leader change still apply once.
func (s *Server) command(c *gin.Context, t fsm.CmdType, payload any, req any) (*fsm.Command, error) {
	cmd, err := fsm.NewCommand(t, payload)
	if err != nil {
		return nil, err
	}
	cl := callerOf(c)
	cmd.Account, cmd.KeyID = cl.AccountID, cl.KeyID
	// The hash covers the request's actual path, not the route template: a
	// key reused on DELETE /v1/orders/{another} is another request.
	route := c.FullPath()
	if cmd.ReqHash, err = requestHash(c.Request.Method, c.Request.URL.Path, req); err != nil {
		return nil, err
	}
	if k, ok := idemKeyOf(c); ok {
		scope := "acct:" + cl.AccountID
		if cl.AccountID == "" {
			scope = "route:" + route
		}
		cmd.IdemKey = scope + ":" + k
	} else {
		cmd.IdemKey = "auto:" + randomID(16)
	}
	return cmd, nil
}

// requestHash is fsm.RequestHash(method, path, the canonical JSON of req),
// the same bytes (TestRequestHashIsFSMs), hashed from one buffer on the
// stack: each part after its length as 8 bytes little-endian. An order,
// passed by pointer, writes its own canonical JSON (orders_canon.go);
// anything else is encoding/json's.
func requestHash(method, path string, req any) ([]byte, error) {
	var buf [512]byte
	b := appendHashPart(buf[:0], method)
	b = appendHashPart(b, path)
	at := len(b)
	b = append(b, make([]byte, 8)...) // the body's length, once known
	ok := false
	if o, is := req.(*OrderRequest); is {
		b, ok = o.appendCanonicalJSON(b)
	}
	if !ok {
		canon, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		b = append(b[:at+8], canon...)
	}
	binary.LittleEndian.PutUint64(b[at:], uint64(len(b)-at-8))
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// appendHashPart appends one part of a request hash: its length, then it.
func appendHashPart(b []byte, part string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(part))), part...)
}

// propose sends a write through the log. On a leader-budget route the
// write carries its draw, which the leader takes just before the log: the
// leader's verdict sets the rate headers, and an empty budget is answered
// 429 here with nothing written. It answers 503 itself when no leader took
// the write; otherwise the caller renders the result.
func (s *Server) propose(c *gin.Context, cmd *fsm.Command) (*fsm.Result, bool) {
	propose := s.Node.Propose
	if s.proposer != nil {
		propose = s.proposer
	}
	// The request id and the draw travel to the node in the write's
	// context only: no other call the handlers make reads them.
	ctx := c.Request.Context()
	if id := stateOf(c).id; id != "" {
		ctx = node.WithRequestID(ctx, id)
	}
	draw := drawOf(c)
	if draw != nil {
		ctx = node.WithDraw(ctx, draw)
		if b, ok := s.budgets[draw.Budget]; ok && leaderBudgets[draw.Budget] {
			if v, refused := s.leaderRefusals.refused(draw.Budget, draw.Subject, time.Now()); refused {
				s.rateAnswer(c, draw.Budget, leaderVerdict(v))
				return nil, false
			}
			if !s.waiting.enter(draw.Subject, b.KeyBurst) {
				s.tooManyWaiting(c, b)
				return nil, false
			}
			defer s.waiting.leave(draw.Subject)
		}
	}
	res, err := propose(ctx, cmd)
	if limited := rateLimited(err); limited != nil {
		if draw != nil && leaderBudgets[draw.Budget] {
			s.leaderRefusals.remember(draw.Budget, draw.Subject, limited.Verdict, time.Now())
		}
		s.rateAnswer(c, limited.Budget, leaderVerdict(limited.Verdict))
		return nil, false
	}
	if v, ok := draw.Verdict(); ok && v.Limit > 0 {
		s.rateAnswer(c, draw.Budget, bindingVerdict(stateOf(c), leaderVerdict(v)))
	}
	if err != nil {
		if errors.Is(err, node.ErrUnavailable) {
			unavailable(c, "no leader accepted the write in time; retry with the same idempotency-key")
		} else {
			// The cause may be the leader's own error text (its admin
			// address, a credential mismatch): the log keeps it, the
			// client gets what it can act on.
			if c.Request.Context().Err() == nil { // not a client that left
				s.log.Warn("write failed", "type", cmd.Type, "err", err)
			}
			unavailable(c, "the write was not applied; retry with the same idempotency-key")
		}
		return nil, false
	}
	// Answer only once this node has applied the write too, so the client's
	// next call to the same node sees it (a key just minted works at once).
	// Bounded: the write itself has succeeded whatever this wait does. A
	// node whose log store cannot write (a full disk) cannot apply it, and
	// answers at once rather than after the whole wait.
	if !s.Node.StoreWriteFailing() {
		_ = s.Node.WaitApplied(c.Request.Context(), res.Index)
	}
	st := stateOf(c)
	st.setHeader(c, slotRaftIndex, hdrRaftIndex, strconv.FormatUint(res.Index, 10))
	if res.Replay {
		st.setHeader(c, slotReplayed, "Idempotent-Replayed", "true")
	}
	return res, true
}

// rateLimited is err's refusal by the leader's meter, if it is one.
func rateLimited(err error) *node.RateLimitedError {
	if err == nil {
		return nil // and the target of errors.As is not made on the heap
	}
	var limited *node.RateLimitedError
	if errors.As(err, &limited) {
		return limited
	}
	return nil
}

// submit builds the command for this request and proposes it. It answers
// failures to propose itself; ok is false when it did.
func (s *Server) submit(c *gin.Context, t fsm.CmdType, payload, req any) (*fsm.Result, bool) {
	cmd, err := s.command(c, t, payload, req)
	if err != nil {
		unavailable(c, err.Error())
		return nil, false
	}
	return s.propose(c, cmd)
}

// storedResult decodes a successful result's body for a handler that adds
// to it (a key value, a live field). A refusal is answered as stored and ok
// is false.
func storedResult[T any](c *gin.Context, res *fsm.Result) (out T, ok bool) {
	if !res.OK() {
		respond(c, res)
		return out, false
	}
	if err := res.Decode(&out); err != nil {
		unavailable(c, "bad stored result")
		return out, false
	}
	return out, true
}

// respond writes a state-machine result as it was stored: what
// c.Data(res.Status, jsonContentType, res.Body) writes, with the two
// headers in the request's slots (TestRespondWritesWhatGinDataWrites).
func respond(c *gin.Context, res *fsm.Result) {
	st := stateOf(c)
	c.Status(res.Status)
	if len(c.Writer.Header()["Content-Type"]) == 0 {
		st.setHeader(c, slotContentType, "Content-Type", jsonContentType)
	}
	if !bodyAllowedForStatus(res.Status) {
		c.Writer.WriteHeaderNow()
		return
	}
	if len(res.Body) > 0 {
		st.setHeader(c, slotContentLength, "Content-Length", strconv.Itoa(len(res.Body)))
	}
	if _, err := c.Writer.Write(res.Body); err != nil {
		_ = c.Error(err)
		c.Abort()
	}
}

// jsonContentType is the content type of stored results.
const jsonContentType = "application/json; charset=utf-8"

// bodyAllowedForStatus is gin's rule (render.go) for statuses whose answer
// has no body.
func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= http.StatusContinue && status < http.StatusOK:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// randomID returns n random bytes as hex. Up to 32 bytes (every caller)
// are drawn and encoded on the stack: the string is the one allocation.
func randomID(n int) string {
	if n > 32 {
		return hex.EncodeToString(randomBytes(make([]byte, n)))
	}
	var buf [32]byte
	var text [64]byte
	hex.Encode(text[:2*n], randomBytes(buf[:n]))
	return string(text[:2*n])
}

// randomBytes fills b from the system's random source.
func randomBytes(b []byte) []byte {
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}
