package trade

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tidwall/btree"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
)

// Bounds on what the trading state keeps (every collection has one).
const (
	// RestingOrdersPerAccountMax bounds an account's live orders: resting
	// limit orders and live triggers (a bracket counts each of its parts).
	RestingOrdersPerAccountMax = 200
	// ClosedOrdersKept is how many filled or canceled orders an account
	// keeps for GET /v1/orders; older ones are dropped, oldest first, and
	// their order ids become free again.
	ClosedOrdersKept = 1000
	// FillsKept is how many fills an account keeps for GET /v1/fills.
	FillsKept = 1000
	// OrderIDLenMax is the longest order id (the idempotency key's bound).
	OrderIDLenMax = 255
	// FundingFlowsKept and LiquidationsKept bound an account's funding
	// and liquidation histories (newest kept).
	FundingFlowsKept = 1000
	LiquidationsKept = 1000
)

// Order statuses of the order views (SPEC section 3), and the two
// creation-only ones. A trigger's order view says accepted while it is
// live, filled once executed, canceled when cancelled and rejected when it
// was blocked.
const (
	StatusAccepted = "accepted" // live: a resting limit order or a live trigger
	StatusFilled   = "filled"
	StatusCanceled = "canceled"
	StatusRejected = "rejected"
	StatusResting  = "resting" // creation answer of a limit order that rests
	StatusWorking  = "working" // creation answer of a trigger or a bracket waiting for its entry
)

// Order types (SPEC's order table).
const (
	TypeMarket           = "market"
	TypeLimit            = "limit"
	TypeStopMarket       = "stop_market"
	TypeTakeProfitMarket = "take_profit_market"
)

// State is the trading book: orders, positions and fills per account, and
// per market the index of resting limit orders.
type State struct {
	// NextOrderNo numbers orders in placement order; the number keys the
	// price index (zero-padded, so ties at one level fill oldest first).
	NextOrderNo uint64 `cbor:"1,keyasint"`
	// Orders holds every kept order (resting and recently closed) by number.
	Orders   map[uint64]*Order   `cbor:"2,keyasint"`
	Accounts map[string]*Account `cbor:"3,keyasint"`
	Books    map[string]*Book    `cbor:"4,keyasint"`

	// NextPositionNo numbers positions (positionId) as they open.
	NextPositionNo uint64 `cbor:"5,keyasint,omitempty"`

	// BooksBehind lists, sorted, the markets whose book an act left at
	// its budget (LevelBookBudget): due liquidations or crossed orders
	// wait for the next entries (ContinueBooks). At most one entry per
	// market, so MarketsMax; empty (and not encoded) below that level.
	BooksBehind []string `cbor:"6,keyasint,omitempty"`

	// deadlines orders the armed cancel-all-after switches (cancelafter.go);
	// derived from Accounts, never serialised.
	deadlines *btree.BTreeG[deadline]
	// holders lists each market's position holders (holders.go);
	// derived from Accounts, never serialised.
	holders map[string]*btree.BTreeG[string]
}

// Account is one trader's orders, positions and fills.
type Account struct {
	// OrderNos maps the account's order ids to order numbers.
	OrderNos  map[string]uint64    `cbor:"1,keyasint"`
	Positions map[string]*Position `cbor:"2,keyasint"`
	// Fills are oldest first, at most FillsKept.
	Fills []*Fill `cbor:"3,keyasint"`
	// Closed lists closed order numbers, oldest first, at most ClosedOrdersKept.
	Closed []uint64 `cbor:"4,keyasint"`
	// Resting counts the live orders (resting limits and live triggers).
	Resting int `cbor:"5,keyasint"`
	// CancelAfterTsMs is the armed cancel-all-after deadline, 0 when
	// disarmed (cancelafter.go).
	CancelAfterTsMs int64 `cbor:"6,keyasint,omitempty"`
	// Triggers lists the live triggers' order numbers, ascending.
	Triggers []uint64 `cbor:"7,keyasint,omitempty"`
	// FundingFlows and Liquidations are oldest first, bounded.
	FundingFlows []*FundingFlow `cbor:"8,keyasint,omitempty"`
	Liquidations []*Liquidation `cbor:"9,keyasint,omitempty"`
	// Live lists the live orders' numbers (resting limits and live
	// triggers), ascending, so that cancelling them never walks the
	// closed history.
	Live []uint64 `cbor:"10,keyasint,omitempty"`

	// The account's ledger account names, made on first use and kept
	// (ledgerFree, ledgerReserved, ledgerMargin): every fill would
	// otherwise build its free and margin names afresh. Derived from the
	// account id, never encoded.
	freeName, reservedName string
	marginNames            []marginName
}

// marginName is an account's margin ledger account in one market.
type marginName struct{ marketID, name string }

// ledgerFree is ledger.Free(id) for the account a, whose id is id.
func (a *Account) ledgerFree(id string) string {
	if a.freeName == "" {
		a.freeName = ledger.Free(id)
	}
	return a.freeName
}

// ledgerReserved is ledger.Reserved(id) for the account a, whose id is id.
func (a *Account) ledgerReserved(id string) string {
	if a.reservedName == "" {
		a.reservedName = ledger.Reserved(id)
	}
	return a.reservedName
}

// ledgerMargin is ledger.Margin(id, marketID) for the account a, whose id
// is id. Markets are few, so a list does.
func (a *Account) ledgerMargin(id, marketID string) string {
	for _, m := range a.marginNames {
		if m.marketID == marketID {
			return m.name
		}
	}
	n := ledger.Margin(id, marketID)
	a.marginNames = append(a.marginNames, marginName{marketID, n})
	return n
}

// Book is one market's resting limit orders and armed triggers, indexed by
// the price at which the oracle mid must arrive for them to be checked.
type Book struct {
	Index *market.PriceIndex `cbor:"1,keyasint"`
	// LastMidQ8 is the mid the index was last checked against.
	LastMidQ8 int64 `cbor:"2,keyasint"`
	// Liq is the liquidation index: one entry per position, keyed by
	// account id, at the level where it becomes liquidatable (risk.go).
	Liq *market.PriceIndex `cbor:"3,keyasint,omitempty"`
}

// Order is a market or limit order, or a trigger (Kind set): a market
// order that waits, armed in the price index, for the mid to reach its
// level. A bracket is an entry (a market order or an entry trigger) whose
// Legs are a stop and/or a take-profit trigger in one OCO group.
type Order struct {
	No             uint64 `cbor:"1,keyasint"`
	OrderID        string `cbor:"2,keyasint"`
	AccountID      string `cbor:"3,keyasint"`
	MarketID       string `cbor:"4,keyasint"`
	Side           Side   `cbor:"5,keyasint"`
	Type           string `cbor:"6,keyasint"`
	Contracts      int64  `cbor:"7,keyasint"`
	LimitQ8        int64  `cbor:"8,keyasint,omitempty"`
	ReduceOnly     bool   `cbor:"9,keyasint,omitempty"`
	HasMaxSlippage bool   `cbor:"10,keyasint,omitempty"`
	MaxSlippageQ9  int64  `cbor:"11,keyasint,omitempty"`
	Status         string `cbor:"12,keyasint"`
	Reason         string `cbor:"13,keyasint,omitempty"`
	ReservedMsat   int64  `cbor:"14,keyasint,omitempty"`
	LevelQ8        int64  `cbor:"15,keyasint,omitempty"`
	ReqHash        []byte `cbor:"16,keyasint"`
	CreatedTsMs    int64  `cbor:"17,keyasint"`
	UpdatedTsMs    int64  `cbor:"18,keyasint"`
	// Seq is the seq of the order's latest change (architecture.md).
	Seq uint64 `cbor:"19,keyasint"`

	// Kind is the trigger kind (entry, stop, take_profit); empty for a
	// market or limit order.
	Kind      string           `cbor:"20,keyasint,omitempty"`
	TriggerQ8 int64            `cbor:"21,keyasint,omitempty"`
	Dir       market.Direction `cbor:"22,keyasint,omitempty"`
	// TrigState is the trigger's status (SPEC's trigger view).
	TrigState string `cbor:"23,keyasint,omitempty"`
	OCOGroup  string `cbor:"24,keyasint,omitempty"`
	// Parent is a bracket leg's entry; Sibling the other leg (0: none).
	Parent  uint64 `cbor:"25,keyasint,omitempty"`
	Sibling uint64 `cbor:"26,keyasint,omitempty"`
	// Legs are a bracket entry's legs.
	Legs []uint64 `cbor:"27,keyasint,omitempty"`
	// Leverage is what the order asked for (0: maxLeverage).
	Leverage int64 `cbor:"28,keyasint,omitempty"`
	// Opened is what a bracket entry opened on its side when that is
	// fewer than its Contracts (it first closed an opposite position),
	// from LevelLegsSizedToEntry; 0 otherwise.
	Opened int64 `cbor:"29,keyasint,omitempty"`
}

// Fill is a fill record with every field of SPEC's Fill.
type Fill struct {
	OrderID            string   `cbor:"1,keyasint"`
	AccountID          string   `cbor:"2,keyasint"`
	MarketID           string   `cbor:"3,keyasint"`
	Side               Side     `cbor:"4,keyasint"`
	Closed             int64    `cbor:"5,keyasint,omitempty"`
	Opened             int64    `cbor:"6,keyasint,omitempty"`
	ExecQ8             int64    `cbor:"7,keyasint"`
	OracleMidQ8        int64    `cbor:"8,keyasint"`
	OracleConfQ9       int64    `cbor:"9,keyasint"`
	OracleTsMs         int64    `cbor:"10,keyasint"`
	SpreadQ9           int64    `cbor:"11,keyasint"`
	TradeNotionalMsat  int64    `cbor:"12,keyasint"`
	FeeMsat            int64    `cbor:"13,keyasint"`
	ImpactMsat         int64    `cbor:"14,keyasint,omitempty"`
	RealizedPnlMsat    int64    `cbor:"15,keyasint,omitempty"`
	FundingSettledMsat int64    `cbor:"16,keyasint,omitempty"`
	ReleasedMarginMsat int64    `cbor:"17,keyasint,omitempty"`
	ReservedMarginMsat int64    `cbor:"18,keyasint,omitempty"`
	DeficitMsat        int64    `cbor:"19,keyasint,omitempty"`
	After              Position `cbor:"20,keyasint"`
	Seq                uint64   `cbor:"21,keyasint"`
	TsMs               int64    `cbor:"22,keyasint"`
	// Referral is the referral block of a referred account's fill (set by
	// Env.FeeSplit); FeeMsat is then the fee after its discount.
	Referral *Referral `cbor:"23,keyasint,omitempty"`
}

// Referral is how a referred account's fill fee was split: the gross
// taker fee, the referee's discount (paid back to the trader), the
// referrer's reward (moved to the referral payable) and the policy version
// that priced them.
type Referral struct {
	Code          string `cbor:"1,keyasint"`
	GrossFeeMsat  int64  `cbor:"2,keyasint"`
	DiscountMsat  int64  `cbor:"3,keyasint,omitempty"`
	RewardMsat    int64  `cbor:"4,keyasint,omitempty"`
	PolicyVersion int64  `cbor:"5,keyasint"`
}

// NewState returns an empty trading book.
func NewState() *State {
	return &State{Orders: map[uint64]*Order{}, Accounts: map[string]*Account{}, Books: map[string]*Book{}}
}

// FillNil gives a decoded state non-nil maps.
func (s *State) FillNil() {
	if s.Orders == nil {
		s.Orders = map[uint64]*Order{}
	}
	if s.Accounts == nil {
		s.Accounts = map[string]*Account{}
	}
	if s.Books == nil {
		s.Books = map[string]*Book{}
	}
	for _, a := range s.Accounts {
		if a.OrderNos == nil {
			a.OrderNos = map[string]uint64{}
		}
		if a.Live == nil && a.Resting > 0 {
			// A state from before the list existed: derive it.
			for _, no := range a.OrderNos {
				if o := s.Orders[no]; o != nil && o.Status == StatusAccepted {
					a.Live = append(a.Live, no)
				}
			}
			slices.Sort(a.Live)
		}
		if a.Positions == nil {
			a.Positions = map[string]*Position{}
		}
	}
	for _, b := range s.Books {
		if b.Index == nil {
			b.Index = market.NewPriceIndex()
		}
	}
}

func (s *State) account(id string) *Account {
	a, ok := s.Accounts[id]
	if !ok {
		a = &Account{OrderNos: map[string]uint64{}, Positions: map[string]*Position{}}
		s.Accounts[id] = a
	}
	return a
}

func (s *State) book(marketID string) *Book {
	b, ok := s.Books[marketID]
	if !ok {
		b = &Book{Index: market.NewPriceIndex()}
		s.Books[marketID] = b
	}
	return b
}

// Account returns an account's trading account, nil before its first
// order. An order's path looks it up once and hands it on (PriorIn,
// PlaceIn): the accounts map is large, and each probe costs.
func (s *State) Account(accountID string) *Account { return s.Accounts[accountID] }

// Position returns an account's position in a market (zero when flat).
func (s *State) Position(accountID, marketID string) Position {
	return s.Accounts[accountID].position(marketID)
}

// position is a's position in a market (zero when flat or a is nil).
func (a *Account) position(marketID string) Position {
	if a != nil {
		if p, ok := a.Positions[marketID]; ok {
			return *p
		}
	}
	return Position{}
}

// Order returns an account's order by id.
func (s *State) Order(accountID, orderID string) (*Order, bool) {
	return s.orderIn(s.Accounts[accountID], orderID)
}

// orderIn is Order for the account a (nil: none yet).
func (s *State) orderIn(a *Account, orderID string) (*Order, bool) {
	if a == nil {
		return nil, false
	}
	no, ok := a.OrderNos[orderID]
	if !ok {
		return nil, false
	}
	o, ok := s.Orders[no]
	return o, ok
}

// indexID is an order's key in the price index: its number in 20 digits,
// zero-padded (fmt's %020d, which every uint64 fills exactly), so that
// keys sort as numbers. Written by hand: every resting order and cancel
// makes one.
func indexID(no uint64) string {
	var b [20]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + no%10)
		no /= 10
	}
	return string(b[:])
}

// CheckInvariants verifies what the trading book promises the ledger, for
// tests and the simulation: each account's Reserved balance is what its
// resting orders reserve, each position's margin is its Margin balance,
// no margin balance exists without a position, and each market's open
// interest is the sum of the positions on each side (withOI; tests of other
// domains set open interest directly, without positions).
//
// It also checks the liquidation index (every position at its level) and
// that no position is under maintenance at a fresh print of a market that
// is not halted, at log time nowMs.
func (s *State) CheckInvariants(l *ledger.Ledger, m *market.State, withOI bool, nowMs int64) error {
	reserved := map[string]int64{}
	resting := map[string]int{}
	triggers := map[string]int{}
	indexed := map[string]int{}
	for no, o := range s.Orders {
		if o.Status != StatusAccepted {
			if o.ReservedMsat != 0 {
				return fmt.Errorf("closed order %s/%s still reserves %d", o.AccountID, o.OrderID, o.ReservedMsat)
			}
			continue
		}
		reserved[o.AccountID] += o.ReservedMsat
		resting[o.AccountID]++
		if o.Kind != "" {
			if err := s.checkTrigger(o); err != nil {
				return err
			}
			triggers[o.AccountID]++
			if o.TrigState == TrigResting {
				continue
			}
		}
		indexed[o.MarketID]++
		e, ok := s.Books[o.MarketID].Index.Entries[indexID(no)]
		if !ok || e.LevelQ8 != o.LevelQ8 {
			return fmt.Errorf("live order %s/%s is not indexed at %d", o.AccountID, o.OrderID, o.LevelQ8)
		}
	}
	for mid, b := range s.Books {
		if b.Index.Len() != indexed[mid] {
			return fmt.Errorf("market %s: %d index entries, %d live orders indexed", mid, b.Index.Len(), indexed[mid])
		}
	}
	for i, mid := range s.BooksBehind {
		if _, ok := s.Books[mid]; !ok || (i > 0 && s.BooksBehind[i-1] >= mid) {
			return fmt.Errorf("books behind %v: not sorted, unique markets with a book", s.BooksBehind)
		}
	}
	oi := map[string][2]int64{}
	ids := make([]string, 0, len(s.Accounts))
	for id := range s.Accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := s.Accounts[id]
		if got := l.Balance(ledger.Reserved(id)); got != reserved[id] {
			return fmt.Errorf("account %s: reserved balance %d, resting orders need %d", id, got, reserved[id])
		}
		if a.Resting != resting[id] {
			return fmt.Errorf("account %s: resting count %d, orders %d", id, a.Resting, resting[id])
		}
		if len(a.Live) != resting[id] {
			return fmt.Errorf("account %s: %d live orders listed, %d live", id, len(a.Live), resting[id])
		}
		if len(a.Triggers) != triggers[id] {
			return fmt.Errorf("account %s: %d triggers listed, %d live", id, len(a.Triggers), triggers[id])
		}
		for mid, p := range a.Positions {
			if p.Contracts <= 0 || p.EntryQ8 <= 0 {
				return fmt.Errorf("account %s %s: stored flat or invalid position %+v", id, mid, *p)
			}
			if got := l.Balance(ledger.Margin(id, mid)); got != p.MarginMsat {
				return fmt.Errorf("account %s %s: margin balance %d, position says %d", id, mid, got, p.MarginMsat)
			}
			v := oi[mid]
			if p.Side == Long {
				v[0] += p.Contracts
			} else {
				v[1] += p.Contracts
			}
			oi[mid] = v
		}
	}
	if withOI {
		for mid, ms := range m.MarketsByID {
			if v := oi[mid]; ms.LongOIContracts != v[0] || ms.ShortOIContracts != v[1] {
				return fmt.Errorf("market %s: open interest %d/%d, positions %d/%d", mid, ms.LongOIContracts, ms.ShortOIContracts, v[0], v[1])
			}
		}
	}
	if err := s.checkHolders(); err != nil {
		return err
	}
	if err := s.checkDeadlines(); err != nil {
		return err
	}
	if err := s.checkLiquidationIndex(m, nowMs); err != nil {
		return err
	}
	// Any order will do (the first offender found is reported); sorting
	// every ledger account name on each entry would dominate the check.
	for name, bal := range l.Balances {
		rest, ok := strings.CutPrefix(name, "acct:")
		id, mid, isMargin := strings.Cut(rest, ":margin:")
		if !ok || !isMargin {
			continue
		}
		if bal != 0 && s.Position(id, mid).Contracts == 0 {
			return fmt.Errorf("margin account %s holds %d without a position", name, bal)
		}
	}
	return nil
}
