package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// The golden log: safe rolling upgrades.
//
// testdata/golden/log.cbor holds the raft entries of a scenario that uses
// every command type of this release (and a group entry, a non-command
// entry, undecodable bytes, an unknown type, a retry and a reused key);
// testdata/golden/expect.json records what applying them gives: the state
// hash at the end and every 16 entries, and digests of every answer and
// every event. The test replays the stored bytes, not a regenerated
// scenario, so anything that makes this build apply an old log
// differently (an ungated change of apply behaviour, a payload that no
// longer decodes the same, a new field that changes the encoding) fails
// here, as it would make an upgraded replica diverge from an old one in a
// rolling upgrade. An intended change is gated on a new feature level
// (apply_feature.go) so the recorded answers stay true at the old level.
//
// Regenerate only when adding a command type (a case in goldenScenario) or
// at a release boundary, and say why in the commit:
//
//	go test ./fsm -run TestGoldenLog -update-golden

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden from goldenScenario")

const goldenDir = "testdata/golden"

// goldenEntry is one raft entry: its index and data (nil for an entry that
// is not a command, such as a configuration change).
type goldenEntry struct {
	Index uint64 `cbor:"1,keyasint"`
	Data  []byte `cbor:"2,keyasint,omitempty"`
}

// goldenExpect is what replaying the log must give.
type goldenExpect struct {
	Entries       int               `json:"entries"`
	StateHash     string            `json:"stateHash"`
	ResultsDigest string            `json:"resultsDigest"`
	EventsDigest  string            `json:"eventsDigest"`
	Checkpoints   map[string]string `json:"checkpoints"`
	FeatureLevel  uint32            `json:"featureLevel"`
	// Accepted lists the command types the log applies successfully at
	// least once (inside groups too).
	Accepted []CmdType `json:"accepted"`
}

// goldenDigest accumulates answers and events in apply order.
type goldenDigest struct {
	results, events []byte
	accepted        map[CmdType]bool
}

func (d *goldenDigest) add(data []byte, res *Result) {
	var typ CmdType
	if c, err := DecodeCommand(data); err == nil {
		typ = c.Type
	}
	d.addResult(res, typ, data)
}

func (d *goldenDigest) addEvents(evs []Event) {
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		d.events = fmt.Appendf(d.events, "%s|%s|%s|%s\n", e.Account, e.Channel, e.Selector, b)
	}
}

func (d *goldenDigest) addResult(res *Result, typ CmdType, data []byte) {
	if res == nil {
		d.results = append(d.results, "nil\n"...)
		return
	}
	d.results = fmt.Appendf(d.results, "%d|%s|%t|%d|%s|%d\n", res.Status, res.Code, res.Replay, res.Index, res.Body, len(res.Group))
	if res.OK() && typ != 0 {
		d.accepted[typ] = true
	}
	if typ == CmdGroup && len(res.Group) > 0 {
		c, _ := DecodeCommand(data)
		var g GroupPayload
		if Unmarshal(c.Payload, &g) == nil && len(g.Cmds) == len(res.Group) {
			for i, sub := range res.Group {
				var st CmdType
				if sc, err := DecodeCommand(g.Cmds[i]); err == nil {
					st = sc.Type
				}
				d.addResult(sub, st, g.Cmds[i])
			}
		}
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// replayGolden applies entries to a fresh machine in batches of batch and
// returns what it gives.
func replayGolden(t *testing.T, entries []goldenEntry, batch int) goldenExpect {
	t.Helper()
	m := NewMachine(Options{CheckInvariants: true})
	d := &goldenDigest{accepted: map[CmdType]bool{}}
	out := goldenExpect{Entries: len(entries), Checkpoints: map[string]string{}}
	for i := 0; i < len(entries); i += batch {
		part := entries[i:min(i+batch, len(entries))]
		idx := make([]uint64, len(part))
		data := make([][]byte, len(part))
		for j, e := range part {
			idx[j], data[j] = e.Index, e.Data
		}
		results, events := m.ApplyBatch(idx, data)
		if h := m.Halted(); h != nil {
			t.Fatalf("the golden log halts the machine at %d: %s", h.Index, h.Reason)
		}
		// Events are not attributed to entries in a batch; their order
		// is what every replica must agree on.
		for j := range part {
			if data[j] == nil {
				d.results = append(d.results, "noncommand\n"...)
				continue
			}
			d.add(data[j], results[j])
		}
		d.addEvents(events)
		// The machine is exactly at the batch's last index.
		if last := idx[len(idx)-1]; last%16 == 0 {
			_, h, _ := m.StateHash()
			out.Checkpoints[strconv.FormatUint(last, 10)] = h
		}
	}
	_, h, err := m.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	out.StateHash = h
	out.ResultsDigest = hexSum(d.results)
	out.EventsDigest = hexSum(d.events)
	m.Read(func(st *State, _ uint64) { out.FeatureLevel = st.FeatureLevel })
	for typ := range d.accepted {
		out.Accepted = append(out.Accepted, typ)
	}
	sort.Slice(out.Accepted, func(i, j int) bool { return out.Accepted[i] < out.Accepted[j] })
	return out
}

func readGolden(t *testing.T) ([]goldenEntry, goldenExpect) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "log.cbor"))
	if err != nil {
		t.Fatalf("%v (go test ./fsm -run TestGoldenLog -update-golden writes it)", err)
	}
	var entries []goldenEntry
	if err := Unmarshal(b, &entries); err != nil {
		t.Fatalf("log.cbor: %v", err)
	}
	eb, err := os.ReadFile(filepath.Join(goldenDir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp goldenExpect
	if err := json.Unmarshal(eb, &exp); err != nil {
		t.Fatalf("expect.json: %v", err)
	}
	return entries, exp
}

func writeGolden(t *testing.T) {
	t.Helper()
	entries := goldenScenario(t)
	exp := replayGolden(t, entries, 1)
	b, err := Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goldenDir, "log.cbor"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	eb, _ := json.MarshalIndent(exp, "", "  ")
	if err := os.WriteFile(filepath.Join(goldenDir, "expect.json"), append(eb, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d entries, state hash %s", len(entries), exp.StateHash)
}

// TestGoldenLogReplaysToTheRecordedHash replays the stored log one entry
// at a time and in batches (as raft hands them over): both must give the
// recorded answers, events, checkpoints and final state hash.
func TestGoldenLogReplaysToTheRecordedHash(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	if *updateGolden {
		writeGolden(t)
	}
	entries, want := readGolden(t)
	for _, batch := range []int{1, 7, 64} {
		got := replayGolden(t, entries, batch)
		if got.Entries != want.Entries {
			t.Fatalf("batch %d: %d entries, want %d", batch, got.Entries, want.Entries)
		}
		if batch == 1 {
			// Checkpoints at every 16th entry exist only where a batch
			// ends there; one entry at a time, all of them do.
			var firstBad uint64
			for k, h := range want.Checkpoints {
				if got.Checkpoints[k] != h {
					i, _ := strconv.ParseUint(k, 10, 64)
					if firstBad == 0 || i < firstBad {
						firstBad = i
					}
				}
			}
			if firstBad != 0 {
				t.Errorf("state diverges from the golden log by entry %d (checkpoints every 16 entries)", firstBad)
			}
		}
		if got.StateHash != want.StateHash {
			t.Errorf("batch %d: state hash %s, recorded %s: this build applies the release's log differently "+
				"(gate the change on a new feature level, see apply_feature.go)", batch, got.StateHash, want.StateHash)
		}
		if got.ResultsDigest != want.ResultsDigest {
			t.Errorf("batch %d: the answers differ from the recorded ones", batch)
		}
		if got.EventsDigest != want.EventsDigest {
			t.Errorf("batch %d: the events differ from the recorded ones", batch)
		}
		if got.FeatureLevel != want.FeatureLevel {
			t.Errorf("batch %d: feature level %d, recorded %d", batch, got.FeatureLevel, want.FeatureLevel)
		}
	}
}

// TestGoldenLogCoversEveryCommandType fails when a command type is
// registered that the golden log never applies successfully: add it to
// goldenScenario and regenerate.
func TestGoldenLogCoversEveryCommandType(t *testing.T) {
	_, exp := readGolden(t)
	have := map[CmdType]bool{}
	for _, typ := range exp.Accepted {
		have[typ] = true
	}
	var missing []int
	for typ := range handlers {
		// A review succeeds only on prod, whose applications wait for it
		// (the golden genesis is testnet's, which approves at once); the
		// log holds its refusal, TestOperatorReviewsAPendingApplication
		// its success.
		if !have[typ] && !IsTestCommand(typ) && typ != CmdPromoterReview {
			missing = append(missing, int(typ))
		}
	}
	if !have[CmdGroup] {
		missing = append(missing, int(CmdGroup))
	}
	sort.Ints(missing)
	if len(missing) > 0 {
		t.Fatalf("command types %v never succeed in the golden log: add them to goldenScenario (fsm/golden_test.go) "+
			"and run go test ./fsm -run TestGoldenLog -update-golden", missing)
	}
}

// goldenWorld builds the scenario, applying each entry as it goes so the
// scenario can insist that what it means to succeed does.
type goldenWorld struct {
	t       *testing.T
	m       *Machine
	ts      int64
	entries []goldenEntry
}

func (w *goldenWorld) raw(data []byte) *Result {
	w.t.Helper()
	idx := uint64(len(w.entries) + 1)
	w.entries = append(w.entries, goldenEntry{Index: idx, Data: data})
	rs, _ := w.m.ApplyBatch([]uint64{idx}, [][]byte{data})
	if h := w.m.Halted(); h != nil {
		w.t.Fatalf("scenario halts the machine: %s", h.Reason)
	}
	return rs[0]
}

// at stamps cmd dt ms after the previous entry and applies it.
func (w *goldenWorld) at(dt int64, c *Command) *Result {
	w.t.Helper()
	w.ts += dt
	c.TsMs = w.ts
	b, err := c.Encode()
	if err != nil {
		w.t.Fatal(err)
	}
	return w.raw(b)
}

func (w *goldenWorld) ok(dt int64, c *Command) *Result {
	w.t.Helper()
	res := w.at(dt, c)
	if !res.OK() {
		w.t.Fatalf("scenario: command type %d refused: %d %s", c.Type, res.Status, res.Body)
	}
	return res
}

func (w *goldenWorld) refused(dt int64, c *Command) *Result {
	w.t.Helper()
	res := w.at(dt, c)
	if res.OK() {
		w.t.Fatalf("scenario: command type %d accepted, meant to be refused: %s", c.Type, res.Body)
	}
	return res
}

func (w *goldenWorld) cmd(typ CmdType, payload any) *Command {
	return mustCommand(w.t, typ, 0, payload)
}

// client is a command a trader's request became.
func (w *goldenWorld) client(typ CmdType, acct, key, idem string, payload any) *Command {
	c := w.cmd(typ, payload)
	c.Account, c.KeyID = acct, key
	c.IdemKey = "acct:" + acct + ":" + idem
	c.ReqHash = RequestHash([]byte(strconv.Itoa(int(typ))), c.Payload)
	return c
}

func (w *goldenWorld) print(dt int64, feed string, midQ8 int64) {
	w.t.Helper()
	w.ok(dt, w.cmd(CmdOraclePrint, OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: w.ts + dt}))
}

// goldenScenario is a day in the life of a small venue touching every
// command type. It is only run to regenerate the log.
func goldenScenario(t *testing.T) []goldenEntry {
	w := &goldenWorld{t: t, m: NewMachine(Options{CheckInvariants: true}), ts: 1_767_225_600_000} // 2026-01-01T00:00Z
	const btc, eth = int64(97_000 * market.Q8), int64(3_300 * market.Q8)

	w.ok(0, w.cmd(CmdGenesis, GenesisPayload{Seed: 42, Deployment: "testnet", FaucetGrantsPerHour: 3}))
	w.ok(10, w.cmd(CmdMarketsGenesis, MarketsGenesisPayload{Markets: market.DefaultCatalogue()}))
	w.ok(10, w.cmd(CmdNodeMeta, NodeMeta{ID: "node1", Raft: "192.0.2.1:7080", HTTP: "192.0.2.1:8080", Admin: "192.0.2.1:9080"}))
	w.ok(10, w.cmd(CmdNodeMeta, NodeMeta{ID: "node2", Raft: "192.0.2.2:7080", HTTP: "192.0.2.2:8080", Admin: "192.0.2.2:9080"}))
	w.ok(10, w.cmd(CmdNodeMeta, NodeMeta{ID: "node3", Raft: "192.0.2.3:7080", HTTP: "192.0.2.3:8080", Admin: "192.0.2.3:9080"}))
	w.refused(10, w.cmd(CmdNodeMeta, NodeMeta{ID: "node4"})) // no raft address
	w.print(100, "BTCUSD", btc)
	w.print(10, "ETHUSD", eth)

	type trader struct{ acct, key string }
	var alice, bob trader
	for _, tr := range []struct {
		who *trader
		id  string
	}{{&alice, "acct-alice"}, {&bob, "acct-bob"}} {
		*tr.who = trader{tr.id, "key-" + tr.id}
		c := w.cmd(CmdSignup, access.NewAccount{AccountID: tr.id, UserID: "user-" + tr.id, RailAddress: "sparkt1" + tr.id,
			KeyID: tr.who.key, KeyHashHex: keyHash("secret-" + tr.id), UAClass: "cli"})
		c.IdemKey, c.ReqHash = "route:/v1/signup:"+tr.id, RequestHash([]byte(tr.id))
		w.ok(50, c)
	}
	w.ok(50, w.client(CmdMintKey, alice.acct, alice.key, "mint-1", access.NewKey{KeyID: "key-alice-bot", KeyHashHex: keyHash("bot"), Label: "bot"}))
	w.ok(50, w.client(CmdFaucet, alice.acct, alice.key, "faucet-1", nil))
	w.ok(50, w.client(CmdFaucet, bob.acct, bob.key, "faucet-1", nil))

	var ref [32]byte
	binary.BigEndian.PutUint64(ref[:], 0xfeed)
	inv := funds.NewInvoice{PaymentRequest: "lntb1golden", PaymentRef: hex.EncodeToString(ref[:]), AmountMsat: 250_000_000, ExpiresAtMs: w.ts + 3_600_000}
	w.ok(50, w.client(CmdInvoiceCreated, alice.acct, alice.key, "invoice-1", inv))
	w.ok(50, w.cmd(CmdDepositSettled, funds.Settlement{AccountID: alice.acct, AmountMsat: inv.AmountMsat, RailRef: inv.PaymentRef, Path: funds.PathLightning}))
	w.refused(50, w.cmd(CmdDepositSettled, funds.Settlement{AccountID: alice.acct, AmountMsat: inv.AmountMsat, RailRef: inv.PaymentRef, Path: funds.PathLightning})) // paid once
	w.ok(50, w.cmd(CmdDepositSettled, funds.Settlement{AccountID: bob.acct, AmountMsat: 400_000_000, RailRef: "spark-in-1", Path: funds.PathSpark}))

	w.print(200, "BTCUSD", btc+20*market.Q8)
	w.print(10, "ETHUSD", eth-market.Q8)
	buy := trade.PlaceRequest{OrderID: "alice-buy-1", MarketID: "BTC-PERP", Side: "buy", Type: "market", Contracts: 2_000}
	first := w.ok(50, w.client(CmdPlaceOrder, alice.acct, alice.key, buy.OrderID, buy))
	retry := w.ok(50, w.client(CmdPlaceOrder, alice.acct, alice.key, buy.OrderID, buy)) // a client's retry
	if !retry.Replay || string(retry.Body) != string(first.Body) {
		t.Fatalf("scenario: the retry was not a replay: %+v", retry)
	}
	reuse := w.client(CmdPlaceOrder, alice.acct, alice.key, buy.OrderID, trade.PlaceRequest{OrderID: buy.OrderID, MarketID: "BTC-PERP", Side: "sell", Type: "market", Contracts: 1})
	w.refused(50, reuse) // same key, another body
	w.ok(50, w.client(CmdPlaceOrder, bob.acct, bob.key, "bob-sell-1", trade.PlaceRequest{OrderID: "bob-sell-1", MarketID: "ETH-PERP", Side: "sell", Type: "market", Contracts: 20}))
	tick := int64(5_000_000) // ETH-PERP tick
	rest := trade.PlaceRequest{OrderID: "alice-rest-1", MarketID: "ETH-PERP", Side: "buy", Type: "limit", Contracts: 10, LimitPriceQ8: (eth / 2) / tick * tick}
	w.ok(50, w.client(CmdPlaceOrder, alice.acct, alice.key, rest.OrderID, rest))
	w.ok(50, w.client(CmdCancelOrder, alice.acct, alice.key, "cancel-1", CancelOrderPayload{OrderID: rest.OrderID}))
	rest2 := rest
	rest2.OrderID = "alice-rest-2"
	w.ok(50, w.client(CmdPlaceOrder, alice.acct, alice.key, rest2.OrderID, rest2))
	w.ok(50, w.client(CmdCancelAllAfter, alice.acct, alice.key, "caa-1", CancelAllAfterPayload{TimeoutMs: trade.CancelAfterMinMs}))

	// Time passes with prices moving: the switch fires in a timer.
	for i := int64(0); i < 12; i++ {
		w.print(2_000, "BTCUSD", btc+(i%5)*10*market.Q8)
		w.print(10, "ETHUSD", eth+(i%3)*market.Q8)
		w.ok(10, &Command{Type: CmdTick})
	}

	w.ok(50, w.client(CmdWithdrawalRequested, bob.acct, bob.key, "wd-1", funds.WithdrawalRequest{IdempotencyKey: "wd-1",
		AmountMsat: 50_000_000, FeeMsat: 1_000, Path: funds.PathSpark, Destination: "sparkt1bobcold", RailRef: "wd-ref-1"}))
	w.ok(50, w.cmd(CmdWithdrawalResult, funds.PayoutResult{RailRef: "wd-ref-1", Status: funds.PayoutPaid}))

	fee := int64(600_000)
	w.ok(50, w.cmd(CmdMarketSet, MarketSetPayload{MarketID: "ETH-PERP", TakerFeeQ9: &fee}))
	w.ok(50, w.cmd(CmdOraclePin, OraclePinPayload{FeedID: "BTCUSD", MidQ8: btc + 100*market.Q8}))
	w.ok(50, w.cmd(CmdOracleScript, OracleScriptPayload{FeedID: "ETHUSD", Mode: market.OverrideStep,
		Points: []market.OverridePoint{{OffsetMs: 0, MidQ8: eth}, {OffsetMs: 5_000, MidQ8: eth + 10*market.Q8}}}))
	w.print(1_000, "BTCUSD", btc)
	w.ok(50, w.cmd(CmdOracleUnpin, OracleUnpinPayload{FeedID: "BTCUSD"}))
	w.ok(50, w.cmd(CmdOracleUnpin, OracleUnpinPayload{FeedID: "ETHUSD"}))

	w.ok(50, w.cmd(CmdTouchKeys, TouchPayload{KeyIDs: []string{alice.key, "key-alice-bot"}, TsMs: []int64{w.ts, w.ts + 10}}))
	w.ok(50, w.client(CmdRevokeKeys, alice.acct, alice.key, "revoke-1", RevokePayload{AllButCurrent: true}))

	// The rolling upgrade: refused while node3 runs the old build, raised
	// once it is upgraded, then node3 leaves.
	w.refused(50, w.cmd(CmdSetFeatureLevel, FeatureLevelPayload{Level: 1, Nodes: []AdvertisedLevel{{"node1", 1}, {"node2", 1}, {"node3", 0}}}))
	w.ok(50, w.cmd(CmdSetFeatureLevel, FeatureLevelPayload{Level: 1, Nodes: []AdvertisedLevel{{"node1", 1}, {"node2", 1}, {"node3", 1}}}))
	w.ok(50, w.cmd(CmdNodeGone, NodeGonePayload{ID: "node3"}))

	// Group commit: a client write and a tick in one entry.
	var parts [][]byte
	for _, c := range []*Command{w.client(CmdFaucet, bob.acct, bob.key, "faucet-2", nil), {Type: CmdTick}} {
		c.TsMs = w.ts + 30
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b)
	}
	g, err := EncodeGroup(parts)
	if err != nil {
		t.Fatal(err)
	}
	w.ts += 30
	if res := w.raw(g); len(res.Group) != 2 || !res.Group[0].OK() {
		t.Fatalf("scenario: group %+v", res)
	}

	// Entries that are not commands of this build.
	w.raw(nil)                            // a raft configuration entry
	w.raw([]byte{0xff, 0x01})             // undecodable
	w.refused(10, &Command{Type: 0x0ffe}) // an unknown type
	w.ok(10, &Command{Type: CmdNoop})     // a read barrier

	// Across an hourly funding boundary, in steps a leader would take.
	for i := 0; i < 70; i++ {
		w.print(55_000, "BTCUSD", btc+int64(i%7)*5*market.Q8)
		w.print(10, "ETHUSD", eth+int64(i%4)*market.Q8/2)
		w.ok(10, &Command{Type: CmdTick})
	}
	w.ok(50, w.client(CmdPlaceOrder, alice.acct, alice.key, "alice-close-1", trade.PlaceRequest{OrderID: "alice-close-1",
		MarketID: "BTC-PERP", Side: "sell", Type: "market", Contracts: 2_000, ReduceOnly: true}))

	// Below LevelDomains the new domains' commands are refused; the raise
	// (node3 left: node1 and node2 run this build) turns them on.
	w.refused(50, w.client(CmdUSDxQuote, alice.acct, alice.key, "uq-0", USDxQuotePayload{QuoteID: "uq_golden_0", Side: "mint", Usdx: 1}))
	w.ok(50, w.cmd(CmdSetFeatureLevel, FeatureLevelPayload{Level: LevelDomains, Nodes: []AdvertisedLevel{{"node1", LevelDomains}, {"node2", LevelDomains}}}))
	goldenUSDx(w, alice.acct, alice.key, btc)
	goldenGrowth(w, alice, bob, btc)
	return w.entries
}

// goldenUSDx: a quote and a mint, staking, a redemption, a USDx withdrawal
// paid and tokens deposited back, the operator's freeze, attestation, halt
// and parameters.
func goldenUSDx(w *goldenWorld, acct, key string, btc int64) {
	w.print(50, "BTCUSD", btc)
	q := w.ok(50, w.client(CmdUSDxQuote, acct, key, "uq-1", USDxQuotePayload{QuoteID: "uq_golden_1", Side: "mint", Usdx: 100}))
	var quote struct {
		QuoteID string `json:"quoteId"`
	}
	if err := json.Unmarshal(q.Body, &quote); err != nil {
		w.t.Fatal(err)
	}
	w.ok(50, w.client(CmdUSDxMint, acct, key, quote.QuoteID, USDxMintPayload{QuoteID: quote.QuoteID, FreshQuoteID: "uq_golden_2"}))
	w.ok(50, w.client(CmdUSDxStake, acct, key, "stake-1", USDxAmountPayload{Amount: 40}))
	w.ok(50, w.client(CmdUSDxUnstake, acct, key, "unstake-1", USDxAmountPayload{Amount: 10}))
	w.ok(50, w.client(CmdUSDxRedeem, acct, key, "redeem-1", USDxAmountPayload{ID: "redeem-1", Amount: 20}))
	w.ok(50, w.client(CmdUSDxWithdraw, acct, key, "uw-1", USDxWithdrawPayload{ID: "uw-1", Usdx: 5, SparkAddress: "sprt1goldenout"}))
	w.ok(50, w.cmd(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: "uw-1", IssuerRef: "iss-uw-1"}))
	w.ok(50, w.cmd(CmdUSDxDeposited, USDxDepositedPayload{AccountID: acct, Usdx: 3, IssuerRef: "dep-1"}))
	fr := w.ok(50, w.cmd(CmdUSDxFreeze, USDxFreezePayload{OpID: "fz-1", SparkAddress: "sprt1goldenbad", Action: "freeze", Reason: "court order"}))
	var freeze struct {
		Seq wire.Int `json:"seq"`
	}
	if err := json.Unmarshal(fr.Body, &freeze); err != nil {
		w.t.Fatal(err)
	}
	w.ok(50, w.cmd(CmdUSDxFreezeApplied, USDxFreezeAppliedPayload{Seq: uint64(freeze.Seq), IssuerRef: "iss-fz-1"}))
	w.ok(50, w.cmd(CmdUSDxAttest, USDxAttestPayload{AsOfTsMs: w.ts, IssuerSupply: 80, IssuerIssued: 100, IssuerBurned: 20, IssuerCustody: 78}))
	w.ok(50, w.cmd(CmdUSDxHalt, USDxHaltPayload{Halt: true, Reason: "maintenance"}))
	w.refused(50, w.client(CmdUSDxStake, acct, key, "stake-2", USDxAmountPayload{Amount: 1})) // halted
	w.ok(50, w.cmd(CmdUSDxHalt, USDxHaltPayload{Halt: false}))
	target := int64(20_000_000)
	w.ok(50, w.cmd(CmdUSDxParams, USDxParamsPayload{ReserveTargetQ9: &target}))
}

// goldenGrowth: referral codes and a bind, a promoter with a code and a
// referee, both referees trading, the rewards vesting over two days of
// ticks, both claims, and leaderboard settings.
func goldenGrowth(w *goldenWorld, alice, bob struct{ acct, key string }, btc int64) {
	carol := struct{ acct, key string }{"acct-carol", "key-acct-carol"}
	c := w.cmd(CmdSignup, access.NewAccount{AccountID: carol.acct, UserID: "user-carol", RailAddress: "sparkt1carol",
		KeyID: carol.key, KeyHashHex: keyHash("secret-carol"), UAClass: "cli"})
	c.IdemKey, c.ReqHash = "route:/v1/signup:carol", RequestHash([]byte("carol"))
	w.ok(50, c)
	w.ok(50, w.client(CmdFaucet, carol.acct, carol.key, "faucet-1", nil))

	// The referrer trades its own volume (a gate of the programme).
	w.print(50, "BTCUSD", btc)
	for i, side := range []string{"buy", "sell"} {
		id := fmt.Sprintf("bob-own-%d", i)
		w.ok(50, w.client(CmdPlaceOrder, bob.acct, bob.key, id, trade.PlaceRequest{OrderID: id, MarketID: "BTC-PERP", Side: side, Type: "market", Contracts: 200}))
	}
	w.ok(50, w.client(CmdReferralCode, bob.acct, bob.key, "code-1", ReferralCodePayload{Code: "GOLDEN1"}))
	w.ok(50, w.client(CmdReferralBind, alice.acct, alice.key, "bind-1", ReferralBindPayload{Code: "GOLDEN1"}))
	w.refused(50, w.client(CmdReferralBind, alice.acct, alice.key, "bind-2", ReferralBindPayload{Code: "GOLDEN1"})) // twice
	app := growth.Application{DisplayName: "Golden Weekly", Channels: []growth.Channel{{Kind: "newsletter", URL: "https://golden.example", Audience: "5k readers"}},
		Plan: "A weekly column", Jurisdictions: []string{"PT"}, AcceptedTermsVersion: growth.PromoterTermsVersion}
	w.ok(50, w.client(CmdPromoterApply, bob.acct, bob.key, "apply-1", app))
	// Testnet approves at once, so the operator's review finds it decided.
	w.refused(50, w.cmd(CmdPromoterReview, PromoterReviewPayload{AccountID: bob.acct, Decision: growth.ReviewApprove}))
	w.ok(50, w.client(CmdPromoterCode, bob.acct, bob.key, "pcode-1", growth.NewPromoterCode{Code: "GOLDPROMO", Label: "column", KickbackQ9: 10_000_000}))
	w.ok(50, w.client(CmdReferralBind, carol.acct, carol.key, "bind-1", ReferralBindPayload{Code: "GOLDPROMO"}))

	for i, tr := range []struct{ acct, key string }{alice, carol, alice, carol} {
		side := "buy"
		if i >= 2 {
			side = "sell"
		}
		id := fmt.Sprintf("growth-%d", i)
		w.print(50, "BTCUSD", btc)
		w.ok(50, w.client(CmdPlaceOrder, tr.acct, tr.key, id, trade.PlaceRequest{OrderID: id, MarketID: "BTC-PERP", Side: side,
			Type: "market", Contracts: 40_000, Leverage: 50}))
	}
	out, name := true, "Golden Carol"
	w.ok(50, w.client(CmdLeaderboardSettings, carol.acct, carol.key, "set-1", growth.SettingsRequest{DisplayName: &name}))
	w.ok(50, w.client(CmdLeaderboardSettings, alice.acct, alice.key, "set-1", growth.SettingsRequest{OptedOut: &out}))

	// Two days and a bit of ticks: the rewards vest (day + holdback).
	for i := 0; i < 2*1440+30; i++ {
		if i%60 == 0 {
			w.print(59_000, "BTCUSD", btc+int64(i%7)*market.Q8)
			continue
		}
		w.ok(MaxClockStepMs-1_000, &Command{Type: CmdTick})
	}
	w.print(50, "BTCUSD", btc)
	w.ok(50, w.client(CmdReferralClaim, bob.acct, bob.key, "claim-1", struct{}{}))
	w.ok(50, w.client(CmdPromoterClaim, bob.acct, bob.key, "pclaim-1", struct{}{}))
}
