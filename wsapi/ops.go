package wsapi

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/olahol/melody"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/wire"
)

// onMessage handles one client frame. Frames that are not JSON objects, or
// carry no op, are ignored (SPEC section 6, rule 7); an unknown op gets an
// error frame naming it (rule 3), and so does a known op with a field of
// the wrong JSON type (the frame is invalid, not unrecognised: dropping it
// would leave the client waiting for an answer that never comes).
func (h *Hub) onMessage(s *melody.Session, msg []byte) {
	c := connOf(s)
	if c == nil || c.closing.Load() {
		return
	}
	if !c.raw.Allow() {
		h.closeFlood(s, c)
		return
	}
	var f clientFrame
	// A type error still fills the other fields (op among them); a frame
	// that is not a JSON object fills none.
	decodeErr := json.Unmarshal(msg, &f)
	if f.Op == "" {
		return
	}
	if f.Op != "pong" && !c.frames.Allow() {
		h.refuse(s, c, errorFrame{Op: "error", Code: wire.CodeRateLimited, BadOp: f.Op,
			Error: fmt.Sprintf("too many frames: at most %d a second on a connection (burst %d); this one was not processed", FramesPerSecond, FrameBurst)})
		return
	}
	if decodeErr != nil && takesFields(f.Op) {
		msg := "a field has the wrong JSON type"
		var te *json.UnmarshalTypeError
		if errors.As(decodeErr, &te) && te.Field != "" {
			msg = te.Field + " must be a string"
		}
		h.refuse(s, c, errorFrame{Op: "error", Code: wire.CodeValidation, Error: msg, BadOp: f.Op})
		return
	}
	switch f.Op {
	case "auth":
		h.auth(s, c, f)
	case "subscribe":
		h.subscribe(s, c, f)
	case "unsubscribe":
		h.unsubscribe(s, c, f)
	case "pong":
		// Accepted as a no-op: a reply is not required.
	default:
		h.send(s, errorFrame{Op: "error", Code: wire.CodeValidation, Error: "unknown op", BadOp: f.Op})
	}
}

// onBinary handles one binary client frame. The protocol's frames are
// JSON text, so a binary frame is ignored (SPEC section 6, rule 7), but
// it is a client frame all the same and draws the raw budget: without it
// (melody hands binary frames to a handler of their own) a client could
// send binary frames without end, each read and copied by the node, and
// never be closed.
func (h *Hub) onBinary(s *melody.Session, _ []byte) {
	c := connOf(s)
	if c == nil || c.closing.Load() {
		return
	}
	if !c.raw.Allow() {
		h.closeFlood(s, c)
	}
}

// refuse sends a refusal of a client frame. A refused frame changes
// nothing; for an auth that means the connection keeps the identity it
// had, and a client that just tried to change it must hear which one that
// is (accountId, and the text): without it, account events still arriving
// after "API key is not valid" could be read as the new key's, or the
// socket believed unauthenticated while it still streams the old account.
func (h *Hub) refuse(s *melody.Session, c *conn, ef errorFrame) {
	if ef.BadOp == "auth" {
		c.mu.Lock()
		acct := c.accountID
		subscribed := acct != "" && c.subjects[subjectAccountPref+acct]
		c.mu.Unlock()
		if acct != "" {
			ef.AccountID = acct
			ef.Error += "; this connection is still authenticated as " + acct + " with its earlier key"
			if subscribed {
				ef.Error += ", and still subscribed to its account channel"
			}
		} else {
			ef.Error += "; this connection is not authenticated"
		}
	}
	h.send(s, ef)
}

// takesFields reports whether op reads fields of its frame besides op.
func takesFields(op string) bool {
	return op == "auth" || op == "subscribe" || op == "unsubscribe"
}

func (h *Hub) auth(s *melody.Session, c *conn, f clientFrame) {
	if f.APIKey == "" { // a malformed frame, not a wrong key
		h.refuse(s, c, errorFrame{Op: "error", Code: wire.CodeValidation, Error: "apiKey is required", BadOp: "auth"})
		return
	}
	k := h.keyOf(hashKey(f.APIKey))
	if k == nil {
		h.refuse(s, c, errorFrame{Op: "error", Code: wire.CodeUnauthorized, Error: "API key is not valid", BadOp: "auth"})
		return
	}
	// A key rotated on an open connection (another key of the same
	// account, holding read) keeps the account subscription; any other
	// re-auth ends it, and says so: the client must never believe itself
	// subscribed to a channel that no longer reaches it. Both locks, the
	// hub's first, as in join.
	keep := k.Scopes.Has(access.ScopeRead)
	h.mu.Lock()
	c.mu.Lock()
	old := c.accountID
	subject := subjectAccountPref + old
	ended := old != "" && c.subjects[subject] && (old != k.AccountID || !keep)
	if ended {
		delete(c.subjects, subject)
		delete(h.subs[subject], s)
		if len(h.subs[subject]) == 0 {
			delete(h.subs, subject)
		}
	}
	c.accountID, c.keyHash = k.AccountID, k.HashHex
	c.mu.Unlock()
	h.mu.Unlock()
	if ended {
		h.send(s, subAck{Op: "unsubscribed", Channel: channelAccount})
	}
	// A revocation of the new key applied between keyOf above and the
	// swap found the connection still holding the old hash; look again.
	if h.keyOf(k.HashHex) == nil {
		h.endRevoked(s, c)
		return
	}
	h.send(s, authAck{Op: "auth", OK: true, V: ProtocolVersion, AccountID: k.AccountID})
}

// subject validates a subscribe/unsubscribe frame and names its subject.
func (h *Hub) subject(c *conn, f clientFrame) (string, *errorFrame) {
	subject, _, ef := h.subjectAs(c, f)
	return subject, ef
}

// subjectAs is subject, with the key hash an account subscription was
// checked against ("" for the public channels).
func (h *Hub) subjectAs(c *conn, f clientFrame) (string, string, *errorFrame) {
	bad := func(code, msg string) (string, string, *errorFrame) {
		return "", "", &errorFrame{Op: "error", Code: code, Error: msg, BadOp: f.Op}
	}
	switch f.Channel {
	case channelPrices:
		if f.FeedID == "" {
			return bad(wire.CodeValidation, "feedId is required for channel prices")
		}
		if !h.exists(func(st *fsm.State) bool { _, ok := st.Market.FeedsByID[f.FeedID]; return ok }) {
			return bad(wire.CodeNotFound, "unknown feedId")
		}
		return channelPrices + "|" + f.FeedID, "", nil
	case channelStats:
		if f.MarketID == "" {
			return bad(wire.CodeValidation, "marketId is required for channel stats")
		}
		if !h.exists(func(st *fsm.State) bool { _, ok := st.Market.MarketsByID[f.MarketID]; return ok }) {
			return bad(wire.CodeNotFound, "unknown marketId")
		}
		return channelStats + "|" + f.MarketID, "", nil
	case channelAccount:
		c.mu.Lock()
		acct, hash := c.accountID, c.keyHash
		c.mu.Unlock()
		if acct == "" {
			return bad(wire.CodeUnauthorized, "authenticate with {op:'auth', apiKey} before subscribing to account")
		}
		k := h.keyOf(hash)
		if k == nil {
			return bad(wire.CodeUnauthorized, "the key is no longer valid")
		}
		if !k.Scopes.Has(access.ScopeRead) {
			return bad(wire.CodeInsufficientScope, "the account channel needs the read scope")
		}
		return subjectAccountPref + acct, hash, nil
	}
	return bad(wire.CodeValidation, "channel must be prices, stats or account")
}

func (h *Hub) exists(pred func(*fsm.State) bool) bool {
	var ok bool
	h.n.Machine().Read(func(st *fsm.State, _ uint64) { ok = pred(st) })
	return ok
}

func ack(op string, f clientFrame) subAck {
	a := subAck{Op: op, Channel: f.Channel}
	switch f.Channel {
	case channelPrices:
		a.FeedID = f.FeedID
	case channelStats:
		a.MarketID = f.MarketID
	}
	return a
}

func (h *Hub) subscribe(s *melody.Session, c *conn, f clientFrame) {
	subject, hash, ef := h.subjectAs(c, f)
	if ef == nil {
		ef = h.join(s, c, subject, hash)
	}
	if ef != nil {
		ef.Op, ef.BadOp = "error", f.Op
		h.send(s, ef)
		return
	}
	h.send(s, ack("subscribed", f))
}

// join adds s to subject's subscribers, or says why not. The connection's
// own list and the hub's change together under both locks (the hub's
// first), so a revocation's deauth, which clears the connection's account
// before it removes the subscription, either comes after and removes it,
// or came before and the join is refused: a revoked key never keeps an
// account channel it raced for, and no subscriber is left behind that the
// connection does not know of. hash is the key an account subscription
// was checked against.
func (h *Hub) join(s *melody.Session, c *conn, subject, hash string) *errorFrame {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if hash != "" && (c.keyHash != hash || subjectAccountPref+c.accountID != subject) {
		return &errorFrame{Code: wire.CodeUnauthorized, Error: "the key was revoked or replaced; authenticate again"}
	}
	if c.subjects[subject] {
		return nil
	}
	if len(c.subjects) >= MaxSubscriptions {
		return &errorFrame{Code: wire.CodeValidation, Error: "too many subscriptions on this connection"}
	}
	if hash != "" && len(h.subs[subject]) >= h.PerAccount {
		return &errorFrame{Code: wire.CodeRateLimited,
			Error: fmt.Sprintf("at most %d connections per account on this node subscribe to its account channel; close one first", h.PerAccount)}
	}
	c.subjects[subject] = true
	if h.subs[subject] == nil {
		h.subs[subject] = map[*melody.Session]struct{}{}
	}
	h.subs[subject][s] = struct{}{}
	return nil
}

func (h *Hub) unsubscribe(s *melody.Session, c *conn, f clientFrame) {
	var subject string
	if f.Channel == channelAccount {
		c.mu.Lock()
		subject = subjectAccountPref + c.accountID
		c.mu.Unlock()
	} else {
		var ef *errorFrame
		if subject, ef = h.subject(c, f); ef != nil {
			h.send(s, ef)
			return
		}
	}
	h.remove(s, c, subject)
	h.send(s, ack("unsubscribed", f))
}

func (h *Hub) remove(s *melody.Session, c *conn, subject string) {
	c.mu.Lock()
	delete(c.subjects, subject)
	c.mu.Unlock()
	h.mu.Lock()
	delete(h.subs[subject], s)
	if len(h.subs[subject]) == 0 {
		delete(h.subs, subject)
	}
	h.mu.Unlock()
}

// deauth drops the account subscription of a connection.
func (h *Hub) deauth(s *melody.Session, c *conn) {
	c.mu.Lock()
	acct := c.accountID
	c.accountID, c.keyHash = "", ""
	c.mu.Unlock()
	if acct != "" {
		h.remove(s, c, subjectAccountPref+acct)
	}
}

// drop forgets a closed connection.
func (h *Hub) drop(s *melody.Session) {
	c := connOf(s)
	if c == nil {
		return
	}
	c.mu.Lock()
	subjects := make([]string, 0, len(c.subjects))
	for sub := range c.subjects {
		subjects = append(subjects, sub)
	}
	c.mu.Unlock()
	for _, sub := range subjects {
		h.remove(s, c, sub)
	}
}
