package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// group applies cmds as one group entry (each stamped like the world
// stamps entries) and returns the group's answer and events.
func (w *tradeWorld) group(cmds ...*Command) (*Result, []Event) {
	w.t.Helper()
	var subs [][]byte
	for _, c := range cmds {
		w.ts++
		c.TsMs = w.ts
		b, err := c.Encode()
		if err != nil {
			w.t.Fatal(err)
		}
		subs = append(subs, b)
	}
	g, err := EncodeGroup(subs)
	if err != nil {
		w.t.Fatal(err)
	}
	res, evs := w.m.Apply(w.next, g)
	w.next++
	w.check()
	return res, evs
}

func orderCmd(t testing.TB, acct, key string, r trade.PlaceRequest) *Command {
	c := mustCommand(t, CmdPlaceOrder, 0, r)
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+r.OrderID, []byte(fmt.Sprintf("%+v", r))
	return c
}

// A group entry answers each command as if it had its own entry: a
// refused command in the middle changes nothing and its neighbours apply;
// a retry of an earlier command of the same group replays its answer; all
// share the entry's index; events come in command order.
func TestGroupAppliesEachCommandOnItsOwn(t *testing.T) {
	w := newTradeWorld(t)
	a, ka := w.account(btcBTC)
	b, kb := w.account(btcBTC)
	index := w.next
	res, evs := w.group(
		orderCmd(t, a, ka, mktOrder("g1", "BTC-PERP", "buy", 100)),
		orderCmd(t, b, kb, mktOrder("g2", "XRP-PERP", "buy", 100)), // unknown market: refused
		orderCmd(t, b, kb, mktOrder("g3", "ETH-PERP", "sell", 100)),
		orderCmd(t, a, ka, mktOrder("g1", "BTC-PERP", "buy", 100)), // the same order again: a replay
	)
	if len(res.Group) != 4 || res.Index != index {
		t.Fatalf("group answer %+v", res)
	}
	created(t, res.Group[0], trade.StatusFilled)
	wantRefused(t, res.Group[1], http.StatusBadRequest, wire.CodeValidation)
	created(t, res.Group[2], trade.StatusFilled)
	if !res.Group[3].Replay || string(res.Group[3].Body) != string(res.Group[0].Body) {
		t.Fatalf("retry inside the group: %+v", res.Group[3])
	}
	for i, r := range res.Group {
		if r.Index != index {
			t.Fatalf("answer %d at index %d, want the entry's %d", i, r.Index, index)
		}
	}
	if w.position(a, "BTC-PERP").Contracts != 100 || w.position(b, "ETH-PERP").Contracts != 100 || w.position(b, "XRP-PERP").Contracts != 0 {
		t.Fatal("positions after the group")
	}
	var fills []string
	for _, ev := range evs {
		if f, ok := fillView(ev); ok {
			fills = append(fills, f.OrderID)
		}
	}
	if fmt.Sprint(fills) != "[g1 g3]" {
		t.Fatalf("fill events %v", fills)
	}
	if applied := w.m.Applied(); applied != index {
		t.Fatalf("applied %d, want %d", applied, index)
	}
}

func TestGroupRefusals(t *testing.T) {
	w := newTradeWorld(t)
	a, ka := w.account(btcBTC)
	inner, _ := orderCmd(t, a, ka, mktOrder("x", "BTC-PERP", "buy", 1)).Encode()
	nested, _ := EncodeGroup([][]byte{inner})
	g, _ := EncodeGroup([][]byte{nested, inner, []byte("not a command")})
	res, _ := w.m.Apply(w.next, g)
	w.next++
	if len(res.Group) != 3 {
		t.Fatalf("answer %+v", res)
	}
	wantRefused(t, res.Group[0], http.StatusBadRequest, wire.CodeValidation)
	created(t, res.Group[1], trade.StatusFilled)
	wantRefused(t, res.Group[2], http.StatusBadRequest, wire.CodeValidation)
	empty, _ := EncodeGroup(nil)
	res, _ = w.m.Apply(w.next, empty)
	w.next++
	wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
	w.check()
}
