package oracle

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/node"
)

// Leader is what the oracle driver needs from the node it runs on. The
// node's implementation is NodeLeader; tests drive a Machine directly.
type Leader interface {
	// IsLeader reports whether this node leads right now.
	IsLeader() bool
	// Term is the current raft term. A change means leadership may have
	// moved, so the source must be resynchronised from the state.
	Term() uint64
	// Barrier returns once every entry committed before the call has been
	// applied locally, so reads that follow see the previous leader's last
	// prints.
	Barrier() error
	// Read runs fn with the node's applied state; fn must not keep it.
	Read(fn func(st *fsm.State))
	// Propose applies an internal command through the log.
	Propose(t fsm.CmdType, payload any) (*fsm.Result, error)
}

// barrierTimeout bounds the wait for a new leader to apply the old leader's
// entries; past it the driver tries again on the next tick.
const barrierTimeout = 2 * time.Second

type nodeLeader struct{ n *node.Node }

// NodeLeader adapts a node to Leader.
func NodeLeader(n *node.Node) Leader { return nodeLeader{n} }

func (l nodeLeader) IsLeader() bool { return l.n.IsLeader() }
func (l nodeLeader) Term() uint64   { return l.n.Raft.CurrentTerm() }
func (l nodeLeader) Barrier() error { return l.n.Raft.Barrier(barrierTimeout).Error() }
func (l nodeLeader) Read(fn func(st *fsm.State)) {
	l.n.Machine().Read(func(st *fsm.State, _ uint64) { fn(st) })
}
func (l nodeLeader) Propose(t fsm.CmdType, payload any) (*fsm.Result, error) {
	return l.n.ProposeInternal(t, payload)
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// Feeds are the simulated underlyings (nil: DefaultFeeds).
	Feeds map[string]FeedConfig
	// Now is the node's clock in ms (nil: the wall clock).
	Now    func() int64
	Logger hclog.Logger
}

// Driver is the leader-side oracle loop: on every tick of the leader it
// proposes one print per feed of the replicated market book.
//
// Its source is a Pinned wrapper around a SimSource seeded with the
// cluster's genesis seed, built on the first tick after genesis. Operator
// pins and scripts are replicated (fsm.CmdOraclePin and friends); the
// driver mirrors them into the Pinned wrapper each tick, so a new leader
// keeps playing them. When the raft term changes it first waits for the
// previous leader's entries to apply and then resumes every feed from its
// last committed print, so prices continue rather than jump back.
type Driver struct {
	cfg DriverConfig
	log hclog.Logger

	mu  sync.Mutex
	src *Pinned
	// term is the raft term the source was last synchronised in; synced is
	// false until the first synchronisation and after a refused print.
	term   uint64
	synced bool
	// installed maps a feed to the SetIndex of the override mirrored into
	// src (absent: none).
	installed map[string]uint64
	warned    map[string]bool
}

// NewDriver checks the feed configuration and returns a driver.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.Feeds == nil {
		cfg.Feeds = DefaultFeeds()
	}
	if _, err := NewSim(0, cfg.Feeds); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixMilli() }
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Driver{cfg: cfg, log: log, installed: map[string]uint64{}, warned: map[string]bool{}}, nil
}

// NodeDriver returns the function to register with node.AddLeaderDriver.
func (d *Driver) NodeDriver() func(*node.Node) {
	return func(n *node.Node) { d.Tick(NodeLeader(n)) }
}

// feedState is what one tick needs to know about a feed.
type feedState struct {
	id       string
	last     market.Print
	hasLast  bool
	override market.Override
	pinned   bool
}

// Tick proposes this tick's prints. It returns without proposing when the
// node does not lead, before genesis and the market listing, or when the
// new term's barrier has not completed.
func (d *Driver) Tick(l Leader) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !l.IsLeader() {
		return
	}
	var seed uint64
	var ready bool
	l.Read(func(st *fsm.State) {
		if st.Genesis != nil && len(st.Market.MarketsByID) > 0 {
			seed, ready = st.Genesis.Seed, true
		}
	})
	if !ready {
		return
	}
	if d.src == nil {
		sim, err := NewSim(seed, d.cfg.Feeds)
		if err != nil {
			d.log.Error("oracle source", "err", err)
			return
		}
		d.src = NewPinned(sim)
	}
	term := l.Term()
	if !d.synced || term != d.term {
		if err := l.Barrier(); err != nil {
			d.log.Warn("oracle waits for the previous leader's entries", "err", err)
			return
		}
		d.resume(d.snapshot(l))
		d.term, d.synced = term, true
	}
	feeds, stNow := d.snapshot(l), int64(0)
	l.Read(func(st *fsm.State) { stNow = st.NowMs })
	d.mirrorOverrides(feeds)
	for _, f := range feeds {
		// The entry carrying this print is stamped max(clock, state time)
		// by the leader, so a print stamped the same way is never ahead of
		// log time; a clock behind the last print skips the tick instead.
		now := max(d.cfg.Now(), stNow)
		if f.hasLast && now <= f.last.TsMs {
			continue
		}
		p, err := d.src.Next(f.id, now)
		switch {
		case errors.Is(err, ErrNotAdvanced):
			continue
		case err != nil:
			if !d.warned[f.id] {
				d.warned[f.id] = true
				d.log.Warn("oracle feed has no source; its markets stay stale", "feed", f.id, "err", err)
			}
			continue
		}
		if !l.IsLeader() || l.Term() != d.term {
			return // deposed mid-tick: the next leader prints
		}
		res, err := l.Propose(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: f.id, MidQ8: p.MidQ8, ConfQ9: p.ConfQ9, TsMs: p.TsMs})
		if err != nil {
			d.log.Debug("oracle print not committed", "feed", f.id, "err", err)
			continue
		}
		if !res.OK() {
			// Another leader printed past this source: resynchronise.
			d.log.Info("oracle print refused; resuming from the state", "feed", f.id, "body", string(res.Body))
			d.synced = false
		}
	}
}

// snapshot reads every feed's last print and override, in feed id order.
func (d *Driver) snapshot(l Leader) []feedState {
	var out []feedState
	l.Read(func(st *fsm.State) {
		for _, id := range st.Market.FeedIDs() {
			f := feedState{id: id}
			f.last, f.hasLast = st.Market.FeedLast(id)
			f.override, f.pinned = st.Market.FeedOverride(id)
			out = append(out, f)
		}
	})
	return out
}

// resume restarts every feed from its last committed print.
func (d *Driver) resume(feeds []feedState) {
	for _, f := range feeds {
		if !f.hasLast {
			continue // never printed: the source starts at its start price
		}
		if err := d.src.Resume(f.id, f.last.MidQ8, f.last.TsMs); err != nil && !errors.Is(err, ErrUnknownFeed) {
			d.log.Warn("oracle resume", "feed", f.id, "err", err)
		}
	}
}

// mirrorOverrides makes the Pinned wrapper hold exactly the replicated
// overrides.
func (d *Driver) mirrorOverrides(feeds []feedState) {
	for _, f := range feeds {
		have, installed := d.installed[f.id]
		switch {
		case !f.pinned && installed:
			if err := d.src.Unpin(f.id); err != nil && !errors.Is(err, ErrUnknownFeed) {
				d.log.Warn("oracle unpin", "feed", f.id, "err", err)
			}
			// Continue from the committed print, as a new leader would:
			// the override's own last print may be one the FSM held past
			// the jump guard (or refused), and a walk resumed from it
			// confirms the jump the operator just withdrew.
			if f.hasLast {
				if err := d.src.Resume(f.id, f.last.MidQ8, f.last.TsMs); err != nil && !errors.Is(err, ErrUnknownFeed) {
					d.log.Warn("oracle resume after unpin", "feed", f.id, "err", err)
				}
			}
			delete(d.installed, f.id)
		case f.pinned && (!installed || have != f.override.SetIndex):
			if err := d.install(f.id, f.override); err != nil {
				d.log.Warn("oracle override", "feed", f.id, "err", err)
				continue
			}
			d.installed[f.id] = f.override.SetIndex
		}
	}
}

func (d *Driver) install(feedID string, o market.Override) error {
	if o.Mode == market.OverridePin {
		return d.src.Pin(feedID, o.Points[0].MidQ8)
	}
	pts := make([]ScriptPoint, len(o.Points))
	for i, p := range o.Points {
		pts[i] = ScriptPoint{OffsetMs: p.OffsetMs, MidQ8: p.MidQ8}
	}
	interp := Step
	if o.Mode == market.OverrideLinear {
		interp = Linear
	}
	return d.src.Script(feedID, o.StartMs, pts, interp)
}

// StartPricesQ8 returns the first price of every configured feed: the
// anchors of the seeded pre-launch history, so the chart joins the first
// real print.
func (d *Driver) StartPricesQ8() map[string]int64 {
	out := make(map[string]int64, len(d.cfg.Feeds))
	for id, c := range d.cfg.Feeds {
		out[id] = c.StartMidQ8
	}
	return out
}
