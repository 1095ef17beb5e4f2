package fsm

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/trade"
)

func checkAppendCommand(t *testing.T, c *Command) {
	t.Helper()
	want, err := encMode.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got := appendCommand(nil, c)
	if !bytes.Equal(got, want) {
		t.Fatalf("appendCommand(%+v):\n got  %x\n want %x", c, got, want)
	}
	if len(got) > commandSize(c) {
		t.Fatalf("%d bytes, past commandSize's %d", len(got), commandSize(c))
	}
}

// The hand-written envelope is the reflective encoder's, byte for byte:
// every field empty or set, every head length class, negative times,
// invalid UTF-8 in the texts.
func TestAppendCommandMatchesMarshal(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: beside the other heavy tests
	checkAppendCommand(t, &Command{})
	checkAppendCommand(t, &Command{Type: CmdPlaceOrder, TsMs: 1_795_705_616_000, Account: "acc_1", KeyID: "key_1",
		IdemKey: "acct:acc_1:o1", ReqHash: make([]byte, 32), Payload: []byte{0xa1, 0x01, 0x02}})
	checkAppendCommand(t, &Command{Type: math.MaxUint16, TsMs: math.MinInt64, Account: "\xff\xfe"})
	checkAppendCommand(t, &Command{TsMs: math.MaxInt64, Payload: make([]byte, 70_000)})
	rng := rand.New(rand.NewPCG(3, 5))
	sizes := []int{0, 1, 23, 24, 255, 256, 65_535, 65_536}
	blob := func() []byte {
		if rng.IntN(3) == 0 {
			return nil
		}
		b := make([]byte, sizes[rng.IntN(len(sizes))])
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	nums := []int64{0, 1, 23, 24, 255, 256, 65_535, 65_536, 1<<32 - 1, 1 << 32, math.MaxInt64}
	for range 3_000 {
		ts := nums[rng.IntN(len(nums))]
		if rng.IntN(2) == 0 {
			ts = -1 - ts
		}
		checkAppendCommand(t, &Command{Type: CmdType(nums[rng.IntN(8)]), TsMs: ts, Account: string(blob()),
			KeyID: string(blob()), IdemKey: string(blob()), ReqHash: blob(), Payload: blob()})
	}
}

func FuzzAppendCommand(f *testing.F) {
	f.Add(uint16(CmdPlaceOrder), int64(1), "acc", "key", "idem", []byte{1}, []byte{0xa0})
	f.Fuzz(func(t *testing.T, typ uint16, ts int64, account, key, idem string, hash, payload []byte) {
		checkAppendCommand(t, &Command{Type: CmdType(typ), TsMs: ts, Account: account, KeyID: key, IdemKey: idem, ReqHash: hash, Payload: payload})
	})
}

func checkAppendPlace(t *testing.T, p trade.PlaceRequest) {
	t.Helper()
	want, err := encMode.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendPlace(nil, &p)
	if !ok {
		if p.Bracket == nil {
			t.Fatalf("a placement without a bracket fell back: %+v", p)
		}
		return
	}
	if p.Bracket != nil {
		t.Fatal("a bracket took the hand-written form")
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendPlace(%+v):\n got  %x\n want %x", p, got, want)
	}
	var back trade.PlaceRequest
	valid := utf8.ValidString(p.OrderID + p.MarketID + p.Side + p.Type + p.TriggerKind)
	if valid && (!decodePlaceFast(got, &back) || back != p) {
		t.Fatalf("decodePlaceFast does not read back %+v (got %+v)", p, back)
	}
	c, err := NewCommand(CmdPlaceOrder, p)
	if err != nil || !bytes.Equal(c.Payload, want) {
		t.Fatalf("NewCommand's payload %x, %v; want %x", c.Payload, err, want)
	}
}

// An order placement's payload, written by hand, is Marshal's bytes and
// (valid UTF-8 texts) reads back through decodePlaceFast.
func TestAppendPlaceMatchesMarshal(t *testing.T) {
	checkAppendPlace(t, trade.PlaceRequest{})
	checkAppendPlace(t, trade.PlaceRequest{OrderID: "o1", MarketID: "BTC-PERP", Side: "buy", Type: "market", Contracts: 1, Leverage: 10})
	checkAppendPlace(t, trade.PlaceRequest{OrderID: "b", Bracket: &trade.BracketRequest{EntryKind: "market"}})
	rng := rand.New(rand.NewPCG(9, 13))
	nums := []int64{0, 1, 23, 24, 255, 256, 65_535, 65_536, 1<<32 - 1, 1 << 32, math.MaxInt64}
	num := func() int64 {
		v := nums[rng.IntN(len(nums))]
		if rng.IntN(3) == 0 {
			v = -1 - v
		}
		return v
	}
	texts := []string{"", "o", "BTC-PERP", "stop", "\xff", string(make([]byte, 30)), string(make([]byte, 300))}
	text := func() string { return texts[rng.IntN(len(texts))] }
	for range 3_000 {
		checkAppendPlace(t, trade.PlaceRequest{OrderID: text(), MarketID: text(), Side: text(), Type: text(),
			Contracts: num(), ReduceOnly: rng.IntN(2) == 0, LimitPriceQ8: num(), HasMaxSlippage: rng.IntN(2) == 0,
			MaxSlippageQ9: num(), TriggerPriceQ8: num(), TriggerKind: text(), TriggerLevelQ8: num(), Leverage: num()})
	}
}

// A group's payload, written by hand, is Marshal's bytes and reads back
// through decodeGroupFast; no commands or a nil one go to Marshal.
func TestAppendGroupMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 19))
	sizes := []int{0, 1, 23, 24, 255, 256, 65_536}
	for n := range 300 {
		cmds := make([][]byte, n%40)
		if n == 299 {
			cmds = make([][]byte, GroupMax)
		}
		for i := range cmds {
			cmds[i] = make([]byte, sizes[rng.IntN(len(sizes))])
			for j := range cmds[i] {
				cmds[i][j] = byte(rng.Uint32())
			}
		}
		want, err := encMode.Marshal(GroupPayload{Cmds: cmds})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendGroup(nil, cmds)
		if len(cmds) == 0 {
			if ok {
				t.Fatal("an empty group took the hand-written form")
			}
			continue
		}
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("group of %d: ok %v\n got  %x\n want %x", len(cmds), ok, got, want)
		}
		var g GroupPayload
		if !decodeGroupFast(got, &g) || len(g.Cmds) != len(cmds) {
			t.Fatalf("decodeGroupFast does not read back a group of %d", len(cmds))
		}
		for i := range cmds {
			if !bytes.Equal(g.Cmds[i], cmds[i]) {
				t.Fatalf("command %d of %d reads back as %x", i, len(cmds), g.Cmds[i])
			}
		}
	}
	if _, ok := appendGroup(nil, [][]byte{{1}, nil}); ok {
		t.Fatal("a group with a nil command took the hand-written form")
	}
}
