package fsm

import (
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
)

// StateVersion is the snapshot format version. Bump it with a migration in
// decodeState when State changes incompatibly; additive fields need no bump.
const StateVersion = 1

// State is everything the replicated log decides. It is encoded whole (in
// canonical CBOR) for snapshots and the state hash.
type State struct {
	Version int    `cbor:"1,keyasint"`
	NowMs   int64  `cbor:"2,keyasint"`
	Seq     uint64 `cbor:"3,keyasint"`
	// Genesis is set once, by the first leader of a new cluster.
	Genesis *Genesis             `cbor:"4,keyasint,omitempty"`
	Ledger  *ledger.Ledger       `cbor:"5,keyasint"`
	Idem    *IdemStore           `cbor:"6,keyasint"`
	Nodes   map[string]*NodeMeta `cbor:"7,keyasint"`
	Access  *access.State        `cbor:"8,keyasint"`
	Funds   *funds.State         `cbor:"9,keyasint"`
	Market  *market.State        `cbor:"10,keyasint"`
	Trade   *trade.State         `cbor:"11,keyasint"`
	// USDx is the dollar unit, its hedge bookkeeping and sUSDx (issue 13).
	USDx *usdx.State `cbor:"20,keyasint,omitempty"`
	// Growth is the referral programme and the leaderboards (key 15, so
	// that keys 12-14 stay free for the domains landing beside it).
	Growth *growth.State `cbor:"15,keyasint,omitempty"`
	// PoR is Proof of Reserves: the latest liability trees (issue 14).
	PoR *por.State `cbor:"30,keyasint,omitempty"`
	// FeatureLevel gates changes of apply behaviour (apply_feature.go);
	// omitted at 0, so states from before it encode as they did.
	FeatureLevel uint32 `cbor:"40,keyasint,omitempty"`
}

// Genesis records how the cluster was born.
type Genesis struct {
	TsMs int64 `cbor:"1,keyasint"`
	// Seed feeds deterministic derivations such as the seeded pre-launch
	// candle history. Drawn by the first leader.
	Seed       uint64 `cbor:"2,keyasint"`
	Deployment string `cbor:"3,keyasint"`
}

// NodeMeta is a member's advertised addresses, so any node can name the
// leader's HTTP and admin endpoints.
type NodeMeta struct {
	ID    string `cbor:"1,keyasint"`
	Raft  string `cbor:"2,keyasint"`
	HTTP  string `cbor:"3,keyasint"`
	Admin string `cbor:"4,keyasint"`
}

// NewState returns the empty state of a fresh cluster.
func NewState() *State {
	return &State{
		Version: StateVersion,
		Ledger:  ledger.New(),
		Idem:    newIdemStore(),
		Nodes:   map[string]*NodeMeta{},
		Access:  access.NewState(),
		Funds:   funds.NewState(),
		Market:  market.NewState(),
		Trade:   trade.NewState(),
	}
}

// NextSeq allocates the next record sequence number. Fills, deposits,
// withdrawals, liquidations and funding flows share this space.
func (s *State) NextSeq() uint64 {
	s.Seq++
	return s.Seq
}
