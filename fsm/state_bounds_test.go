package fsm

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The design's rule: every collection in State has a bound or a retention
// rule, written down. stateCollections walks the State type, every struct
// reachable from it (through pointers, map values and slice elements,
// unexported derived fields included) and lists every map and slice by
// path ("Trade.Accounts[].Orders"); a struct type from outside this module
// (a B-tree) is listed whole, as one collection, and not walked into.
// Fixed-size arrays (hashes) are not collections.
func stateCollections(t *testing.T) map[string]reflect.Type {
	t.Helper()
	out := map[string]reflect.Type{}
	onPath := map[reflect.Type]bool{}
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		for tp.Kind() == reflect.Pointer {
			tp = tp.Elem()
		}
		switch tp.Kind() {
		case reflect.Map, reflect.Slice:
			out[path] = tp
			walk(tp.Elem(), path+"[]")
		case reflect.Array:
			walk(tp.Elem(), path)
		case reflect.Interface, reflect.Func, reflect.Chan:
			t.Errorf("%s: a %s in State cannot be classified; use concrete data", path, tp.Kind())
		case reflect.Struct:
			if !strings.HasPrefix(tp.PkgPath(), "github.com/perpd/perpd") {
				out[path] = tp // an outside container, listed whole
				return
			}
			if onPath[tp] {
				return // a recursive type: its fields are listed above
			}
			onPath[tp] = true
			defer delete(onPath, tp)
			for i := range tp.NumField() {
				f := tp.Field(i)
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				walk(f.Type, p)
			}
		}
	}
	walk(reflect.TypeOf(State{}), "")
	return out
}

// Kinds of bound, as docs/decisions.md states them.
const (
	// perAccount: at most N per account. The total is N x accounts;
	// accounts are never deleted and grow at most at the signup cap.
	perAccount = "per account"
	// total: at most N whatever the number of accounts.
	total = "total"
	// money: grows only with money spent or held, per record.
	money = "money"
	// operator: only an operator's, the leader's or a rail's command adds
	// to it, never a client's.
	operator = "operator"
	// fixed: its length is fixed by the code.
	fixed = "fixed"
	// derived: rebuilt from encoded state, bounded as its source is.
	derived = "derived"
)

// collectionBound classifies one collection of State.
type collectionBound struct {
	path  string
	kind  string
	bound string
	// doc is text that docs/decisions.md holds where it writes the bound
	// down (checked verbatim).
	doc string
}

var stateCollectionBounds = []collectionBound{
	// Core.
	{"Ledger.Balances", perAccount, "free + reserved + one margin per market (market.MarketsMax) per account, and the venue's accounts; a zero balance is deleted", "`Ledger.Balances` holds an account's free"},
	{"Idem.Records", total, "IdemMaxRecords (500,000) and IdemMaxBytes (64 MiB); 24 h retention", "The idempotency store is bounded by bytes as well as count"},
	{"Idem.Records[].ReqHash", fixed, "a SHA-256", "The idempotency store is bounded by bytes as well as count"},
	{"Idem.Records[].Body", total, "counted in IdemMaxBytes", "The idempotency store is bounded by bytes as well as count"},
	{"Idem.Order", total, "the records plus holes, compacted once holes are half of it", "compacted once holes are half of it"},
	{"Idem.fair.tenants", derived, "one per tenant holding a record", "The tenants, their heap and each record's"},
	{"Idem.fair.tenants[].keys", derived, "the tenant's records", "The tenants, their heap and each record's"},
	{"Idem.fair.heap", derived, "one per tenant", "The tenants, their heap and each record's"},
	{"Idem.fair.heap[].keys", derived, "the tenant's records", "The tenants, their heap and each record's"},
	{"Nodes", operator, "raft members; a removed member's record is dropped (CmdNodeGone, node.NodeRecordGrace)", "A removed member's record leaves `State.Nodes`."},

	// Access.
	{"Access.Accounts", perAccount, "no deletion; at most SignupsPerHour new ones a rolling hour", "| accounts | no deletion"},
	{"Access.Accounts[].KeyIDs", perAccount, "access.MaxKeysPerAccount (200), access.MaxLiveKeys (20) live", "| keys per account |"},
	{"Access.Accounts[].FaucetGrantsTsMs", perAccount, "the last hour's grants, at most Faucet.GrantsPerHour", "| faucet grant times |"},
	{"Access.Keys", perAccount, "access.MaxKeysPerAccount per account", "| keys per account |"},
	{"Access.KeyByHash", perAccount, "one per key", "| keys per account |"},
	{"Access.SignupTsMs", total, "the signup cap (the last hour's signups)", "| signup window (`Access.SignupTsMs`) |"},

	// Funds.
	{"Funds.Deposits", perAccount, "funds.MaxDepositsPerAccount (500)", "| deposit records + per-account index |"},
	{"Funds.ByAccount", perAccount, "funds.MaxDepositsPerAccount", "| deposit records + per-account index |"},
	{"Funds.ByAccount[]", perAccount, "funds.MaxDepositsPerAccount", "| deposit records + per-account index |"},
	{"Funds.ByRailRef", money, "the kept deposits, and other rails' refs 30 days (RailRefRetentionMs)", "| deposit rail refs (`ByRailRef`) |"},
	{"Funds.ForgottenRefs", money, "refs of dropped Spark and L1 deposits, 30 days", "| deposit rail refs (`ByRailRef`) |"},
	{"Funds.Invoices", perAccount, "funds.MaxOpenInvoicesPerAccount (100) open, MaxListedInvoicesPerAccount (200) kept", "| open deposit invoices |"},
	{"Funds.InvoicesByAccount", perAccount, "funds.MaxListedInvoicesPerAccount", "| open deposit invoices |"},
	{"Funds.InvoicesByAccount[]", perAccount, "funds.MaxListedInvoicesPerAccount", "| open deposit invoices |"},
	{"Funds.InvoiceExpiries", perAccount, "the open invoices, rebuilt past twice them + 64", "| open deposit invoices |"},
	{"Funds.Withdrawals", perAccount, "funds.MaxOpenWithdrawalsPerAccount (100) open + MaxClosedWithdrawalsPerAccount (500) closed, closed ones held 2 days (money) up to funds.MaxClosedWithdrawalsHeld (2000)", "| open withdrawals |"},
	{"Funds.WithdrawalsByAccount", perAccount, "as Funds.Withdrawals", "| closed withdrawals + indexes"},
	{"Funds.WithdrawalsByAccount[]", perAccount, "as Funds.Withdrawals", "| closed withdrawals + indexes"},
	{"Funds.WithdrawalByRailRef", perAccount, "as Funds.Withdrawals", "| closed withdrawals + indexes"},
	{"Funds.WithdrawalByIdem", perAccount, "as Funds.Withdrawals", "| closed withdrawals + indexes"},
	{"Funds.WithdrawalByChange", perAccount, "as Funds.Withdrawals", "| closed withdrawals + indexes"},
	{"Funds.Open", perAccount, "funds.MaxOpenWithdrawalsPerAccount", "| open withdrawals |"},
	{"Funds.QueuedByPath", fixed, "one per withdrawal path (2)", "`QueuedByPath` one counter per path"},
	{"Funds.KnownDests", perAccount, "funds.MaxKnownDestinations (256)", "| known (first-seen) destinations |"},
	{"Funds.KnownDests[]", perAccount, "funds.MaxKnownDestinations (256)", "| known (first-seen) destinations |"},
	{"Funds.UsedTokens", total, "funds.MaxUsedTokens (1,000,000), pruned at expiry; each spent by a withdrawal", "| spent confirm tokens |"},
	{"Funds.UsedOrder", total, "as Funds.UsedTokens", "| spent confirm tokens |"},

	// Markets (operator and log time only).
	{"Market.MarketsByID", operator, "market.MarketsMax (64)", "| markets (`MarketsByID`) |"},
	{"Market.MarketsByID[].Funding", total, "market.FundingHistoryMax (100) per market", "| funding history |"},
	{"Market.MarketsByID[].Minute", total, "market.MinuteBarsMax (4 days) per market", "| candles |"},
	{"Market.MarketsByID[].Hour", total, "market.HourBarsMax (10 years) per market", "| candles |"},
	{"Market.MarketsByID[].Day", total, "market.DayBarsMax (100 years) per market", "| candles |"},
	{"Market.FeedsByID", operator, "market.FeedsMax (128), never deleted", "| feeds (`FeedsByID`) |"},
	{"Market.FeedsByID[].MarketIDs", operator, "the markets (64)", "| feeds (`FeedsByID`) |"},
	{"Market.FeedsByID[].Override.Points", operator, "market.OverridePointsMax (1,000)", "Scripts are at most 1,000 points"},

	// Trading.
	{"Trade.Orders", perAccount, "live (200) + kept closed (1000) orders of each account", "`OrderNos` (and the account's share of `State.Orders`)"},
	{"Trade.Orders[].ReqHash", fixed, "a SHA-256 of the placement", "`Order.ReqHash` a SHA-256"},
	{"Trade.Orders[].Legs", fixed, "a bracket's stop and take-profit (2)", "`Order.Legs` at most 2"},
	{"Trade.Accounts", perAccount, "one per account that traded or armed cancel-all-after", "`Accounts` holds one entry per account that ever"},
	{"Trade.Accounts[].OrderNos", perAccount, "RestingOrdersPerAccountMax + ClosedOrdersKept (1200)", "`OrderNos` (and the account's share of `State.Orders`)"},
	{"Trade.Accounts[].Positions", perAccount, "one per market (market.MarketsMax)", "`Positions` one per market"},
	{"Trade.Accounts[].Fills", perAccount, "trade.FillsKept (1000)", "`Closed` and `Fills` the newest"},
	{"Trade.Accounts[].Closed", perAccount, "trade.ClosedOrdersKept (1000)", "`Closed` and `Fills` the newest"},
	{"Trade.Accounts[].Triggers", perAccount, "trade.RestingOrdersPerAccountMax (200)", "`Live` and `Triggers` at most"},
	{"Trade.Accounts[].FundingFlows", perAccount, "trade.FundingFlowsKept (1000)", "`FundingFlows` and `Liquidations` the newest 1000"},
	{"Trade.Accounts[].Liquidations", perAccount, "trade.LiquidationsKept (1000)", "`FundingFlows` and `Liquidations` the newest 1000"},
	{"Trade.Accounts[].Live", perAccount, "trade.RestingOrdersPerAccountMax (200)", "`Live` and `Triggers` at most"},
	{"Trade.Accounts[].marginNames", derived, "one per market the account holds margin in", "`marginNames` (derived)"},
	{"Trade.BooksBehind", total, "one per market (market.MarketsMax)", "`BooksBehind` at most one entry per market"},
	{"Trade.Books", operator, "one per market (market.MarketsMax)", "Per market (`Books`, also"},
	{"Trade.Books[].Index.Entries", total, "twice market.PriceIndexEntriesMax per market", "the price index at most twice `PriceIndexEntriesMax`"},
	{"Trade.Books[].Index.rising", derived, "Index.Entries", "the price index at most twice `PriceIndexEntriesMax`"},
	{"Trade.Books[].Index.falling", derived, "Index.Entries", "the price index at most twice `PriceIndexEntriesMax`"},
	{"Trade.Books[].Liq.Entries", perAccount, "one per position", "the liquidation index one entry per position"},
	{"Trade.Books[].Liq.rising", derived, "Liq.Entries", "the liquidation index one entry per position"},
	{"Trade.Books[].Liq.falling", derived, "Liq.Entries", "the liquidation index one entry per position"},
	{"Trade.deadlines", derived, "one per armed account", "the cancel-all-after tree one"},
	{"Trade.holders", derived, "one per market with positions (market.MarketsMax)", "the holder sets (derived, never encoded) one entry per position"},
	{"Trade.holders[]", derived, "one per position", "the holder sets (derived, never encoded) one entry per position"},

	// USDx.
	{"USDx.Params.DynFeeCurve", operator, "the operator's curve", "`Params.DynFeeCurve` is the operator's"},
	{"USDx.Holders", perAccount, "one per account that held or quoted USDx", "Holders: one per"},
	{"USDx.Holders[].Unstakes", perAccount, "usdx.CoolingPerAccountMax (50) cooling + usdx.UnstakesKept (50) released", "Unstakes: 50 cooling per"},
	{"USDx.Holders[].Activity", perAccount, "usdx.ActivityKept (1000)", "Activity: 1000 per account"},
	{"USDx.Holders[].Sagas", perAccount, "usdx.SagasKept (200), queued ones at most usdx.QueuedPerAccountMax (50), redemptions held usdx.SagaRetainMs (2 days, money) up to usdx.SagasHeldMax (2000)", "Sagas: 200 per"},
	{"USDx.Holders[].Withdrawals", perAccount, "usdx.WithdrawalsKept (200), usdx.RequestedPerAccount (20) requested, paid ones held usdx.WithdrawalRetainMs (2 days, money) up to usdx.WithdrawalsHeldMax (2000)", "USDx withdrawals: 200 per"},
	{"USDx.Holders[].Quotes", perAccount, "usdx.QuotesPerAccountMax (20)", "Quotes: 20 open per account"},
	{"USDx.Quotes", perAccount, "usdx.QuotesPerAccountMax per account, dropped usdx.QuoteGraceMs after expiry", "Quotes: 20 open per account"},
	{"USDx.Sagas", perAccount, "as Holders[].Sagas", "Sagas: 200 per"},
	{"USDx.Sagas[].ReqHash", fixed, "unused (empty); a SHA-256 if set", "`Saga.ReqHash` a SHA-256 too"},
	{"USDx.Queue", perAccount, "usdx.QueuedPerAccountMax (50)", "at most 50 queued per account"},
	{"USDx.queuedBy", derived, "one per account with a queued redemption (USDx.Queue)", "counted per account in a derived map"},
	{"USDx.Cooling", perAccount, "usdx.CoolingPerAccountMax (50)", "Unstakes: 50 cooling per"},
	{"USDx.History", total, "usdx.WaterfallsKept (2000)", "Waterfall history: 2000 entries"},
	{"USDx.Buckets", total, "61 minute buckets", "Velocity buckets: 61"},
	{"USDx.Freezes", operator, "usdx.FreezesKept (1000)", "Freeze log: 1000 entries"},
	{"USDx.Frozen", operator, "usdx.FrozenMax (10,000)", "frozen addresses: 10,000"},
	{"USDx.Withdrawals", perAccount, "as Holders[].Withdrawals", "USDx withdrawals: 200 per"},
	{"USDx.InFlight", perAccount, "usdx.RequestedPerAccount (20)", "at most 20 in flight"},
	{"USDx.QuoteOrder", perAccount, "twice the open quotes + 20 (usdx.LevelQuoteOrderBounded)", "The expiry order of quotes (`QuoteOrder`)"},
	{"USDx.DepositRefs", total, "usdx.DepositRefsKept (10,000)", "Token deposit refs: 10,000"},
	{"USDx.DepositOrder", total, "usdx.DepositRefsKept (10,000)", "Token deposit refs: 10,000"},

	// Referral, promoter, leaderboards.
	{"Growth.Policy.Tiers", operator, "the operator's policy", "`Policy.Tiers` is the operator's"},
	{"Growth.Codes", perAccount, "one referral code per account + growth.PromoterCodesMax (20) per promoter", "`Codes` <= referrers + 20 per promoter"},
	{"Growth.Referrers", perAccount, "one per account", "`Referrers`,"},
	{"Growth.Referrers[].Referees", perAccount, "growth.RefereesPerReferrerMax (10,000); each referee binds once", "`Referrer.Referees` <= 10,000"},
	{"Growth.Referrers[].Pending", perAccount, "holdback days + 2 buckets", "`Referrer.Pending` <="},
	{"Growth.Referrers[].Earnings", perAccount, "growth.EarningsKept (1000)", "`Referrer.Earnings` newest"},
	{"Growth.Referrers[].Earned", perAccount, "growth.EarnedDaysKept (30)", "`Referrer.Earned` newest 30 days"},
	{"Growth.Bindings", perAccount, "one per account", "`Bindings`, `Promoters`"},
	{"Growth.VestDays", total, "days not yet vested (holdback days + 2 keys)", "`VestDays` holds only days not yet"},
	{"Growth.VestDays[]", perAccount, "one earner per account", "`VestDays` holds only days not yet"},
	{"Growth.Board.Traders", perAccount, "one per account", "`Board.Traders` and `Board.Handles` at most one per account"},
	{"Growth.Board.Traders[].Days", perAccount, "growth.TraderDaysKept (31)", "`Trader.Days` newest 31"},
	{"Growth.Board.Traders[].Snap.Windows", fixed, "one per window (3)", "`Trader.Snap.Windows` one per window"},
	{"Growth.Board.Traders[].Snap.Ranks", fixed, "one per board and window (6)", "`Trader.Snap.Windows` one per window"},
	{"Growth.Board.Traders[].Snap.Curve", perAccount, "30 points", "`Trader.Snap.Curve` <= 30 points"},
	{"Growth.Board.Handles", perAccount, "one per trader", "`Board.Traders` and `Board.Handles` at most one per account"},
	{"Growth.Board.Rows", fixed, "6 boards", "`Board.Rows` 6 boards x 100"},
	{"Growth.Board.Rows[]", fixed, "growth.BoardRowsMax (100)", "`Board.Rows` 6 boards x 100"},
	{"Growth.Promoters", perAccount, "one per account", "`Bindings`, `Promoters`"},
	{"Growth.Promoters[].Channels", perAccount, "growth.ChannelsMax (10)", "channels <= 10"},
	{"Growth.Promoters[].Jurisdictions", perAccount, "growth.JurisdictionsMax (50)", "jurisdictions <= 50"},
	{"Growth.Promoters[].Codes", perAccount, "growth.PromoterCodesMax (20)", "`Promoter.Codes` <= 20"},
	{"Growth.Promoters[].Acc.Referees", perAccount, "as Referrer.Referees", "`Promoter.Acc` is bounded as a `Referrer`"},
	{"Growth.Promoters[].Acc.Pending", perAccount, "as Referrer.Pending", "`Promoter.Acc` is bounded as a `Referrer`"},
	{"Growth.Promoters[].Acc.Earnings", perAccount, "as Referrer.Earnings", "`Promoter.Acc` is bounded as a `Referrer`"},
	{"Growth.Promoters[].Acc.Earned", perAccount, "as Referrer.Earned", "`Promoter.Acc` is bounded as a `Referrer`"},
	{"Growth.Promoters[].Days", perAccount, "growth.PromoterDaysKept (90)", "`Promoter.Days` newest 90"},
	{"Growth.PromoterCodes", perAccount, "growth.PromoterCodesMax per promoter", "`Codes` <= referrers + 20 per promoter"},

	// Proof of Reserves.
	{"PoR.Latest.Msat.Accounts", perAccount, "one leaf per account (the latest tree only)", "State keeps only the latest snapshot"},
	{"PoR.Latest.Msat.Tags", perAccount, "one leaf per account", "State keeps only the latest snapshot"},
	{"PoR.Latest.Msat.Amounts", perAccount, "one leaf per account", "State keeps only the latest snapshot"},
	{"PoR.Latest.Usdx.Accounts", perAccount, "one leaf per USDx holder", "State keeps only the latest snapshot"},
	{"PoR.Latest.Usdx.Tags", perAccount, "one leaf per USDx holder", "State keeps only the latest snapshot"},
	{"PoR.Latest.Usdx.Amounts", perAccount, "one leaf per USDx holder", "State keeps only the latest snapshot"},
	{"PoR.Latest.Problems", total, "10", "(sorted, at most 10, never an account id)"},
	{"PoR.History", total, "por.HistoryMax (1440)", "at most 1440 outcomes"},
	{"PoR.Pending.Snap.Msat.Accounts", perAccount, "one leaf per account (one pending tree)", "at most one pending"},
	{"PoR.Pending.Snap.Msat.Tags", perAccount, "one leaf per account", "at most one pending"},
	{"PoR.Pending.Snap.Msat.Amounts", perAccount, "one leaf per account", "at most one pending"},
	{"PoR.Pending.Snap.Usdx.Accounts", perAccount, "one leaf per USDx holder", "at most one pending"},
	{"PoR.Pending.Snap.Usdx.Tags", perAccount, "one leaf per USDx holder", "at most one pending"},
	{"PoR.Pending.Snap.Usdx.Amounts", perAccount, "one leaf per USDx holder", "at most one pending"},
	{"PoR.Pending.Snap.Problems", total, "10", "(sorted, at most 10, never an account id)"},
}

// TestEveryStateCollectionHasAWrittenBound fails for a collection of State
// that the table above does not classify (a new field must say what bounds
// it), for an entry whose collection no longer exists, and for a bound
// docs/decisions.md does not write down.
func TestEveryStateCollectionHasAWrittenBound(t *testing.T) {
	docs, err := os.ReadFile("../docs/decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	// The doc wraps lines; compare with every run of spaces and newlines
	// as one space.
	flat := strings.Join(strings.Fields(string(docs)), " ")
	found := stateCollections(t)
	listed := map[string]bool{}
	for _, b := range stateCollectionBounds {
		if listed[b.path] {
			t.Errorf("%s is listed twice", b.path)
		}
		listed[b.path] = true
		if _, ok := found[b.path]; !ok {
			t.Errorf("%s is listed but State has no such collection: remove or rename the entry", b.path)
		}
		switch b.kind {
		case perAccount, total, money, operator, fixed, derived:
		default:
			t.Errorf("%s: unknown kind %q", b.path, b.kind)
		}
		if b.bound == "" || b.doc == "" {
			t.Errorf("%s: needs a bound and where docs/decisions.md writes it down", b.path)
		} else if !strings.Contains(flat, strings.Join(strings.Fields(b.doc), " ")) {
			t.Errorf("%s: docs/decisions.md does not hold %q", b.path, b.doc)
		}
	}
	var missing []string
	for p := range found {
		if !listed[p] {
			missing = append(missing, p+" ("+found[p].String()+")")
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("State collection %s has no bound in stateCollectionBounds: classify it and write its bound in docs/decisions.md", p)
	}
}
