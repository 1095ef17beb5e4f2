package workload

import (
	"context"
	"math/rand"
	"strconv"
	"sync"
	"time"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
)

// Triggers and brackets: traders place stops and take-profits (some
// reduce-only, in both request forms), entry triggers, and brackets with a
// market or trigger entry and one or two legs, some of them partial. Every
// level is 1-3% from the last mid the workload read, on the market's tick,
// on the side the engine requires (a level already reached is refused
// with 400, which is a certain failure like any other). They are placed
// through placeOrder, so an unknown outcome is retried with the same key,
// and the ids they create (and some leg ids) join the trader's resting set
// for cancels. The harness moves the oracle price (harness/trading.go) so
// that levels this far away are really reached during a run.

const (
	// levelMinBp and levelMaxBp bound how far from the mid a level is.
	levelMinBp = 100
	levelMaxBp = 300
	// partialLegOneIn: one leg in this many gets a partial size.
	partialLegOneIn = 3
	// midReadTimeout bounds the price read before a placement; a node
	// that does not answer in time leaves the newest mid already read.
	midReadTimeout = time.Second
)

// priceBook is the newest mid per market any process read.
type priceBook struct {
	mu   sync.Mutex
	mids map[string]int64
}

func (b *priceBook) set(market string, midQ8 int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mids == nil {
		b.mids = map[string]int64{}
	}
	b.mids[market] = midQ8
}

func (b *priceBook) get(market string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.mids[market]
	return v, ok
}

// currentMid reads the market's mid from p's node (GET /v1/markets, a
// public read the checkers do not model, so it is not recorded), falling
// back to the newest mid any process read, then to the starting mid.
func currentMid(ctx context.Context, e *Env, p *Process, m MarketInfo) int64 {
	octx, cancel := context.WithTimeout(ctx, midReadTimeout)
	defer cancel()
	if _, raw := e.Client.Markets(octx, p.Node); raw != nil {
		if ms, err := marketInfos(raw); err == nil {
			for _, x := range ms {
				e.prices.set(x.ID, x.MidQ8)
			}
		}
	}
	if v, ok := e.prices.get(m.ID); ok {
		return v
	}
	return m.MidQ8
}

// levelAway is a level about bp basis points above (up) or below the
// mid, on the tick, at least one tick away from it and never below one
// tick.
func levelAway(m MarketInfo, midQ8, bp int64, up bool) int64 {
	d := midQ8 / 10_000 * bp
	if up {
		lv := (midQ8 + d + m.TickQ8 - 1) / m.TickQ8 * m.TickQ8
		if lv <= midQ8 {
			lv += m.TickQ8
		}
		return lv
	}
	lv := (midQ8 - d) / m.TickQ8 * m.TickQ8
	if lv >= midQ8 {
		lv -= m.TickQ8
	}
	return max(lv, m.TickQ8)
}

func awayBp(rng *rand.Rand) int64 { return levelMinBp + rng.Int63n(levelMaxBp-levelMinBp+1) }

// rises reports whether a trigger of kind on side fires on a rising
// price: a stop buys on a rise and sells on a fall, a take-profit the
// other way round.
func rises(kind string, buy bool) bool { return (kind == history.KindStop) == buy }

func q8(v int64) *string {
	s := strconv.FormatInt(v, 10)
	return &s
}

// PlaceStop places a stop or a take-profit, half of them reduce-only,
// half as type stop_market / take_profit_market with triggerPriceQ8 and
// half as a market order with a trigger block.
func PlaceStop(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if len(e.Markets) == 0 {
		return ReadBalance(ctx, e, p, acct)
	}
	m := e.Markets[p.Rand.Intn(len(e.Markets))]
	kind := history.KindStop
	if p.Rand.Intn(2) == 0 {
		kind = history.KindTakeProfit
	}
	s := side(p.Rand)
	buy := s == "buy"
	mid := currentMid(ctx, e, p, m)
	level := levelAway(m, mid, awayBp(p.Rand), rises(kind, buy))
	body := client.OrderRequest{MarketID: m.ID, Side: s, Contracts: size(p.Rand, m), ReduceOnly: p.Rand.Intn(2) == 0}
	if p.Rand.Intn(2) == 0 {
		body.Type, body.TriggerPriceQ8 = "stop_market", q8(level)
		if kind == history.KindTakeProfit {
			body.Type = "take_profit_market"
		}
	} else {
		body.Type, body.Trigger = "market", &client.OrderTrigger{Kind: kind, Level: *q8(level)}
	}
	return placeOrder(ctx, e, p, acct, body)
}

// PlaceEntry places an entry trigger above or below the mid.
func PlaceEntry(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if len(e.Markets) == 0 {
		return ReadBalance(ctx, e, p, acct)
	}
	m := e.Markets[p.Rand.Intn(len(e.Markets))]
	level := levelAway(m, currentMid(ctx, e, p, m), awayBp(p.Rand), p.Rand.Intn(2) == 0)
	body := client.OrderRequest{MarketID: m.ID, Side: side(p.Rand), Type: "market", Contracts: size(p.Rand, m),
		Trigger: &client.OrderTrigger{Kind: history.KindEntry, Level: *q8(level)}}
	return placeOrder(ctx, e, p, acct, body)
}

// PlaceBracket places a bracket: a market entry or an entry trigger, and
// a stop, a take-profit or both beyond the entry (the mid, or the entry
// level), some of partial size.
func PlaceBracket(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if len(e.Markets) == 0 {
		return ReadBalance(ctx, e, p, acct)
	}
	m := e.Markets[p.Rand.Intn(len(e.Markets))]
	s := side(p.Rand)
	buy := s == "buy"
	contracts := size(p.Rand, m)
	n, _ := strconv.ParseInt(contracts, 10, 64)
	ref := currentMid(ctx, e, p, m)
	b := &client.OrderBracket{EntryKind: "market"}
	if p.Rand.Intn(2) == 0 {
		ref = levelAway(m, ref, awayBp(p.Rand), p.Rand.Intn(2) == 0)
		b.EntryKind, b.EntryLevel = "trigger", q8(ref)
	}
	legs := p.Rand.Intn(4) // 0, 1: both legs; 2: stop only; 3: take-profit only
	leg := func(kind string) (level, partial *string) {
		// The legs sell a long (buy entry): the stop below, the
		// take-profit above; mirrored for a short.
		level = q8(levelAway(m, ref, awayBp(p.Rand), rises(kind, !buy)))
		if p.Rand.Intn(partialLegOneIn) == 0 && n > m.MinContracts {
			partial = q8(m.MinContracts + p.Rand.Int63n(n-m.MinContracts))
		}
		return level, partial
	}
	if legs != 3 {
		b.StopLevel, b.StopContracts = leg(history.KindStop)
	}
	if legs != 2 {
		b.TakeProfitLevel, b.TakeProfitContracts = leg(history.KindTakeProfit)
	}
	body := client.OrderRequest{MarketID: m.ID, Side: s, Type: "market", Contracts: contracts, Bracket: b}
	return placeOrder(ctx, e, p, acct, body)
}

// orderSpec is what body asks for, for the checkers (nil when a number in
// it does not parse, which the workload never sends).
func orderSpec(id string, b client.OrderRequest) *history.OrderSpec {
	num := func(s *string) int64 {
		if s == nil {
			return 0
		}
		v, _ := strconv.ParseInt(*s, 10, 64)
		return v
	}
	contracts, err := strconv.ParseInt(b.Contracts, 10, 64)
	if err != nil {
		return nil
	}
	spec := &history.OrderSpec{Market: b.MarketID, Buy: b.Side == "buy", Contracts: contracts, ReduceOnly: b.ReduceOnly, Kind: b.Type,
		Leverage: num(b.Leverage)}
	switch {
	case b.Type == "stop_market":
		spec.Kind, spec.LevelQ8 = history.KindStop, num(b.TriggerPriceQ8)
	case b.Type == "take_profit_market":
		spec.Kind, spec.LevelQ8 = history.KindTakeProfit, num(b.TriggerPriceQ8)
	case b.Trigger != nil:
		spec.Kind, spec.LevelQ8 = b.Trigger.Kind, num(&b.Trigger.Level)
	case b.Bracket != nil:
		spec.Kind, spec.LevelQ8 = history.KindBracket, num(b.Bracket.EntryLevel)
		addLeg := func(suffix, kind string, level, contracts *string) {
			if level == nil {
				return
			}
			n := num(contracts)
			if n == 0 {
				n = spec.Contracts
			}
			spec.Legs = append(spec.Legs, history.LegSpec{ID: id + suffix, Kind: kind, LevelQ8: num(level), Contracts: n})
		}
		addLeg(client.StopLegSuffix, history.KindStop, b.Bracket.StopLevel, b.Bracket.StopContracts)
		addLeg(client.TakeProfitLegSuffix, history.KindTakeProfit, b.Bracket.TakeProfitLevel, b.Bracket.TakeProfitContracts)
	}
	return spec
}

// mayRest lists the ids a placement may have left live, for cancels to
// pick: a limit order answered resting, a trigger answered working, a
// bracket and, half the time, one of its legs; everything placed with an
// unknown outcome.
func mayRest(rng *rand.Rand, id string, spec *history.OrderSpec, t history.Type, status string) []string {
	if t != history.OK && t != history.Info {
		return nil
	}
	switch {
	case spec == nil:
		return nil
	case spec.Kind == history.KindBracket:
		ids := []string{id}
		if len(spec.Legs) > 0 && rng.Intn(2) == 0 {
			ids = append(ids, spec.Legs[rng.Intn(len(spec.Legs))].ID)
		}
		return ids
	case t == history.Info && spec.Kind != history.KindMarket,
		spec.Kind == history.KindLimit && status == "resting",
		spec.IsTrigger() && status == "working":
		return []string{id}
	}
	return nil
}
