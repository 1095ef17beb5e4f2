package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// tradeWorld is a replica with the default markets, fresh prints and funded
// accounts, driven the way the HTTP layer and the oracle driver drive it.
// After every entry it checks the trading book against the ledger and the
// markets' open interest (the ledger's own check runs in the machine).
type tradeWorld struct {
	*replica
	ts     int64
	n      int
	events []Event
	// log keeps every entry's bytes, so a mirror replica can catch up;
	// mirror, when set, applies each entry too and must answer the same
	// (trade_sim_test.go), with state hashes compared every hashEvery.
	log       [][]byte
	mirror    *replica
	hashEvery int
	// unchecked skips the after-entry invariant check (a test that
	// stuffs the state with stand-ins the check would not accept).
	unchecked bool
	// keepLog keeps every entry in log also once a mirror follows.
	keepLog bool
}

const btcBTC = int64(100_000_000_000) // 1 BTC in msat

func usdQ8(d int64) int64 { return d * market.Q8 }

func newTradeWorld(t *testing.T) *tradeWorld {
	w := &tradeWorld{replica: newMarketReplica(t), ts: mktLaunchMs}
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	wantOK(t, w.print("ETHUSD", usdQ8(3_400)))
	return w
}

func (w *tradeWorld) at(cmd *Command) *Result {
	w.t.Helper()
	w.ts++
	cmd.TsMs = w.ts
	b, err := cmd.Encode()
	if err != nil {
		w.t.Fatal(err)
	}
	res, evs := w.m.Apply(w.next, b)
	w.next++
	w.events = append(w.events, evs...)
	w.check()
	if w.mirror != nil {
		w.toMirror(b, res)
		if w.keepLog {
			w.log = append(w.log, b)
		}
	} else {
		w.log = append(w.log, b)
	}
	return res
}

func (w *tradeWorld) check() {
	w.t.Helper()
	if w.unchecked {
		return
	}
	w.m.Read(func(st *State, _ uint64) {
		if w.m.opts.CheckInvariants {
			// The machine has just run CheckInvariants without the open
			// interest on this state (apply_trade.go), after every
			// command of the entry; only the open interest is left.
			if err := checkOpenInterest(st); err != nil {
				w.t.Fatal(err)
			}
			return
		}
		if err := st.Trade.CheckInvariants(st.Ledger, st.Market, true, st.NowMs); err != nil {
			w.t.Fatal(err)
		}
	})
}

// checkOpenInterest is what trade.State.CheckInvariants adds with withOI:
// each market's open interest is the sum of its positions.
func checkOpenInterest(st *State) error {
	oi := map[string][2]int64{}
	for _, a := range st.Trade.Accounts {
		for mid, p := range a.Positions {
			v := oi[mid]
			if p.Side == trade.Long {
				v[0] += p.Contracts
			} else {
				v[1] += p.Contracts
			}
			oi[mid] = v
		}
	}
	for mid, ms := range st.Market.MarketsByID {
		if v := oi[mid]; ms.LongOIContracts != v[0] || ms.ShortOIContracts != v[1] {
			return fmt.Errorf("market %s: open interest %d/%d, positions %d/%d", mid, ms.LongOIContracts, ms.ShortOIContracts, v[0], v[1])
		}
	}
	return nil
}

func (w *tradeWorld) print(feed string, midQ8 int64) *Result {
	w.t.Helper()
	return w.at(mustCommand(w.t, CmdOraclePrint, 0, OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: w.ts + 1}))
}

func (w *tradeWorld) account(msat int64) (string, string) {
	w.t.Helper()
	w.n++
	acct, key := fmt.Sprintf("acc_%d", w.n), fmt.Sprintf("key_%d", w.n)
	sum := sha256.Sum256([]byte(key))
	wantOK(w.t, w.at(mustCommand(w.t, CmdSignup, 0, access.NewAccount{AccountID: acct, KeyID: key, KeyHashHex: hex.EncodeToString(sum[:])})))
	if msat > 0 {
		wantOK(w.t, w.at(mustCommand(w.t, CmdDepositSettled, 0, funds.Settlement{AccountID: acct, AmountMsat: msat,
			RailRef: "spark-in-" + acct, Path: funds.PathSpark})))
	}
	return acct, key
}

// order places r for acct under the idempotency key r.OrderID, whose
// request hash covers the whole body.
func (w *tradeWorld) order(acct, key string, r trade.PlaceRequest) *Result {
	w.t.Helper()
	c := mustCommand(w.t, CmdPlaceOrder, 0, r)
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+r.OrderID, []byte(fmt.Sprintf("%+v", r))
	return w.at(c)
}

func (w *tradeWorld) cancel(acct, key, orderID, idem string) *Result {
	w.t.Helper()
	c := mustCommand(w.t, CmdCancelOrder, 0, CancelOrderPayload{OrderID: orderID})
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+idem, []byte("DELETE "+orderID)
	return w.at(c)
}

func mktOrder(id, mkt, side string, n int64) trade.PlaceRequest {
	return trade.PlaceRequest{OrderID: id, MarketID: mkt, Side: side, Type: trade.TypeMarket, Contracts: n}
}

func limitOrder(id, mkt, side string, n, limitQ8 int64) trade.PlaceRequest {
	return trade.PlaceRequest{OrderID: id, MarketID: mkt, Side: side, Type: trade.TypeLimit, Contracts: n, LimitPriceQ8: limitQ8}
}

func (w *tradeWorld) balance(account string) (b int64) {
	w.m.Read(func(st *State, _ uint64) { b = st.Ledger.Balance(account) })
	return b
}

func (w *tradeWorld) position(acct, mkt string) (p trade.Position) {
	w.m.Read(func(st *State, _ uint64) { p = st.Trade.Position(acct, mkt) })
	return p
}

func (w *tradeWorld) lastFill(acct string) (f trade.Fill) {
	w.t.Helper()
	w.m.Read(func(st *State, _ uint64) {
		a := st.Trade.Accounts[acct]
		if a == nil || len(a.Fills) == 0 {
			w.t.Fatalf("%s has no fill", acct)
		}
		f = *a.Fills[len(a.Fills)-1]
	})
	return f
}

func (w *tradeWorld) orderOf(acct, id string) (o trade.Order) {
	w.t.Helper()
	w.m.Read(func(st *State, _ uint64) {
		oo, ok := st.Trade.Order(acct, id)
		if !ok {
			w.t.Fatalf("no order %s/%s", acct, id)
		}
		o = *oo
	})
	return o
}

func created(t *testing.T, res *Result, status string) {
	t.Helper()
	if res.Status != http.StatusCreated {
		t.Fatalf("status %d body %s", res.Status, res.Body)
	}
	var c trade.Created
	if err := res.Decode(&c); err != nil || c.Status != status {
		t.Fatalf("created %s, want status %s", res.Body, status)
	}
}

func TestMarketOrderRoundTripMovesEveryMsatThroughTheLedger(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, mktOrder("o1", "BTC-PERP", "buy", 100_000)), trade.StatusFilled)
	open := w.lastFill(acct)
	p := w.position(acct, "BTC-PERP")
	if open.Opened != 100_000 || open.Closed != 0 || p.Side != trade.Long || p.Contracts != 100_000 || p.EntryQ8 != open.ExecQ8 {
		t.Fatalf("fill %+v position %+v", open, p)
	}
	// Buy above mid: 100,000 * (1 + 0.02% + impact) rounded up to 0.5 USD.
	if open.ExecQ8 <= usdQ8(100_000) || open.ExecQ8%market.DefaultCatalogue()[0].TickSizeQ8 != 0 {
		t.Fatalf("exec %d", open.ExecQ8)
	}
	if got := w.balance(ledger.Margin(acct, "BTC-PERP")); got != p.MarginMsat || got == 0 {
		t.Fatalf("margin balance %d, position %d", got, p.MarginMsat)
	}
	if got := w.balance(ledger.Free(acct)); got != btcBTC-p.MarginMsat-open.FeeMsat {
		t.Fatalf("free %d after margin %d and fee %d", got, p.MarginMsat, open.FeeMsat)
	}
	if got := w.balance(ledger.FeeRevenue); got != open.FeeMsat {
		t.Fatalf("fee revenue %d", got)
	}
	if m := w.market().MarketsByID["BTC-PERP"]; m.LongOIContracts != 100_000 || m.ShortOIContracts != 0 || m.SkewQ9() != market.Q9 {
		t.Fatalf("open interest %d/%d", m.LongOIContracts, m.ShortOIContracts)
	}

	wantOK(t, w.print("BTCUSD", usdQ8(110_000)))
	created(t, w.order(acct, key, mktOrder("o2", "BTC-PERP", "sell", 100_000)), trade.StatusFilled)
	closing := w.lastFill(acct)
	pnl, _ := trade.PnLMsat(&market.DefaultCatalogue()[0], trade.Long, 100_000, open.ExecQ8, closing.ExecQ8)
	if closing.Closed != 100_000 || closing.RealizedPnlMsat != pnl || pnl <= 0 || closing.ReleasedMarginMsat != p.MarginMsat {
		t.Fatalf("closing fill %+v, want pnl %d", closing, pnl)
	}
	if w.position(acct, "BTC-PERP").Contracts != 0 || w.balance(ledger.Margin(acct, "BTC-PERP")) != 0 {
		t.Fatal("position not flat")
	}
	if got, want := w.balance(ledger.Free(acct)), btcBTC+pnl-open.FeeMsat-closing.FeeMsat; got != want {
		t.Fatalf("free %d, want %d", got, want)
	}
	if got := w.balance(ledger.House); got != -pnl {
		t.Fatalf("house %d, want %d", got, -pnl)
	}
	if m := w.market().MarketsByID["BTC-PERP"]; m.LongOIContracts != 0 || m.ShortOIContracts != 0 {
		t.Fatal("open interest left behind")
	}
}

// Every change an account sees takes a fresh seq: fill, order, position.
func TestTradeEventsTakeFreshSeqs(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	w.events = nil
	created(t, w.order(acct, key, mktOrder("o1", "ETH-PERP", "sell", 50)), trade.StatusFilled)
	var kinds []string
	var last uint64
	for _, ev := range w.events {
		if ev.Account != acct {
			continue
		}
		if ev.Seq <= last {
			t.Fatalf("event %s seq %d after %d", ev.Kind, ev.Seq, last)
		}
		last = ev.Seq
		kinds = append(kinds, ev.Kind)
	}
	if fmt.Sprint(kinds) != "[fill order position]" {
		t.Fatalf("events %v", kinds)
	}
	f, o := w.lastFill(acct), w.orderOf(acct, "o1")
	if f.Seq != last-2 || o.Seq != last-1 {
		t.Fatalf("fill seq %d, order seq %d, last %d", f.Seq, o.Seq, last)
	}
}

// A flip closes the position and opens the other side in one fill.
func TestFlipIsCloseAndOpenInOneFill(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, mktOrder("o1", "ETH-PERP", "buy", 10)), trade.StatusFilled)
	created(t, w.order(acct, key, mktOrder("o2", "ETH-PERP", "sell", 30)), trade.StatusFilled)
	f := w.lastFill(acct)
	p := w.position(acct, "ETH-PERP")
	if f.Closed != 10 || f.Opened != 20 || p.Side != trade.Short || p.Contracts != 20 || f.After != p {
		t.Fatalf("fill %+v position %+v", f, p)
	}
	m := w.market().MarketsByID["ETH-PERP"]
	if m.LongOIContracts != 0 || m.ShortOIContracts != 20 {
		t.Fatalf("open interest %d/%d", m.LongOIContracts, m.ShortOIContracts)
	}
}

func TestLimitOrderRestsThenFillsWhenThePrintCrosses(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	limit := usdQ8(99_000)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, limit)), trade.StatusResting)
	o := w.orderOf(acct, "l1")
	want, _ := trade.Reservation(&market.DefaultCatalogue()[0], trade.Position{}, trade.Long, 1000, limit, 0, false)
	if o.Status != trade.StatusAccepted || o.ReservedMsat != want || w.balance(ledger.Reserved(acct)) != want {
		t.Fatalf("order %+v, reserved %d, want %d", o, w.balance(ledger.Reserved(acct)), want)
	}
	if w.balance(ledger.Free(acct)) != btcBTC-want {
		t.Fatal("free balance does not show the reservation")
	}
	wantOK(t, w.print("BTCUSD", usdQ8(99_500))) // above the limit: nothing
	if w.orderOf(acct, "l1").Status != trade.StatusAccepted {
		t.Fatal("filled above its limit")
	}
	// The mid reaches the limit, but the spread puts the buy above it: the
	// order keeps resting, and fills when the mid falls further.
	wantOK(t, w.print("BTCUSD", limit))
	if o := w.orderOf(acct, "l1"); o.Status != trade.StatusAccepted || o.LevelQ8 != limit-1 {
		t.Fatalf("at the limit: %+v", o)
	}
	wantOK(t, w.print("BTCUSD", usdQ8(98_900)))
	o = w.orderOf(acct, "l1")
	f := w.lastFill(acct)
	if o.Status != trade.StatusFilled || f.ExecQ8 > limit || f.ReservedMarginMsat != want || f.OrderID != "l1" {
		t.Fatalf("order %+v fill %+v", o, f)
	}
	if w.balance(ledger.Reserved(acct)) != 0 || w.position(acct, "BTC-PERP").Contracts != 1000 {
		t.Fatal("reservation or position wrong after the fill")
	}
}

func TestSellLimitOnQuantoFillsOnARise(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("s1", "ETH-PERP", "sell", 100, usdQ8(3_500))), trade.StatusResting)
	wantOK(t, w.print("ETHUSD", usdQ8(3_600)))
	f := w.lastFill(acct)
	if f.ExecQ8 < usdQ8(3_500) || w.position(acct, "ETH-PERP").Side != trade.Short {
		t.Fatalf("fill %+v", f)
	}
}

// A limit order already better than the market fills at once, at the
// market's execution price (no worse than its limit).
func TestMarketableLimitFillsAtOnce(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 10, usdQ8(101_000))), trade.StatusFilled)
	if f := w.lastFill(acct); f.ExecQ8 > usdQ8(101_000) || f.ReservedMarginMsat != 0 {
		t.Fatalf("fill %+v", f)
	}
}

func TestCancelReleasesTheReservation(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	other, otherKey := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	wantRefused(t, w.cancel(other, otherKey, "l1", "d0"), http.StatusNotFound, wire.CodeNotFound)
	wantRefused(t, w.cancel(acct, key, "nope", "d1"), http.StatusNotFound, wire.CodeNotFound)
	res := w.cancel(acct, key, "l1", "d2")
	var cr CancelResult
	if err := res.Decode(&cr); err != nil || !res.OK() || !cr.Canceled || cr.OrderID != "l1" {
		t.Fatalf("cancel: %d %s", res.Status, res.Body)
	}
	if w.balance(ledger.Reserved(acct)) != 0 || w.balance(ledger.Free(acct)) != btcBTC {
		t.Fatal("reservation not released")
	}
	res = w.cancel(acct, key, "l1", "d3")
	if err := res.Decode(&cr); err != nil || !res.OK() || cr.Canceled {
		t.Fatalf("second cancel: %d %s", res.Status, res.Body)
	}
	wantOK(t, w.print("BTCUSD", usdQ8(80_000)))
	if w.position(acct, "BTC-PERP").Contracts != 0 {
		t.Fatal("a canceled order filled")
	}
}

// A resting reduce-only order whose position is gone is canceled with the
// reason reduce_only when the price reaches it; one whose position shrank
// fills only what is left (it never flips).
func TestRestingReduceOnlyNeverIncreasesOrFlips(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, mktOrder("o1", "ETH-PERP", "buy", 100)), trade.StatusFilled)
	ro := limitOrder("tp", "ETH-PERP", "sell", 100, usdQ8(3_500))
	ro.ReduceOnly = true
	created(t, w.order(acct, key, ro), trade.StatusResting)
	ro2 := limitOrder("tp2", "ETH-PERP", "sell", 100, usdQ8(3_700))
	ro2.ReduceOnly = true
	created(t, w.order(acct, key, ro2), trade.StatusResting)
	created(t, w.order(acct, key, mktOrder("o2", "ETH-PERP", "sell", 60)), trade.StatusFilled)
	wantOK(t, w.print("ETHUSD", usdQ8(3_600)))
	if f := w.lastFill(acct); f.OrderID != "tp" || f.Closed != 40 || f.Opened != 0 {
		t.Fatalf("trimmed fill %+v", f)
	}
	wantOK(t, w.print("ETHUSD", usdQ8(3_800)))
	if o := w.orderOf(acct, "tp2"); o.Status != trade.StatusCanceled || o.Reason != wire.CodeReduceOnly {
		t.Fatalf("reduce-only order without a position: %+v", o)
	}
	if w.position(acct, "ETH-PERP").Contracts != 0 {
		t.Fatal("reduce-only order opened a position")
	}
}

func TestOrderIDIsTheIdempotencyKey(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	r := mktOrder("o1", "ETH-PERP", "buy", 10)
	created(t, w.order(acct, key, r), trade.StatusFilled)
	// A retry is answered from the idempotency store.
	if res := w.order(acct, key, r); !res.Replay {
		t.Fatalf("retry not replayed: %s", res.Body)
	}
	// Past the store (another scoped key), the order id still answers.
	c := mustCommand(t, CmdPlaceOrder, 0, r)
	c.Account, c.KeyID, c.IdemKey, c.ReqHash = acct, key, "other-scope:o1", []byte(fmt.Sprintf("%+v", r))
	created(t, w.at(c), trade.StatusFilled)
	c = mustCommand(t, CmdPlaceOrder, 0, r)
	c.Account, c.KeyID, c.IdemKey, c.ReqHash = acct, key, "other-scope2:o1", []byte("another body")
	wantRefused(t, w.at(c), http.StatusConflict, wire.CodeIdempotencyReused)
	if w.position(acct, "ETH-PERP").Contracts != 10 {
		t.Fatal("a retry filled twice")
	}
}

// refusedAsIs applies an order at the current log time (so that the clock
// does not move) and checks the refusal and that the state did not change.
func (w *tradeWorld) refusedAsIs(acct, key string, r trade.PlaceRequest, status int, code string) {
	w.t.Helper()
	before := w.hash()
	c := mustCommand(w.t, CmdPlaceOrder, w.ts, r)
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+r.OrderID, []byte(fmt.Sprintf("%+v", r))
	res, evs := w.applyEvents(c)
	wantRefused(w.t, res, status, code)
	if len(evs) != 0 {
		w.t.Fatalf("a refusal emitted %d events", len(evs))
	}
	if w.hash() != before {
		w.t.Fatalf("refused %+v changed the state", r)
	}
}

func (w *tradeWorld) setMarket(p MarketSetPayload) {
	w.t.Helper()
	wantOK(w.t, w.at(mustCommand(w.t, CmdMarketSet, 0, p)))
}

func TestOrderRefusalsChangeNothing(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	bad := http.StatusBadRequest
	with := func(r trade.PlaceRequest, f func(*trade.PlaceRequest)) trade.PlaceRequest { f(&r); return r }
	buy := mktOrder("x", "BTC-PERP", "buy", 10)
	for name, r := range map[string]trade.PlaceRequest{
		"side":                      with(buy, func(r *trade.PlaceRequest) { r.Side = "hold" }),
		"type":                      with(buy, func(r *trade.PlaceRequest) { r.Type = "fok" }),
		"no contracts":              with(buy, func(r *trade.PlaceRequest) { r.Contracts = 0 }),
		"above max contracts":       with(buy, func(r *trade.PlaceRequest) { r.Contracts = 1_000_001 }),
		"market with limit":         with(buy, func(r *trade.PlaceRequest) { r.LimitPriceQ8 = usdQ8(1) }),
		"limit without price":       with(buy, func(r *trade.PlaceRequest) { r.Type = trade.TypeLimit }),
		"limit off the tick":        limitOrder("x", "BTC-PERP", "buy", 10, usdQ8(99_000)+1),
		"no order id":               with(buy, func(r *trade.PlaceRequest) { r.OrderID = "" }),
		"slippage beyond spread":    with(buy, func(r *trade.PlaceRequest) { r.HasMaxSlippage, r.MaxSlippageQ9 = true, 0 }),
		"slippage out of range":     with(buy, func(r *trade.PlaceRequest) { r.HasMaxSlippage, r.MaxSlippageQ9 = true, market.Q9 }),
		"stop without level":        with(buy, func(r *trade.PlaceRequest) { r.Type = trade.TypeStopMarket }),
		"market with trigger price": with(buy, func(r *trade.PlaceRequest) { r.TriggerPriceQ8 = usdQ8(101_000) }),
		"limit with trigger": with(limitOrder("x", "BTC-PERP", "buy", 10, usdQ8(90_000)), func(r *trade.PlaceRequest) {
			r.TriggerKind, r.TriggerLevelQ8 = trade.KindStop, usdQ8(101_000)
		}),
		"stop with limit price": with(stopOrder("x", "BTC-PERP", "buy", 10, usdQ8(101_000)), func(r *trade.PlaceRequest) { r.LimitPriceQ8 = usdQ8(1) }),
		"trigger kind":          with(buy, func(r *trade.PlaceRequest) { r.TriggerKind, r.TriggerLevelQ8 = "trailing", usdQ8(101_000) }),
		"trigger without level": with(buy, func(r *trade.PlaceRequest) { r.TriggerKind = trade.KindEntry }),
		"trigger off the tick":  stopOrder("x", "BTC-PERP", "buy", 10, usdQ8(101_000)+1),
		"buy stop reached":      stopOrder("x", "BTC-PERP", "buy", 10, usdQ8(100_000)),
		"sell stop reached":     stopOrder("x", "BTC-PERP", "sell", 10, usdQ8(100_500)),
		"sell take-profit reached": with(stopOrder("x", "BTC-PERP", "sell", 10, usdQ8(99_000)), func(r *trade.PlaceRequest) {
			r.Type = trade.TypeTakeProfitMarket
		}),
		"entry at the mid": with(buy, func(r *trade.PlaceRequest) { r.TriggerKind, r.TriggerLevelQ8 = trade.KindEntry, usdQ8(100_000) }),
		"trigger and bracket": with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) {
			r.TriggerKind, r.TriggerLevelQ8 = trade.KindEntry, usdQ8(101_000)
		}),
		"bracket on a limit":   with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) { r.Type, r.LimitPriceQ8 = trade.TypeLimit, usdQ8(90_000) }),
		"bracket reduce-only":  with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) { r.ReduceOnly = true }),
		"bracket without legs": bracket("x", "buy", 10, 0, 0, 0),
		"bracket entry kind":   with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) { r.Bracket.EntryKind = "limit" }),
		"market entry with level": with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) {
			r.Bracket.EntryLevelQ8 = usdQ8(101_000)
		}),
		"long stop above entry":    bracket("x", "buy", 10, 0, usdQ8(100_500), 0),
		"long take-profit below":   bracket("x", "buy", 10, 0, 0, usdQ8(99_000)),
		"short stop below":         bracket("x", "sell", 10, 0, usdQ8(99_000), 0),
		"stop above trigger entry": bracket("x", "buy", 10, usdQ8(98_000), usdQ8(99_000), usdQ8(110_000)),
		"leg larger than entry":    with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) { r.Bracket.StopContracts = 11 }),
		"leg size without leg": with(bracket("x", "buy", 10, 0, usdQ8(95_000), 0), func(r *trade.PlaceRequest) {
			r.Bracket.TakeProfitContracts = 5
		}),
	} {
		t.Run(name, func(t *testing.T) { w.t = t; w.refusedAsIs(acct, key, r, bad, wire.CodeValidation) })
	}
	w.t = t
	w.refusedAsIs(acct, key, with(buy, func(r *trade.PlaceRequest) { r.MarketID = "XRP-PERP" }), bad, wire.CodeValidation)
	w.refusedAsIs(acct, key, with(buy, func(r *trade.PlaceRequest) { r.ReduceOnly = true }), bad, wire.CodeReduceOnly)
	poor, poorKey := w.account(1000)
	w.refusedAsIs(poor, poorKey, buy, bad, wire.CodeInsufficientMargin)
	w.refusedAsIs(poor, poorKey, limitOrder("x", "BTC-PERP", "buy", 10, usdQ8(90_000)), bad, wire.CodeInsufficientMargin)

	// Exactly the tick, the minimum and the maximum are accepted.
	created(t, w.order(acct, key, limitOrder("edge1", "BTC-PERP", "buy", 1, usdQ8(90_000)+market.DefaultCatalogue()[0].TickSizeQ8)), trade.StatusResting)
	created(t, w.order(acct, key, mktOrder("edge2", "ETH-PERP", "buy", 1_000_000)), trade.StatusFilled)

	// Above the maximum size is validation before it is reduce_only.
	w.refusedAsIs(acct, key, with(mktOrder("x", "ETH-PERP", "sell", 1_000_001), func(r *trade.PlaceRequest) { r.ReduceOnly = true }), bad, wire.CodeValidation)
	w.refusedAsIs(acct, key, with(mktOrder("x", "ETH-PERP", "buy", 1), func(r *trade.PlaceRequest) { r.ReduceOnly = true }), bad, wire.CodeReduceOnly)
	created(t, w.order(acct, key, mktOrder("dummy", "ETH-PERP", "sell", 999_999)), trade.StatusFilled)
	// A reduce-only order larger than the position would flip it.
	w.refusedAsIs(acct, key, with(mktOrder("x", "ETH-PERP", "sell", 2), func(r *trade.PlaceRequest) { r.ReduceOnly = true }), bad, wire.CodeReduceOnly)

	reduceOnly := market.StatusReduceOnly
	w.setMarket(MarketSetPayload{MarketID: "ETH-PERP", Status: &reduceOnly})
	w.refusedAsIs(acct, key, mktOrder("x", "ETH-PERP", "buy", 1), bad, wire.CodeReduceOnly)
	created(t, w.order(acct, key, mktOrder("closes", "ETH-PERP", "sell", 1)), trade.StatusFilled)

	// In a reduce-only market, triggers must be reduce-only and brackets
	// (whose entry opens) are refused.
	w.refusedAsIs(acct, key, stopOrder("x", "ETH-PERP", "buy", 1, usdQ8(3_500)), bad, wire.CodeReduceOnly)
	w.refusedAsIs(acct, key, with(bracket("x", "sell", 1, 0, usdQ8(3_500), 0), func(r *trade.PlaceRequest) { r.MarketID = "ETH-PERP" }), bad, wire.CodeReduceOnly)

	halted := market.StatusHalted
	w.setMarket(MarketSetPayload{MarketID: "ETH-PERP", Status: &halted})
	w.refusedAsIs(acct, key, mktOrder("x", "ETH-PERP", "buy", 1), bad, wire.CodeMarketHalted)

	w.advanceTo(w.ts + 10_001) // the BTC print is now older than 10 s
	w.ts = w.now()
	w.refusedAsIs(acct, key, buy, bad, wire.CodeOracleStale)
}

// insufficient_balance: an order that opens nothing but cannot pay its fee.
func TestReducingOrderWithoutFeeIsInsufficientBalance(t *testing.T) {
	w := newTradeWorld(t)
	// Fund exactly the margin and fee of opening 100 ETH contracts.
	var need int64
	w.m.Read(func(st *State, _ uint64) {
		m := st.Market.MarketsByID["ETH-PERP"]
		pr, _ := st.Market.LastPrint("ETH-PERP")
		qt, _ := trade.QuoteTrade(m, pr, trade.Long, 100)
		pl, ref := trade.PlanFill(m, trade.Position{}, trade.Long, 100, qt, 1<<60, 0)
		if ref != nil {
			t.Fatal(ref)
		}
		need = pl.FreeToMargin + pl.FeeFromFree
	})
	acct, key := w.account(need)
	created(t, w.order(acct, key, mktOrder("o1", "ETH-PERP", "buy", 100)), trade.StatusFilled)
	if w.balance(ledger.Free(acct)) != 0 {
		t.Fatal("free balance left")
	}
	tp := limitOrder("tp", "ETH-PERP", "sell", 100, usdQ8(4_000))
	tp.ReduceOnly = true
	w.refusedAsIs(acct, key, tp, http.StatusBadRequest, wire.CodeInsufficientBalance)
	// Opening more is insufficient_margin.
	w.refusedAsIs(acct, key, limitOrder("more", "ETH-PERP", "buy", 100, usdQ8(3_000)), http.StatusBadRequest, wire.CodeInsufficientMargin)
}

func TestPositionLimitAndOICap(t *testing.T) {
	w := newTradeWorld(t)
	ten := int64(10)
	w.setMarket(MarketSetPayload{MarketID: "ETH-PERP", MaxOrderContracts: &ten}) // position limit 100, cap 1000
	p := market.DefaultCatalogue()[1]
	p.MaxOrderContracts = ten
	if trade.PositionLimitContracts(&p) != 100 || trade.OICapContracts(&p) != 1000 {
		t.Fatal("limits moved: fix the test")
	}
	var accts, keys []string
	for i := 0; i < 10; i++ {
		a, k := w.account(btcBTC)
		accts, keys = append(accts, a), append(keys, k)
		for j := 0; j < 10; j++ {
			wantPrinted := w.order(a, k, mktOrder(fmt.Sprintf("o%d", j), "ETH-PERP", "buy", 10))
			created(t, wantPrinted, trade.StatusFilled)
			if j%5 == 4 {
				wantOK(t, w.print("ETHUSD", usdQ8(3_400)+int64(i*10+j))) // keep the oracle fresh
			}
		}
		if i == 0 {
			w.refusedAsIs(a, k, mktOrder("over", "ETH-PERP", "buy", 1), http.StatusBadRequest, wire.CodePositionLimit)
		}
	}
	if m := w.market().MarketsByID["ETH-PERP"]; m.LongOIContracts != 1000 {
		t.Fatalf("long open interest %d", m.LongOIContracts)
	}
	a, k := w.account(btcBTC)
	w.refusedAsIs(a, k, mktOrder("x", "ETH-PERP", "buy", 1), http.StatusBadRequest, wire.CodeOICap)
	created(t, w.order(a, k, mktOrder("short", "ETH-PERP", "sell", 10)), trade.StatusFilled)
	// Reducing is never capped.
	created(t, w.order(accts[0], keys[0], mktOrder("cut", "ETH-PERP", "sell", 10)), trade.StatusFilled)
}
