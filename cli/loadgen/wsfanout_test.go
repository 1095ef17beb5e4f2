package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestReadEventFastPathAndFallbackAgree(t *testing.T) {
	for _, tc := range []struct {
		frame string
		want  event
		ok    bool
	}{
		{`{"op":"event","channel":"prices","feedId":"BTCUSD","kind":"price","tsMs":"1700000000123","data":{"feedId":"BTCUSD","midQ8":"1","confQ9":"2","tsMs":"1700000000120","stalenessMs":"5000"}}`,
			event{channel: "prices", tsMs: 1700000000123, printTsMs: 1700000000120}, true},
		{`{"op":"event","channel":"account","kind":"fill","seq":"77","tsMs":"1700000000200","data":{"tsMs":"5","n":1}}`,
			event{channel: "account", tsMs: 1700000000200}, true},
		// Another field order: the data first, so the fast path must not
		// take its tsMs for the frame's.
		{`{"data":{"tsMs":"9","feedId":"BTCUSD"},"tsMs":"1700000000300","op":"event","channel":"prices"}`,
			event{channel: "prices", tsMs: 1700000000300, printTsMs: 9}, true},
		{`{"op":"event","channel":"stats","tsMs":"1700000000400","data":{"oracleTsMs":"1"}}`,
			event{channel: "stats", tsMs: 1700000000400}, true},
		{`{"op":"subscribed","channel":"prices","feedId":"BTCUSD"}`, event{}, false},
		{`{"op":"ping","tsMs":"1700000000500"}`, event{}, false},
		{`not json`, event{}, false},
	} {
		got, ok := readEvent([]byte(tc.frame))
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s:\n got %+v %v, want %+v %v", tc.frame, got, ok, tc.want, tc.ok)
		}
	}
}

// fakeHub is a node's /v1/ws as the clients see it: it acknowledges every
// subscription and, every 10 ms, sends each subscriber of a channel one
// event stamped lagMs in the past.
type fakeHub struct {
	lagMs    int64
	mu       sync.Mutex
	subs     map[string][]*websocket.Conn // channel -> sockets
	writeMu  map[*websocket.Conn]*sync.Mutex
	authed   int
	refuseAt int // refuse the subscription of the n-th connection (0: none)
	conns    int
	sent     atomic.Int64 // event frames written, over the whole run
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		fmt.Fprint(w, `{"ok":true,"db":true,"tsMs":"1"}`)
		return
	case "/deployment":
		fmt.Fprint(w, `{"deployment":"testnet"}`)
		return
	}
	up := websocket.Upgrader{}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.conns++
	n := h.conns
	mu := &sync.Mutex{}
	h.writeMu[c] = mu
	h.mu.Unlock()
	go func() {
		defer c.Close()
		for {
			var f clientFrameForTest
			if err := c.ReadJSON(&f); err != nil {
				return
			}
			mu.Lock()
			switch {
			case f.Op == "auth":
				h.mu.Lock()
				h.authed++
				h.mu.Unlock()
				_ = c.WriteJSON(map[string]any{"op": "auth", "ok": true, "v": 1})
			case f.Op == "subscribe" && n == h.refuseAt:
				_ = c.WriteJSON(map[string]any{"op": "error", "code": "not_found", "error": "unknown feedId"})
			case f.Op == "subscribe":
				h.mu.Lock()
				h.subs[f.Channel] = append(h.subs[f.Channel], c)
				h.mu.Unlock()
				_ = c.WriteJSON(map[string]any{"op": "subscribed", "channel": f.Channel})
			}
			mu.Unlock()
		}
	}()
}

type clientFrameForTest struct {
	Op, Channel string
}

func (h *fakeHub) publish(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ts := time.Now().UnixMilli() - h.lagMs
		type target struct {
			c  *websocket.Conn
			mu *sync.Mutex
			ch string
		}
		var targets []target
		h.mu.Lock()
		for ch, conns := range h.subs {
			for _, c := range conns {
				targets = append(targets, target{c, h.writeMu[c], ch})
			}
		}
		h.mu.Unlock()
		for _, tg := range targets {
			msg := fmt.Sprintf(`{"op":"event","channel":%q,"kind":"k","tsMs":"%d","data":{"tsMs":"%d"}}`, tg.ch, ts, ts-h.lagMs)
			tg.mu.Lock()
			if tg.c.WriteMessage(websocket.TextMessage, []byte(msg)) == nil {
				h.sent.Add(1)
			}
			tg.mu.Unlock()
		}
	}
}

func startHub(t *testing.T, lagMs int64) (*fakeHub, string) {
	h := &fakeHub{lagMs: lagMs, subs: map[string][]*websocket.Conn{}, writeMu: map[*websocket.Conn]*sync.Mutex{}}
	srv := httptest.NewServer(h)
	ctx, cancel := context.WithCancel(context.Background())
	go h.publish(ctx)
	t.Cleanup(func() { cancel(); srv.CloseClientConnections(); srv.Close() })
	return h, srv.URL
}

// Every client's frames are counted per channel, at the publishing rate,
// and their lateness is at least the lag the hub stamped them with.
func TestRunWSCountsFramesAndTheirLateness(t *testing.T) {
	h, url := startHub(t, 20)
	cfg := WSConfig{Nodes: []string{url}, Clients: 30, Feeds: []string{"BTCUSD"}, Markets: []string{"BTC-PERP"},
		Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond}
	res, err := RunWS(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ClientsConnected != 30 || len(res.Closed) != 0 || res.Interrupted {
		t.Fatalf("result %+v", res)
	}
	h.mu.Lock()
	subs := len(h.subs["prices"]) + len(h.subs["stats"])
	h.mu.Unlock()
	if subs != 60 {
		t.Fatalf("%d subscriptions, want 2 per client", subs)
	}
	// 30 clients x 2 channels x 100 events a second x 0.5 s = 6,000 at the
	// hub's nominal pace. A loaded machine misses ticks, so the count is
	// held against what the hub really sent: never more, and not so few
	// that whole clients or a channel went uncounted.
	all := res.Series[SeriesAll]
	if all.Frames != res.Series["prices"].Frames+res.Series["stats"].Frames {
		t.Fatalf("frames: %+v", res.Series)
	}
	if sent := h.sent.Load(); all.Frames > sent || all.Frames > 6600 || all.Frames < 1500 {
		t.Fatalf("%d frames counted of %d sent: %+v", all.Frames, sent, res.Series)
	}
	if want := float64(all.Frames) / (float64(res.DurationMs) / 1000); all.PerSec < want*0.99 || all.PerSec > want*1.01 {
		t.Errorf("%.0f frames/s, want %.0f (frames over the measured window)", all.PerSec, want)
	}
	for _, name := range []string{SeriesAll, "prices", "stats"} {
		s := res.Series[name]
		if s.P50Ms < 20 || s.P50Ms > s.P99Ms || s.P99Ms > s.MaxMs || s.Negatives != 0 {
			t.Errorf("%s: %+v, want every frame 20 ms late or more", name, s)
		}
	}
	// Price frames are also measured from their oracle time, 20 ms earlier.
	if o := res.Series[SeriesPriceOracle]; o.Frames != res.Series["prices"].Frames || o.P50Ms < res.Series["prices"].P50Ms+19 {
		t.Errorf("prices_oracle %+v against prices %+v", o, res.Series["prices"])
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil || !strings.Contains(b.String(), "prices_oracle") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}

// A refused subscription fails the run before anything is measured, and
// says which client and why.
func TestRunWSFailsWhenAClientIsRefused(t *testing.T) {
	h, url := startHub(t, 0)
	h.refuseAt = 3
	res, err := RunWS(context.Background(), WSConfig{Nodes: []string{url}, Clients: 5, Feeds: []string{"NOPE"},
		Duration: time.Second, SubscribeTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "1 of 5 clients") || !strings.Contains(err.Error(), "unknown feedId") {
		t.Fatalf("%v", err)
	}
	if res == nil || res.ClientsConnected != 4 || res.Series[SeriesAll].Frames != 0 {
		t.Fatalf("result %+v", res)
	}
}

func TestRunWSRefusesBadConfigs(t *testing.T) {
	ok := WSConfig{Nodes: []string{"http://127.0.0.1:1"}, Clients: 10, Feeds: []string{"BTCUSD"}, Duration: time.Second}
	for name, tc := range map[string]struct {
		mut  func(c *WSConfig)
		want string
	}{
		"no nodes":                 {func(c *WSConfig) { c.Nodes = nil }, "no nodes"},
		"no clients":               {func(c *WSConfig) { c.Clients = 0 }, "clients"},
		"too many clients":         {func(c *WSConfig) { c.Clients = MaxWSClients + 1 }, "clients"},
		"more account clients":     {func(c *WSConfig) { c.AccountClients = 11; c.Traders = 1 }, "account clients"},
		"account without traders":  {func(c *WSConfig) { c.AccountClients = 1 }, "need traders"},
		"no duration":              {func(c *WSConfig) { c.Duration = 0 }, "duration"},
		"negative warmup":          {func(c *WSConfig) { c.Warmup = -1 }, "warmup"},
		"negative interval":        {func(c *WSConfig) { c.OrderEvery = -1 }, "negative"},
		"orders without a market":  {func(c *WSConfig) { c.Traders = 1; c.OrderEvery = time.Second }, "no market"},
		"subscribed to nothing":    {func(c *WSConfig) { c.Feeds = nil }, "subscribe to nothing"},
		"too many subscriptions":   {func(c *WSConfig) { c.Feeds = make([]string, 64) }, "64"},
		"negative request timeout": {func(c *WSConfig) { c.RequestTimeout = -1 }, "negative"},
	} {
		c := ok
		tc.mut(&c)
		res, err := RunWS(context.Background(), c)
		if err == nil || res != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v %v, want an error naming %q", name, res, err, tc.want)
		}
	}
}

// TestMergedSeriesWeighsEachClientByItsFrames: a client whose frames
// overflowed its reservoir keeps wsSamplesPerClient of them, each standing
// for several frames; merged with a client that kept all of its own, its
// samples must weigh as many frames as they stand for. Client 0 got
// wsSamplesPerClient frames 50 ms late, client 1 ten times as many 10 ms
// late: 91% of the frames were 10 ms late, so p50 and p90 are 10 ms.
func TestMergedSeriesWeighsEachClientByItsFrames(t *testing.T) {
	clients := make([]*wsClient, 2)
	for i, c := range []struct {
		frames int
		lat    time.Duration
	}{{wsSamplesPerClient, 50 * time.Millisecond}, {10 * wsSamplesPerClient, 10 * time.Millisecond}} {
		s := &sampleSet{rng: rand.New(rand.NewPCG(uint64(i), 1))}
		for range c.frames {
			s.add(c.lat)
		}
		clients[i] = &wsClient{done: make(chan struct{}), series: map[string]*sampleSet{SeriesAll: s}}
		close(clients[i].done)
	}
	r := &WSResult{Series: map[string]WSSeries{}, Closed: map[string]int64{}}
	r.summarizeClients(clients, time.Second)
	got := r.Series[SeriesAll]
	if got.Frames != 11*wsSamplesPerClient || got.P50Ms != 10 || got.P90Ms != 10 || got.P99Ms != 50 || got.MaxMs != 50 {
		t.Fatalf("merged: %+v; want %d frames, p50 and p90 10 ms, p99 and max 50 ms", got, 11*wsSamplesPerClient)
	}
	// Every weight 1 (no reservoir overflowed): the nearest rank.
	for n := 1; n <= 200; n++ {
		var plain []time.Duration
		var ws []weightedSample
		for i := 1; i <= n; i++ {
			plain, ws = append(plain, msd(i)), append(ws, weightedSample{msd(i), 1})
		}
		for _, p := range []float64{0.5, 50, 90, 99, 100} {
			if a, b := weightedPercentile(ws, p), Percentile(plain, p); a != b {
				t.Fatalf("n %d p%v: weighted %v, nearest rank %v", n, p, a, b)
			}
		}
	}
}
