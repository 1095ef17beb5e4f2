package wsapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/olahol/melody"

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
	SessionBufferMsgs  = 1024             // queued frames per connection before drops
	channelPrices      = "prices"
	channelStats       = "stats"
	channelAccount     = "account"
	sessionConnKey     = "conn"
	subjectAccountPref = "account|"
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
}

// conn is one connection's state.
type conn struct {
	mu        sync.Mutex
	accountID string
	keyHash   string
	subjects  map[string]bool
}

// New builds the hub; Run must be called to feed it.
func New(n *node.Node, log hclog.Logger) *Hub {
	m := melody.New()
	m.Config.MaxMessageSize = MaxFrameBytes
	m.Config.MessageBufferSize = SessionBufferMsgs
	h := &Hub{n: n, m: m, log: log, subs: map[string]map[*melody.Session]struct{}{}, PingEvery: PingEvery}
	m.HandleConnect(func(s *melody.Session) { s.Set(sessionConnKey, &conn{subjects: map[string]bool{}}) })
	m.HandleDisconnect(h.drop)
	m.HandleMessage(h.onMessage)
	m.HandleError(func(s *melody.Session, err error) {
		if err == melody.ErrMessageBufferFull {
			h.log.Debug("websocket client too slow; frames dropped", "remote", s.RemoteAddr())
		}
	})
	return h
}

// ServeHTTP upgrades the request.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.m.Len() >= MaxConnections {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(mustJSON(wire.ErrorBody{Error: "too many WebSocket connections on this node; try another", Code: wire.CodeUnavailable}))
		return
	}
	if err := h.m.HandleRequest(w, r); err != nil {
		h.log.Debug("websocket upgrade failed", "err", err)
	}
}

// Run feeds events to subscribers and pings every PingEvery until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	sub := h.n.Events.Subscribe()
	defer h.n.Events.Unsubscribe(sub)
	ping := time.NewTicker(h.PingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = h.m.Close()
			return
		case evs, ok := <-sub.C:
			if !ok {
				return
			}
			for _, ev := range evs {
				h.deliver(ev)
			}
		case <-ping.C:
			h.pingAll()
		}
	}
}

func (h *Hub) deliver(ev fsm.Event) {
	var subject string
	f := eventFrame{Op: "event", Kind: ev.Kind, TsMs: strconv.FormatInt(ev.TsMs, 10)}
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
	targets := make([]*melody.Session, 0, len(h.subs[subject]))
	for s := range h.subs[subject] {
		targets = append(targets, s)
	}
	h.mu.RUnlock()
	if len(targets) == 0 {
		return
	}
	if ev.Seq != 0 {
		f.Seq = strconv.FormatUint(ev.Seq, 10)
	}
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return
	}
	f.Data = data
	_ = h.m.BroadcastMultiple(mustJSON(f), targets)
}

// pingAll sends the application ping and drops the account channel of any
// connection whose key was revoked since it authenticated.
func (h *Hub) pingAll() {
	sessions, err := h.m.Sessions()
	if err != nil {
		return
	}
	msg := mustJSON(pingFrame{Op: "ping", TsMs: strconv.FormatInt(time.Now().UnixMilli(), 10)})
	for _, s := range sessions {
		c := connOf(s)
		if c == nil {
			continue
		}
		c.mu.Lock()
		hash := c.keyHash
		c.mu.Unlock()
		if hash != "" && h.keyOf(hash) == nil {
			h.deauth(s, c)
			h.send(s, errorFrame{Op: "error", Code: wire.CodeUnauthorized, Error: "the key was revoked; account channel closed"})
		}
		_ = s.Write(msg)
	}
}

func connOf(s *melody.Session) *conn {
	v, ok := s.Get(sessionConnKey)
	if !ok {
		return nil
	}
	c, _ := v.(*conn)
	return c
}

func (h *Hub) send(s *melody.Session, v any) { _ = s.Write(mustJSON(v)) }

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
