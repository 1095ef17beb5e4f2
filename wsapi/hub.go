package wsapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
	"github.com/olahol/melody"
	"golang.org/x/time/rate"

	"github.com/perpd/perpd/clientaddr"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
)

// Bounds of the WebSocket surface.
const (
	PingEvery          = 15 * time.Second // application-level {op:'ping'} cadence
	MaxConnections     = 10_000           // per node; more are refused with 503
	MaxSubscriptions   = 64               // per connection
	MaxFrameBytes      = 4096             // client frames
	SessionBufferMsgs  = 1024             // queued frames per connection before it is closed
	channelPrices      = "prices"
	channelStats       = "stats"
	channelAccount     = "account"
	sessionConnKey     = "conn"
	sessionRawKey      = "raw"
	subjectAccountPref = "account|"
	// closeReserve keeps room in melody's queue for the close frame after
	// a connection's SessionBufferMsgs are queued.
	closeReserve = 2
)

// Client frames that do work (auth, subscribe, unsubscribe, an unknown
// op's refusal) draw a per-connection token bucket: FrameBurst covers a
// client that authenticates and takes all MaxSubscriptions at once,
// FramesPerSecond far exceeds what a client that is not flooding sends.
// Past it a frame is refused with an error frame, rate_limited, and does
// nothing. pong is free.
const (
	FramesPerSecond = 10
	FrameBurst      = 2 * MaxSubscriptions
)

// Every client frame, whatever it holds (pong, a frame without an op, one
// the op budget refuses), first draws a raw bucket of four times the op
// budget, before it is decoded: decoding and answering cost CPU even when
// the frame does nothing (a 4 KiB frame about 45 us). A connection past
// it is closed with 1008 (policy violation): a client sending 40 frames a
// second for long, or 512 at once, is flooding, not subscribing.
const (
	RawFramesPerSecond = 4 * FramesPerSecond
	RawFrameBurst      = 4 * FrameBurst
)

// ReasonFrameFlood is the close reason past the raw budget.
var ReasonFrameFlood = "too many frames (at most " + strconv.Itoa(RawFramesPerSecond) + " a second, " +
	strconv.Itoa(RawFrameBurst) + " at once): reconnect and send fewer"

// MaxConnectionsPerAddress bounds one client address's open connections on
// a node (an IPv6 client's /64), so that one client cannot hold every slot
// of MaxConnections; more are refused with 429.
const MaxConnectionsPerAddress = 100

// SiteConnectionsFactor bounds an IPv6 client's site (its /48, 65,536
// /64s, free from tunnel brokers) to this many addresses' worth of
// connections in all: without it 100 of a site's /64s held all of
// MaxConnections and locked every other client out of the node (security
// review, 2026-11-29). The rate meter counts sites the same way.
const SiteConnectionsFactor = 5

// MaxAccountConnections bounds the connections of a node that subscribe to
// one account's channel: every event of the account is written once per
// such connection, so without a bound one account (from many addresses)
// could make each of its orders cost the node thousands of frames. More
// are refused with an error frame, rate_limited.
const MaxAccountConnections = 32

// CloseResync is the WebSocket close code of a connection that lost, or
// would lose, frames: its send buffer was full (the client reads too
// slowly), the node's event stream lost events or ended. The client
// reconnects, subscribes and then takes a REST snapshot (SPEC section 6,
// rule 6, in the order that misses nothing). 4000: the first
// application-defined code.
const CloseResync = 4000

// Close reasons sent with CloseResync (at most 123 bytes each). Each
// gives the reconnect recipe's order: resubscribe, then the snapshot.
const (
	ReasonSlowConsumer = "resync: send buffer full (client too slow); frames would be lost. Resubscribe, then take a REST snapshot"
	ReasonEventsLost   = "resync: this node's event stream lost events. Resubscribe, then take a REST snapshot"
	ReasonStreamEnded  = "resync: this node's event stream ended (halted or stopping). On another node: resubscribe, then REST snapshot"
)

// Hub serves /v1/ws for one node.
type Hub struct {
	n   *node.Node
	m   *melody.Melody
	log hclog.Logger

	mu   sync.RWMutex
	subs map[string]map[*melody.Session]struct{} // subject -> sessions

	// PingEvery is the application ping cadence (PingEvery by default).
	PingEvery time.Duration

	// sendBuffer is the frames a connection may have queued
	// (SessionBufferMsgs; tests shrink it before serving).
	sendBuffer int64
	slowCloses atomic.Uint64
	// floodCloses counts connections closed past the raw frame budget.
	floodCloses atomic.Uint64
	lossCloses  atomic.Uint64
	// dropped counts frames not queued because their connection was
	// closing for resync or had a full send buffer.
	dropped atomic.Uint64
	// beforeBatch, when set, runs before each bus batch (tests stall the
	// hub with it).
	beforeBatch func()
	// ended is set when the node's event bus closed (halt, shutdown) or
	// the node is stopping: nothing more will be sent, so connections are
	// closed and refused.
	ended atomic.Bool
	// serving counts ServeClient calls in flight (a connection's whole
	// life), so that Shutdown can wait for their close frames.
	serving atomic.Int64

	// PerAddress bounds one client address's connections
	// (MaxConnectionsPerAddress by default; the bench profile lifts it,
	// its fan-out clients all dial from loopback), and an IPv6 site's
	// (SiteConnectionsFactor times it). byAddr and bySite count them.
	PerAddress int
	addrMu     sync.Mutex
	byAddr     map[string]int
	bySite     map[string]int
	// PerAccount bounds the connections subscribed to one account's
	// channel (MaxAccountConnections by default; the bench profile lifts
	// it, its account clients share a few traders' accounts).
	PerAccount int
}

// conn is one connection's state.
type conn struct {
	mu        sync.Mutex
	accountID string
	keyHash   string
	subjects  map[string]bool
	// queued counts frames handed to melody and not yet written.
	queued atomic.Int64
	// closing is set once the close frame is queued; nothing follows it.
	closing atomic.Bool
	// frames meters the client's frames (FramesPerSecond, FrameBurst).
	frames *rate.Limiter
	// raw meters every frame before it is decoded (RawFramesPerSecond,
	// RawFrameBurst).
	raw *rate.Limiter
}

// New builds the hub; Run must be called to feed it.
func New(n *node.Node, log hclog.Logger) *Hub {
	m := melody.New()
	m.Config.MaxMessageSize = MaxFrameBytes
	h := &Hub{n: n, m: m, log: log, subs: map[string]map[*melody.Session]struct{}{}, PingEvery: PingEvery,
		PerAddress: MaxConnectionsPerAddress, byAddr: map[string]int{}, bySite: map[string]int{}, PerAccount: MaxAccountConnections}
	// A refused upgrade (no Upgrade header, a bad version) answers the
	// API's JSON refusal, not gorilla's plain text.
	m.Upgrader.Error = func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
		refuse(w, status, wire.CodeValidation, "websocket upgrade refused: "+reason.Error())
	}
	h.setSendBuffer(SessionBufferMsgs)
	m.HandleConnect(func(s *melody.Session) {
		// The raw budget was made at the upgrade, where the control
		// frames' meter draws it too (controlframes.go).
		raw, _ := s.Get(sessionRawKey)
		rawLimiter, ok := raw.(*rate.Limiter)
		if !ok {
			rawLimiter = rate.NewLimiter(RawFramesPerSecond, RawFrameBurst)
		}
		c := &conn{subjects: map[string]bool{}, frames: rate.NewLimiter(FramesPerSecond, FrameBurst), raw: rawLimiter}
		s.Set(sessionConnKey, c)
		if h.ended.Load() { // upgraded while the stream ended
			h.closeResync(s, c, ReasonStreamEnded)
		}
	})
	m.HandleDisconnect(h.drop)
	m.HandleMessage(h.onMessage)
	m.HandleMessageBinary(h.onBinary)
	m.HandleSentMessage(func(s *melody.Session, _ []byte) {
		if c := connOf(s); c != nil {
			c.queued.Add(-1)
		}
	})
	m.HandleError(func(s *melody.Session, err error) {
		if errors.Is(err, errControlFlood) {
			h.floodCloses.Add(1)
			return
		}
		if err == melody.ErrMessageBufferFull {
			// Cannot happen while every frame goes through write; if it
			// does, say so loudly.
			h.log.Warn("websocket send queue overflowed past its reserve", "remote", s.RemoteAddr())
		}
	})
	return h
}

func (h *Hub) setSendBuffer(n int) {
	h.sendBuffer = int64(n)
	h.m.Config.MessageBufferSize = n + closeReserve
}

// SlowConsumerCloses counts connections closed because their send buffer
// was full.
func (h *Hub) SlowConsumerCloses() uint64 { return h.slowCloses.Load() }

// EventLossCloses counts connections closed because the node's event bus
// dropped events on their way to the hub.
func (h *Hub) EventLossCloses() uint64 { return h.lossCloses.Load() }

// DroppedFrames counts frames not sent because their connection was being
// closed for resync (the client was told to take a fresh snapshot).
func (h *Hub) DroppedFrames() uint64 { return h.dropped.Load() }

// Connections is how many WebSocket connections are open.
func (h *Hub) Connections() int { return h.m.Len() }

// ServeClient upgrades the request of the client at clientIP (the address
// the rate limits see: the TCP peer, or what a trusted proxy says). It
// returns when the connection ends; the client's slot is held until then.
func (h *Hub) ServeClient(w http.ResponseWriter, r *http.Request, clientIP string) {
	// Counted before the check: a Shutdown that set ended either sees
	// this call or this call sees ended.
	h.serving.Add(1)
	defer h.serving.Add(-1)
	if h.ended.Load() {
		refuse(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "this node's event stream ended (halted or stopping); use another node")
		return
	}
	if h.m.Len() >= MaxConnections {
		refuse(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "too many WebSocket connections on this node; try another")
		return
	}
	addr, site := clientaddr.Key(clientIP), clientaddr.Site(clientIP)
	if why := h.hold(addr, site); why != "" {
		w.Header().Set("Retry-After", "1")
		refuse(w, http.StatusTooManyRequests, wire.CodeRateLimited, why)
		return
	}
	defer h.release(addr, site)
	raw := rate.NewLimiter(RawFramesPerSecond, RawFrameBurst)
	if err := h.m.HandleRequestWithKeys(meteredWriter{ResponseWriter: w, raw: raw}, r, map[string]any{sessionRawKey: raw}); err != nil {
		h.log.Debug("websocket upgrade failed", "err", err)
	}
}

// hold takes one of addr's connection slots and one of its site's (site
// "" for IPv4: no aggregate), or says why none is left.
func (h *Hub) hold(addr, site string) string {
	h.addrMu.Lock()
	defer h.addrMu.Unlock()
	if h.byAddr[addr] >= h.PerAddress {
		return fmt.Sprintf("at most %d WebSocket connections per client address on this node; close one first", h.PerAddress)
	}
	if site != "" && h.bySite[site] >= SiteConnectionsFactor*h.PerAddress {
		return fmt.Sprintf("at most %d WebSocket connections per IPv6 /48 on this node; close one first", SiteConnectionsFactor*h.PerAddress)
	}
	h.byAddr[addr]++
	if site != "" {
		h.bySite[site]++
	}
	return ""
}

// release gives the slots back; an address or site with none left is
// forgotten, so the tables hold only those with open connections.
func (h *Hub) release(addr, site string) {
	h.addrMu.Lock()
	defer h.addrMu.Unlock()
	if h.byAddr[addr]--; h.byAddr[addr] <= 0 {
		delete(h.byAddr, addr)
	}
	if site == "" {
		return
	}
	if h.bySite[site]--; h.bySite[site] <= 0 {
		delete(h.bySite, site)
	}
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(wire.ErrorBody{Error: msg, Code: code}))
}

// Run feeds events to subscribers and pings every PingEvery until ctx ends.
// When the bus reports that the hub missed events, every connection with a
// subscription is closed with CloseResync: each may have missed a frame.
// When the bus closes or ctx ends, every connection is closed with
// CloseResync (ReasonStreamEnded); Shutdown also waits for those closes.
func (h *Hub) Run(ctx context.Context) {
	sub := h.n.Events.Subscribe()
	defer func() { h.n.Events.Unsubscribe(sub) }()
	ping := time.NewTicker(h.PingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			// Not melody's Close: its close frame has no code (1005),
			// and a client must learn the stream ended (4000).
			h.end()
			return
		case <-sub.Lost():
			h.log.Warn("websocket hub missed events; closing subscribed connections", "dropped", sub.Dropped())
			next := h.n.Events.Subscribe()
			h.n.Events.Unsubscribe(sub)
			sub = next
			h.closeSubscribed()
		case evs, ok := <-sub.C:
			if !ok {
				// The bus closed (the replica halted, or the node is
				// stopping): no event or ping will follow, so no
				// connection may stay open believing itself subscribed.
				h.end()
				return
			}
			if h.beforeBatch != nil {
				h.beforeBatch()
			}
			for _, ev := range evs {
				h.deliver(ev)
			}
		case <-ping.C:
			h.pingAll()
		}
	}
}

// end refuses new connections and closes every open one with CloseResync,
// the stream ended: no event or ping follows. Idempotent.
func (h *Hub) end() {
	h.ended.Store(true)
	h.eachConn(func(s *melody.Session, c *conn) { h.closeResync(s, c, ReasonStreamEnded) })
}

// Shutdown is the node's graceful stop of the WebSocket: every open
// connection is closed with CloseResync and ReasonStreamEnded (after the
// frames already queued), new upgrades are refused with 503, and it
// returns once every connection has ended (its close frame written) or
// ctx is done. Call it before the HTTP listener closes and the process
// exits: an upgraded connection is not the HTTP server's to drain, and a
// process that exits first leaves its clients an unexpected EOF (1006).
func (h *Hub) Shutdown(ctx context.Context) error {
	h.end()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for h.serving.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	_ = h.m.Close() // stops melody's hub goroutine; no session is left
	return nil
}

// closeSubscribed closes, for resync, every connection that subscribes to
// anything.
func (h *Hub) closeSubscribed() {
	h.eachConn(func(s *melody.Session, c *conn) {
		c.mu.Lock()
		n := len(c.subjects)
		c.mu.Unlock()
		// Counted before the close frame is queued, so that whoever reads
		// the frame also finds it counted.
		if n > 0 && c.closing.CompareAndSwap(false, true) {
			h.lossCloses.Add(1)
			h.finishClose(s, ReasonEventsLost)
		}
	})
}

// eachConn runs fn for every open connection of this hub.
func (h *Hub) eachConn(fn func(s *melody.Session, c *conn)) {
	sessions, err := h.m.Sessions()
	if err != nil {
		return
	}
	for _, s := range sessions {
		if c := connOf(s); c != nil {
			fn(s, c)
		}
	}
}

// write queues one frame for s. A connection that already holds its whole
// send buffer is closed with CloseResync instead: the client learns it
// must resync rather than silently missing this frame.
func (h *Hub) write(s *melody.Session, msg []byte) {
	c := connOf(s)
	if c == nil {
		return
	}
	if !h.queue(s, c, msg) && c.closing.CompareAndSwap(false, true) {
		h.slowCloses.Add(1) // before the close frame, as in closeSubscribed
		h.log.Debug("websocket client too slow; closed for resync", "remote", s.RemoteAddr())
		h.finishClose(s, ReasonSlowConsumer)
	}
}

// queue hands msg to s's send queue, or drops it on a connection that is
// closing. It reports false, dropping msg, when the send buffer is full:
// the caller must close the connection for resync. It takes no lock of
// the hub's or the connection's.
func (h *Hub) queue(s *melody.Session, c *conn, msg []byte) bool {
	if c.closing.Load() {
		h.dropped.Add(1)
		return true
	}
	if c.queued.Add(1) > h.sendBuffer {
		c.queued.Add(-1)
		h.dropped.Add(1)
		return false
	}
	if err := s.Write(msg); err != nil {
		c.queued.Add(-1)
	}
	return true
}

// closeResync unsubscribes c from everything and queues a CloseResync
// frame behind the frames already queued (melody keeps closeReserve slots
// for it). It reports whether this call closed the connection.
func (h *Hub) closeResync(s *melody.Session, c *conn, reason string) bool {
	if !c.closing.CompareAndSwap(false, true) {
		return false
	}
	h.finishClose(s, reason)
	return true
}

// closeFlood closes a connection past its raw frame budget with 1008.
func (h *Hub) closeFlood(s *melody.Session, c *conn) {
	if !c.closing.CompareAndSwap(false, true) {
		return
	}
	h.floodCloses.Add(1)
	h.drop(s)
	_ = s.CloseWithMsg(websocket.FormatCloseMessage(websocket.ClosePolicyViolation, ReasonFrameFlood))
}

// FloodCloses counts connections closed for sending more frames than the
// raw budget.
func (h *Hub) FloodCloses() uint64 { return h.floodCloses.Load() }

// finishClose is closeResync past the claim of c.closing (from then on
// nothing more is queued, so the close frame follows the last one).
func (h *Hub) finishClose(s *melody.Session, reason string) {
	h.drop(s)
	_ = s.CloseWithMsg(websocket.FormatCloseMessage(CloseResync, reason))
}

func (h *Hub) deliver(ev fsm.Event) {
	if ev.Kind == KindSessionRevoked && ev.Account != "" {
		h.revoked(ev.Account)
	}
	var subject string
	f := eventFrame{Op: "event", Kind: ev.Kind, TsMs: wire.Int(ev.TsMs)}
	switch {
	case ev.Channel == channelPrices:
		subject, f.Channel, f.FeedID = channelPrices+"|"+ev.Selector, channelPrices, ev.Selector
	case ev.Channel == channelStats:
		subject, f.Channel, f.MarketID = channelStats+"|"+ev.Selector, channelStats, ev.Selector
	case ev.Account != "":
		subject, f.Channel = subjectAccountPref+ev.Account, channelAccount
	default:
		return
	}
	h.mu.RLock()
	n := len(h.subs[subject])
	h.mu.RUnlock()
	if n == 0 {
		return
	}
	f.Seq = wire.Int(ev.Seq) // 0 (market data): omitted
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return
	}
	f.Data = data
	msg := mustJSON(f)
	// Queued under the hub's read lock: a re-auth or an unsubscribe
	// changes the subscribers under its write lock and acknowledges
	// after, so no frame of a channel a connection left follows the ack
	// (after a re-auth as another account, the client would read the old
	// account's event as its own). A full connection is claimed here and
	// closed after: closing needs the write lock.
	var slow []*melody.Session
	h.mu.RLock()
	for s := range h.subs[subject] {
		if c := connOf(s); c != nil && !h.queue(s, c, msg) && c.closing.CompareAndSwap(false, true) {
			slow = append(slow, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range slow {
		h.slowCloses.Add(1)
		h.log.Debug("websocket client too slow; closed for resync", "remote", s.RemoteAddr())
		h.finishClose(s, ReasonSlowConsumer)
	}
}

// pingAll sends the application ping and drops the account channel of any
// connection whose key was revoked since it authenticated.
func (h *Hub) pingAll() {
	msg := mustJSON(pingFrame{Op: "ping", TsMs: wire.Int(time.Now().UnixMilli())})
	h.eachConn(func(s *melody.Session, c *conn) {
		c.mu.Lock()
		hash := c.keyHash
		c.mu.Unlock()
		// A backstop: revocations normally end the channel at once
		// (revoked, on the session_revoked event).
		if hash != "" && h.keyOf(hash) == nil {
			h.endRevoked(s, c)
		}
		h.write(s, msg)
	})
}

// KindSessionRevoked is the account event the state machine emits when
// keys of the account are revoked.
const KindSessionRevoked = "session_revoked"

// revoked ends, at once, the account channel of every connection of the
// account whose key is no longer live in the applied state.
func (h *Hub) revoked(account string) {
	h.eachConn(func(s *melody.Session, c *conn) {
		c.mu.Lock()
		acct, hash := c.accountID, c.keyHash
		c.mu.Unlock()
		if acct == account && hash != "" && h.keyOf(hash) == nil {
			h.endRevoked(s, c)
		}
	})
}

// endRevoked drops the connection's authentication and account
// subscription and says why; its public channels stay open.
func (h *Hub) endRevoked(s *melody.Session, c *conn) {
	h.deauth(s, c)
	h.send(s, errorFrame{Op: "error", Code: wire.CodeUnauthorized, Error: "the key was revoked; account channel closed"})
}

func connOf(s *melody.Session) *conn {
	v, ok := s.Get(sessionConnKey)
	if !ok {
		return nil
	}
	c, _ := v.(*conn)
	return c
}

func (h *Hub) send(s *melody.Session, v any) { h.write(s, mustJSON(v)) }

// keyOf returns the live key with this hash, from the node's applied state.
func (h *Hub) keyOf(hash string) *access.Key {
	var out *access.Key
	h.n.Machine().Read(func(st *fsm.State, _ uint64) {
		if k := st.Access.KeyByHashHex(hash); k != nil && k.Live() {
			c := *k
			out = &c
		}
	})
	return out
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
