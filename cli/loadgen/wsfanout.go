package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/fsm/wire"
)

// Bounds and defaults of a fan-out run (`perpd bench ws`).
const (
	MaxWSClients = 20_000
	// wsDialParallel bounds the handshakes in flight while connecting.
	wsDialParallel = 64
	// wsSamplesPerClient bounds the latencies one client keeps per
	// channel (a uniform reservoir beyond); 1,000 clients keep at most
	// 64 MB per channel.
	wsSamplesPerClient = 8192
	// DefaultSubscribeTimeout bounds connecting every client and
	// collecting its acknowledgements.
	DefaultSubscribeTimeout = 60 * time.Second
)

// Latency series a fan-out run reports besides the channels.
const (
	SeriesAll         = "all"           // every event frame, from its log time
	SeriesPriceOracle = "prices_oracle" // price frames, from the print's oracle time
)

// WSConfig is one fan-out run: Clients sockets spread over Nodes, each
// subscribed to the prices of Feeds and the stats of Markets; the first
// AccountClients also authenticate with one of the Traders' keys (client
// j with trader j mod Traders) and subscribe to its account, whose events
// the traders' market orders produce.
type WSConfig struct {
	Nodes          []string
	Clients        int
	AccountClients int
	Traders        int
	Feeds          []string
	Markets        []string
	// OrderMarket is where traders place market orders of one contract,
	// alternating buy and sell, one every OrderEvery each (0: no orders).
	OrderMarket      string
	OrderEvery       time.Duration
	Warmup, Duration time.Duration
	AllowAnyTier     bool
	ReadyTimeout     time.Duration
	SetupTimeout     time.Duration
	SubscribeTimeout time.Duration
	RequestTimeout   time.Duration
	Progress         io.Writer
}

func (c *WSConfig) check() error {
	switch {
	case len(c.Nodes) == 0:
		return errors.New("no nodes")
	case c.Clients < 1 || c.Clients > MaxWSClients:
		return fmt.Errorf("clients %d is outside 1..%d", c.Clients, MaxWSClients)
	case c.AccountClients < 0 || c.AccountClients > c.Clients:
		return fmt.Errorf("account clients %d is outside 0..%d (the clients)", c.AccountClients, c.Clients)
	case c.Traders < 0 || c.Traders > MaxTraders:
		return fmt.Errorf("traders %d is outside 0..%d", c.Traders, MaxTraders)
	case c.AccountClients > 0 && c.Traders == 0:
		return errors.New("account clients need traders: their keys are the traders'")
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("duration %v is outside (0, %v]", c.Duration, MaxDuration)
	case c.Warmup < 0 || c.Warmup > MaxDuration:
		return fmt.Errorf("warmup %v is outside [0, %v]", c.Warmup, MaxDuration)
	case c.OrderEvery < 0:
		return fmt.Errorf("order interval %v is negative", c.OrderEvery)
	case c.OrderEvery > 0 && c.Traders > 0 && c.OrderMarket == "":
		return errors.New("traders place orders but no market is named")
	case len(c.Feeds)+len(c.Markets)+min(c.AccountClients, 1) == 0:
		return errors.New("the clients subscribe to nothing: name a feed, a market or account clients")
	case len(c.Feeds)+len(c.Markets)+1 > 64:
		return fmt.Errorf("%d subscriptions per client, more than the 64 a connection may hold", len(c.Feeds)+len(c.Markets)+1)
	}
	for _, def := range []*time.Duration{&c.ReadyTimeout, &c.SetupTimeout, &c.SubscribeTimeout, &c.RequestTimeout} {
		if *def < 0 {
			return errors.New("a timeout is negative")
		}
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.SetupTimeout == 0 {
		c.SetupTimeout = DefaultSetupTimeout
	}
	if c.SubscribeTimeout == 0 {
		c.SubscribeTimeout = DefaultSubscribeTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return nil
}

// WSSeries is one latency series of a fan-out run: how many event frames
// arrived in the measured window and how long after their time.
type WSSeries struct {
	Frames    int64   `json:"frames"`
	PerSec    float64 `json:"perSec"`
	P50Ms     float64 `json:"p50Ms"`
	P90Ms     float64 `json:"p90Ms"`
	P99Ms     float64 `json:"p99Ms"`
	MaxMs     float64 `json:"maxMs"`
	MeanMs    float64 `json:"meanMs"`
	Negatives int64   `json:"negatives"` // frames stamped after they arrived (clock steps); counted as 0
}

// WSResultConfig is the configuration part of a WSResult.
type WSResultConfig struct {
	Nodes          []string `json:"nodes"`
	Clients        int      `json:"clients"`
	AccountClients int      `json:"accountClients"`
	Traders        int      `json:"traders"`
	Feeds          []string `json:"feeds"`
	Markets        []string `json:"markets"`
	OrderMarket    string   `json:"orderMarket"`
	OrderEveryMs   int64    `json:"orderEveryMs"`
	WarmupMs       int64    `json:"warmupMs"`
	DurationMs     int64    `json:"durationMs"`
}

// WSResult is what `perpd bench ws` measured. Latency is the receive time
// (wall clock, microseconds) minus the frame's tsMs, the log time the
// leader stamped on the entry that produced the event: raft commit, apply,
// the hub's fan-out and the socket. tsMs is whole milliseconds rounded
// down, so every figure is up to 1 ms high.
type WSResult struct {
	Config           WSResultConfig `json:"config"`
	Tier             string         `json:"tier,omitempty"`
	ClientsConnected int            `json:"clientsConnected"`
	SetupMs          int64          `json:"setupMs"`
	ConnectMs        int64          `json:"connectMs"`
	DurationMs       int64          `json:"durationMs"`
	Interrupted      bool           `json:"interrupted"`
	// Series: SeriesAll, one per channel, and SeriesPriceOracle.
	Series map[string]WSSeries `json:"series"`
	// Closed counts clients whose socket ended before the run did, by
	// close code ("4000" is the server's resync close) or "error".
	Closed map[string]int64 `json:"closed"`
	// Orders are the traders' market orders in the measured window.
	Orders OpResult `json:"orders"`
}

// RunWS runs cfg: traders signed up, every client connected and
// subscribed, the orders started, then Warmup unmeasured and Duration
// measured.
func RunWS(ctx context.Context, cfg WSConfig) (*WSResult, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	progress := progressTo(cfg.Progress)
	hc := pooledClient(max(cfg.Traders, 2))
	defer hc.CloseIdleConnections()
	if err := preflight(ctx, hc, cfg.Nodes, cfg.ReadyTimeout); err != nil {
		return nil, err
	}
	res := &WSResult{Config: WSResultConfig{Nodes: cfg.Nodes, Clients: cfg.Clients, AccountClients: cfg.AccountClients,
		Traders: cfg.Traders, Feeds: cfg.Feeds, Markets: cfg.Markets, OrderMarket: cfg.OrderMarket,
		OrderEveryMs: cfg.OrderEvery.Milliseconds(), WarmupMs: cfg.Warmup.Milliseconds(), DurationMs: cfg.Duration.Milliseconds()},
		Series: map[string]WSSeries{}, Closed: map[string]int64{}, Orders: OpResult{Errors: map[string]int64{}}}

	setupStart := time.Now()
	orders := newRecorder(1)
	traders, err := wsTraders(ctx, hc, &cfg, orders, res)
	res.SetupMs = time.Since(setupStart).Milliseconds()
	if err != nil || ctx.Err() != nil {
		res.Interrupted = ctx.Err() != nil
		return res, err
	}
	if len(traders) > 0 {
		progress("setup: %d traders signed up and funded in %.1fs (tier %s)", len(traders), float64(res.SetupMs)/1000, res.Tier)
	}

	connectStart := time.Now()
	clients, err := connectAll(ctx, &cfg, traders)
	res.ConnectMs = time.Since(connectStart).Milliseconds()
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	res.ClientsConnected = len(clients)
	if err != nil || ctx.Err() != nil {
		res.Interrupted = ctx.Err() != nil
		return res, err
	}
	progress("connected: %d clients subscribed in %.1fs", len(clients), float64(res.ConnectMs)/1000)

	// The measured window starts after the warmup; every client reads
	// from now on and counts only what arrives inside the window.
	began := time.Now()
	win := &window{from: began.Add(cfg.Warmup), to: began.Add(cfg.Warmup + cfg.Duration)}
	for _, c := range clients {
		c.start(win)
	}
	var wg sync.WaitGroup
	if cfg.OrderEvery > 0 {
		for i, t := range traders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.paceOrders(ctx, &cfg, time.Duration(i)*cfg.OrderEvery/time.Duration(len(traders)), win)
			}()
		}
	}
	timer := time.NewTimer(time.Until(win.to))
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	wg.Wait()
	end := time.Now()
	if end.After(win.to) {
		end = win.to
	}
	res.Interrupted = ctx.Err() != nil
	measured := max(end.Sub(win.from), 0)
	res.DurationMs = measured.Milliseconds()
	for _, c := range clients {
		c.close()
	}
	res.summarizeClients(clients, measured)
	if s := orders.ops[OpMarket]; s != nil {
		res.Orders = summarize(s, measured)
	}
	return res, nil
}

// window is the measured interval.
type window struct{ from, to time.Time }

// wsTraders signs up cfg.Traders funded accounts over the nodes, the
// first alone to learn the tier (refusing prod, and any tier but bench
// unless allowed).
func wsTraders(ctx context.Context, hc *http.Client, cfg *WSConfig, orders *recorder, res *WSResult) ([]*trader, error) {
	if cfg.Traders == 0 {
		return nil, nil
	}
	setupRec := newRecorder(1)
	setupCl := &client{http: hc, rec: setupRec, timeout: cfg.RequestTimeout}
	deadline := time.Now().Add(cfg.SetupTimeout)
	traders := make([]*trader, cfg.Traders)
	for i := range traders {
		traders[i] = newTrader(i, cfg.Nodes[i%len(cfg.Nodes)], 1, setupCl, nil)
	}
	tier, err := setupAll(ctx, traders, deadline, cfg.AllowAnyTier, "trader")
	res.Tier = tier
	if err != nil {
		return nil, err
	}
	// From here on their calls are the measured orders.
	ordersCl := &client{http: hc, rec: orders, timeout: cfg.RequestTimeout}
	for _, t := range traders {
		t.cl = ordersCl
	}
	return traders, nil
}

// paceOrders places one market order every cfg.OrderEvery (after an
// initial offset that spreads the traders), alternating buy and sell,
// until the window ends. Orders answered before the window starts are
// not recorded.
func (t *trader) paceOrders(ctx context.Context, cfg *WSConfig, offset time.Duration, win *window) {
	wait(ctx, offset, win.to)
	tick := time.NewTicker(cfg.OrderEvery)
	defer tick.Stop()
	buy := true
	for ctx.Err() == nil && time.Now().Before(win.to) {
		body := orderBody{MarketID: cfg.OrderMarket, Type: "market", Contracts: 1, Leverage: Leverage, Side: "sell"}
		if buy {
			body.Side = "buy"
		}
		op := "warmup"
		if !time.Now().Before(win.from) {
			op = OpMarket
		}
		o := t.cl.do(ctx, call{op: op, method: http.MethodPost, base: t.base, path: "/v1/orders", key: t.key, write: true, body: body}, nil)
		if o.ok {
			buy = !buy
		}
		if !o.ok && !o.aborted {
			pause(ctx, o, win.to)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// wsClient is one socket and what it measured.
type wsClient struct {
	id     int
	conn   *websocket.Conn
	closed atomic.Bool
	done   chan struct{}
	// Filled by the read loop; read after done.
	series  map[string]*sampleSet
	endedBy string // close code or "error" when the socket ended early
}

// sampleSet keeps a bounded uniform sample of latencies (reservoir).
type sampleSet struct {
	n         int64
	sum       time.Duration
	max       time.Duration
	negatives int64
	samples   []time.Duration
	rng       *rand.Rand
}

func (s *sampleSet) add(d time.Duration) {
	if d < 0 {
		s.negatives++
		d = 0
	}
	s.n++
	s.sum += d
	s.max = max(s.max, d)
	if len(s.samples) < wsSamplesPerClient {
		s.samples = append(s.samples, d)
	} else if j := s.rng.Int64N(s.n); j < int64(len(s.samples)) {
		s.samples[j] = d
	}
}

// wsURL turns a node's base URL into its WebSocket URL.
func wsURL(base string) string {
	if strings.HasPrefix(base, "https://") {
		return "wss://" + strings.TrimPrefix(base, "https://") + "/v1/ws"
	}
	return "ws://" + strings.TrimPrefix(base, "http://") + "/v1/ws"
}

// connectAll dials every client (wsDialParallel at a time), subscribes it
// and waits for its acknowledgements. It returns the clients connected so
// far with the first failure.
func connectAll(ctx context.Context, cfg *WSConfig, traders []*trader) ([]*wsClient, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.SubscribeTimeout)
	defer cancel()
	clients := make([]*wsClient, cfg.Clients)
	errs := make([]error, cfg.Clients)
	sem := make(chan struct{}, wsDialParallel)
	var wg sync.WaitGroup
	for i := range clients {
		key := ""
		if i < cfg.AccountClients {
			key = traders[i%len(traders)].key
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			clients[i], errs[i] = connectOne(ctx, i, cfg.Nodes[i%len(cfg.Nodes)], key, cfg)
		}()
	}
	wg.Wait()
	var ok []*wsClient
	var first error
	failed := 0
	for i, c := range clients {
		if errs[i] != nil {
			failed++
			if first == nil {
				first = fmt.Errorf("client %d: %w", i, errs[i])
			}
			continue
		}
		ok = append(ok, c)
	}
	if first != nil {
		return ok, fmt.Errorf("%d of %d clients could not connect and subscribe; the first: %w", failed, cfg.Clients, first)
	}
	return ok, nil
}

// connectOne dials base's WebSocket, authenticates with key when set,
// subscribes, and returns once every subscription is acknowledged.
func connectOne(ctx context.Context, id int, base, key string, cfg *WSConfig) (*wsClient, error) {
	d := websocket.Dialer{HandshakeTimeout: cfg.SubscribeTimeout}
	conn, _, err := d.DialContext(ctx, wsURL(base), nil)
	if err != nil {
		return nil, err
	}
	c := &wsClient{id: id, conn: conn, done: make(chan struct{}), series: map[string]*sampleSet{}}
	fail := func(err error) (*wsClient, error) {
		_ = conn.Close()
		return nil, err
	}
	var frames []any
	if key != "" {
		frames = append(frames, map[string]string{"op": "auth", "apiKey": key}, map[string]string{"op": "subscribe", "channel": "account"})
	}
	for _, f := range cfg.Feeds {
		frames = append(frames, map[string]string{"op": "subscribe", "channel": "prices", "feedId": f})
	}
	for _, m := range cfg.Markets {
		frames = append(frames, map[string]string{"op": "subscribe", "channel": "stats", "marketId": m})
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetWriteDeadline(deadline)
	for _, f := range frames {
		if err := conn.WriteJSON(f); err != nil {
			return fail(err)
		}
	}
	// Wait for the acknowledgements; events may arrive in between.
	want := len(cfg.Feeds) + len(cfg.Markets)
	if key != "" {
		want++
	}
	_ = conn.SetReadDeadline(deadline)
	for got := 0; got < want; {
		var f struct {
			Op    string `json:"op"`
			Code  string `json:"code"`
			Error string `json:"error"`
		}
		if err := conn.ReadJSON(&f); err != nil {
			return fail(err)
		}
		switch f.Op {
		case "subscribed":
			got++
		case "error":
			return fail(fmt.Errorf("refused: %s (%s)", f.Error, f.Code))
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	_ = conn.SetWriteDeadline(time.Time{})
	return c, nil
}

// start runs the client's read loop.
func (c *wsClient) start(win *window) {
	go func() {
		defer close(c.done)
		rng := rand.New(rand.NewPCG(uint64(c.id), 0x5eed))
		get := func(name string) *sampleSet {
			s := c.series[name]
			if s == nil {
				s = &sampleSet{rng: rng}
				c.series[name] = s
			}
			return s
		}
		var buf bytes.Buffer
		for {
			_, r, err := c.conn.NextReader()
			if err == nil {
				buf.Reset()
				_, err = buf.ReadFrom(r)
			}
			if err != nil {
				if !c.closed.Load() {
					var ce *websocket.CloseError
					if errors.As(err, &ce) {
						c.endedBy = fmt.Sprint(ce.Code)
					} else {
						c.endedBy = "error"
					}
				}
				return
			}
			at := time.Now()
			if at.Before(win.from) || !at.Before(win.to) {
				continue
			}
			ev, ok := readEvent(buf.Bytes())
			if !ok {
				continue
			}
			nowUs := at.UnixMicro()
			lat := time.Duration(nowUs-ev.tsMs*1000) * time.Microsecond
			get(SeriesAll).add(lat)
			get(ev.channel).add(lat)
			if ev.channel == "prices" && ev.printTsMs > 0 {
				get(SeriesPriceOracle).add(time.Duration(nowUs-ev.printTsMs*1000) * time.Microsecond)
			}
		}
	}()
}

// event is what the clients measure of an event frame.
type event struct {
	channel   string
	tsMs      int64 // the frame's log time
	printTsMs int64 // a price frame's oracle time (data.tsMs)
}

// readEvent reads an event frame; ok is false for any other frame. The
// clients read tens of thousands of frames a second on the machine that
// runs the nodes, so it first looks for the fields in the text before
// "data" (the frame's own fields: ids and numbers, never a quote) and only
// decodes the JSON when they are not all there.
func readEvent(msg []byte) (event, bool) {
	if d := bytes.Index(msg, []byte(`"data":`)); d > 0 {
		head := msg[:d]
		ch, okCh := stringField(head, `"channel":"`)
		ts, okTs := stringField(head, `"tsMs":"`)
		if bytes.Contains(head, []byte(`"op":"event"`)) && okCh && okTs {
			ev := event{channel: string(ch)}
			if v, err := wire.ParseDecimal(string(ts)); err == nil {
				ev.tsMs = v
				if ev.channel == "prices" {
					if p, ok := stringField(msg[d:], `"tsMs":"`); ok {
						ev.printTsMs, _ = wire.ParseDecimal(string(p))
					}
				}
				return ev, true
			}
		}
	}
	var f struct {
		Op      string          `json:"op"`
		Channel string          `json:"channel"`
		TsMs    wire.Int        `json:"tsMs"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(msg, &f) != nil || f.Op != "event" {
		return event{}, false
	}
	ev := event{channel: f.Channel, tsMs: int64(f.TsMs)}
	var print struct {
		TsMs wire.Int `json:"tsMs"`
	}
	if f.Channel == "prices" && json.Unmarshal(f.Data, &print) == nil {
		ev.printTsMs = int64(print.TsMs)
	}
	return ev, true
}

// stringField is the text between key (which ends with the opening quote)
// and the next quote.
func stringField(b []byte, key string) ([]byte, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, false
	}
	return rest[:j], true
}

// close ends the socket, once; the read loop, if started, then returns.
func (c *wsClient) close() {
	if c.closed.Swap(true) {
		return
	}
	_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = c.conn.Close()
}

// summarizeClients merges every client's series; measured is the window.
func (r *WSResult) summarizeClients(clients []*wsClient, measured time.Duration) {
	merged := map[string]*sampleSet{}
	weighted := map[string][]weightedSample{}
	for _, c := range clients {
		<-c.done
		if c.endedBy != "" {
			r.Closed[c.endedBy]++
		}
		for name, s := range c.series {
			m := merged[name]
			if m == nil {
				m = &sampleSet{}
				merged[name] = m
			}
			m.n += s.n
			m.sum += s.sum
			m.max = max(m.max, s.max)
			m.negatives += s.negatives
			// Each client's reservoir stands for its s.n frames: keep
			// them all (bounded by clients x wsSamplesPerClient), each
			// weighing the frames it stands for. Unweighted, a client
			// whose reservoir overflowed counted as much as one that
			// got a fraction of its frames.
			if len(s.samples) > 0 {
				w := float64(s.n) / float64(len(s.samples))
				for _, d := range s.samples {
					weighted[name] = append(weighted[name], weightedSample{d, w})
				}
			}
		}
	}
	for name, m := range merged {
		ws := weighted[name]
		sort.Slice(ws, func(i, j int) bool { return ws[i].d < ws[j].d })
		s := WSSeries{Frames: m.n, P50Ms: ms(weightedPercentile(ws, 50)), P90Ms: ms(weightedPercentile(ws, 90)),
			P99Ms: ms(weightedPercentile(ws, 99)), MaxMs: ms(m.max), Negatives: m.negatives}
		if measured > 0 {
			s.PerSec = round3(float64(m.n) / measured.Seconds())
		}
		if m.n > 0 {
			s.MeanMs = ms(m.sum / time.Duration(m.n))
		}
		r.Series[name] = s
	}
}

// weightedSample is a kept latency and how many frames it stands for.
type weightedSample struct {
	d time.Duration
	w float64
}

// weightedPercentile is Percentile over samples sorted by latency, each
// counted w times: the smallest sample with at least p% of the weight at
// or below it. With every weight 1 it is Percentile. Empty: 0.
func weightedPercentile(sorted []weightedSample, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	total := 0.0
	for _, s := range sorted {
		total += s.w
	}
	want, cum := p/100*total, 0.0
	for _, s := range sorted {
		if cum += s.w; cum >= want {
			return s.d
		}
	}
	return sorted[len(sorted)-1].d
}

// WriteTable prints the result: the connection summary and one line per
// latency series.
func (r *WSResult) WriteTable(w io.Writer) error {
	all := r.Series[SeriesAll]
	fmt.Fprintf(w, "perpd bench ws: %d of %d clients on %d node(s) (%d on account), %d traders, tier %s; measured %.1fs after %.1fs warmup%s\n",
		r.ClientsConnected, r.Config.Clients, len(r.Config.Nodes), r.Config.AccountClients, r.Config.Traders, r.Tier,
		float64(r.DurationMs)/1000, float64(r.Config.WarmupMs)/1000, map[bool]string{true: " (interrupted)"}[r.Interrupted])
	fmt.Fprintf(w, "fan-out: %d frames, %.1f frames/s; orders %d ok (%.1f/s, p99 %.2f ms), errors %s; sockets closed early: %s\n",
		all.Frames, all.PerSec, r.Orders.OK, r.Orders.OKPerSec, r.Orders.P99Ms, errorList(r.Orders.Errors), errorList(r.Closed))
	names := make([]string, 0, len(r.Series))
	for n := range r.Series {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-14s %10s %10s %8s %8s %8s %8s %8s\n", "series", "frames", "frames/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms")
	for _, n := range names {
		s := r.Series[n]
		fmt.Fprintf(w, "%-14s %10d %10.1f %8.2f %8.2f %8.2f %8.2f %8.2f\n", n, s.Frames, s.PerSec, s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs, s.MeanMs)
	}
	return nil
}
