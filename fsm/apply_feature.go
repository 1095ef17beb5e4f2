package fsm

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature levels: how a change of apply behaviour reaches a running
// cluster without replicas diverging during a rolling upgrade.
//
// The cluster's level (State.FeatureLevel) starts at 0 and only rises, by
// CmdSetFeatureLevel, which an operator proposes once every member runs a
// build that implements the new level. Nothing about levels enters the
// replicated state before that: during a rolling upgrade old and new
// builds write and apply exactly the same entries, so their state hashes
// stay equal. The leader learns what each member's build implements by
// asking it (the admin listener's /internal/build-level; a build from
// before feature levels answers 404, meaning 0) and puts the answers in
// the command; the state machine checks them against its own record of
// the nodes, so the refusal is deterministic. A change of apply behaviour
// ships gated: `if c.St.FeatureLevel >= N { new } else { old }` with
// FeatureLevel raised to N in the same release, so an upgraded replica
// applies old entries exactly as the old build did, and the new behaviour
// starts at the same log index on every replica. The golden log
// (testdata/golden) replays every command type of a release to a recorded
// state hash, so an ungated change fails CI.
//
// Levels of this build:
//
//	0: the behaviour of every release before feature levels existed.
//	1: feature levels themselves (CmdSetFeatureLevel); no apply behaviour
//	   is gated on it yet.
//	2: the new domains (LevelDomains).
//	3: a referee counts once as active between two daily recounts
//	   (growth.LevelReferralRecount); a funding receiver is paid the exact
//	   amount rounded down once (trade.LevelExactFunding).
//	4: the idempotency store gives room at the expense of the tenant that
//	   holds the most, and keeps tombstones of answers it drops early
//	   (LevelIdemFair); an oracle print is refused when a market's open
//	   interest could not be valued at it, and held when it jumps past
//	   market.PrintJumpFactor until the next print confirms it
//	   (LevelPrintGuard); the last tenth of a market's price index takes
//	   only reduce-only entries (trade.LevelIndexReserve); funding a
//	   payer's margin cannot cover is charged to its entry
//	   (trade.LevelFundingCharge); a partial liquidation is sized on the
//	   figures it books (trade.LevelBookedPartial); a position that becomes
//	   liquidatable enters a full liquidation index
//	   (trade.LevelLiqIndexPast); a stake takes only what its shares are
//	   worth (usdx.LevelStakeAtCost); the USDx hedge waits for a halted
//	   market or a stale print (usdx.LevelHedgeHalts); a positive flow
//	   repays the uncovered shortfall first (usdx.LevelRepayShortfall).
//	5: the yield escrow belongs to the sUSDx shares: a stake pays for its
//	   part at the mark, a release takes its part in kind
//	   (usdx.LevelEscrowInPrice); an uncovered shortfall halts mints and
//	   stakes until it is repaid (usdx.LevelShortfallHaltsMints).
//	6: a bracket leg arms even when its market's price index is full
//	   (trade.LevelLegsArmPast); a USDx withdrawal's token-rail transfer id
//	   carries its seq, so a trimmed withdrawal's id is never paid again
//	   (usdx.LevelFreshRailIDs); the faucet grant is bounded at genesis and
//	   a faucet call the ledger could not credit is refused
//	   (LevelFaucetBounded).
//	7: a reduce-only entry takes room in the reducing reserve of a
//	   market's price index only while its account holds a position on
//	   the other side and its reduce-only entries there cover at most
//	   twice it (trade.LevelReserveProtects); every Proof of
//	   Reserves tree has at least two leaf slots, so its root hash commits
//	   to the total (LevelPoRRootIsParent); the PoR ledger sum is checked
//	   for overflow on its exact value, not on a map walk's running sum
//	   (LevelPoRSumExact); a print already stale when it lands fills no
//	   resting order and executes no trigger (trade.LevelStalePrintWaits);
//	   a market that is not halted changes its oracle
//	   feed only to one whose last print is within the jump guard of its
//	   price, and never to one that could not value its open interest
//	   (LevelFeedChangeGuard); a halted market's book does not act on
//	   prints, and what the price passed meanwhile is acted on when the
//	   market resumes or prints next (trade.LevelHaltResume); a Lightning
//	   withdrawal is refused while the account has another one to the same
//	   invoice that was not returned (funds.LevelInvoicePaidOnce); the
//	   USDx freeze log never drops an entry still waiting for the custody
//	   worker (usdx.LevelFreezesKeptPending).
//	8: what a sUSDx markdown's last whole USDx frees beyond the loss goes
//	   back to the stakers' yield escrow, not to the reserve
//	   (usdx.LevelMarkdownSurplusToStakers); a fill that opens contracts
//	   is refused (insufficient_margin) when it would leave its position
//	   under maintenance at the mid, instead of being liquidated in the
//	   same entry (trade.LevelOpensAboveMaintenance); a
//	   leaderboard day's return base takes in capital deposited after
//	   the day's first event (growth.LevelRoiCountsDeposits);
//	   a returned withdrawal past an account's closed-withdrawal bound is
//	   dropped at once, not held two days like a paid one
//	   (funds.LevelReturnedNotHeld);
//	   a bracket whose entry's fill leaves no position on the entry's side
//	   cancels its legs instead of arming them (trade.LevelLegsNeedPosition);
//	   a limit order whose maxSlippageQ9 is below its market's base spread
//	   (it could never fill) is refused (trade.LevelSlippageBelowSpread);
//	   an order id starting with "adl-", the prefix of auto-deleveraging's
//	   fills, is refused (trade.LevelADLIDsReserved); a bracket leg that
//	   executes for part of the bracket's position leaves the other leg
//	   armed for the rest (trade.LevelPartialLegsKeepSibling), and a
//	   bracket's executed entry stays among the account's closed orders
//	   while a leg of it is live (trade.LevelEntryKeptWithLegs);
//	   market parameters (a genesis catalogue, an operator's change) are
//	   refused when a maximum-size order's spread into a balanced book is
//	   not below (imRate - mmRate) / (1 + imRate), what an open at the
//	   most leverage holds above maintenance; a market already past it
//	   keeps trading and may change in any way that does not take it
//	   further past (LevelSpreadFitsMargin); the liquidation penalty is
//	   the notional x mmRate / 2 rounded up once, not x (mmRate / 2
//	   truncated), which for an odd mmRate undercharged
//	   (trade.LevelExactPenalty);
//	   USDx hedge contracts that close take their share of a hole in the
//	   hedge's margin with them: a redemption lowers the uncovered
//	   shortfall by its share, a markdown counts its contracts' share of
//	   the loss as covered (usdx.LevelHoleLeavesWithContracts); the quotes'
//	   expiry order drops ids of quotes already gone
//	   (usdx.LevelQuoteOrderBounded); the dynamic fee is the curve's exact
//	   rate x notional, rounded up once (usdx.LevelExactDynFee); an order
//	   naming an unknown market is 400 validation, not 404
//	   (LevelUnknownMarketIs400); the stats channel's funding frame
//	   carries its mark's oracleTsMs and the market's stalenessMs
//	   (LevelFundingFrameStamped); order and trigger events' data shows
//	   the view's seq, the seq of the order's latest change
//	   (trade.LevelViewsShowSeq); an account holds at most
//	   funds.MaxOpenWithdrawalsPerAccount open withdrawals
//	   (funds.LevelOpenWithdrawalsBounded); the Proof of Reserves drift
//	   counts the traders' open positions at the mark
//	   (LevelPoRDriftAtMark); a mint that would open the
//	   USDx hedge's position in a market that takes no new position is
//	   refused before it moves any money, instead of halting every
//	   replica (usdx.LevelHedgeNeedsRoom); an oracle print stamped in or
//	   before a market's seeded pre-launch history is refused, so it
//	   cannot turn a seeded daily bar into a real one
//	   (LevelPrintAfterHistory); a hedge-market funding
//	   boundary first releases the unstakes whose cooldown ended before
//	   it (usdx.LevelReleaseBeforeBoundary); the prices frame and an
//	   operator's market-change answer carry priceSource (oracle, pinned,
//	   scripted), so an operator's pin or script is visible
//	   (LevelPriceSourceShown); the leaderboards' recompute on the hour
//	   counts that hour's funding (growth.LevelBoardsAfterFunding); an
//	   operator approves or refuses a pending promoter application
//	   (CmdPromoterReview, growth.LevelPromoterReview); an order is
//	   refused oracle_stale while its market's feed holds a print that
//	   jumped past the guard (LevelHeldPrintStopsOrders), and USDx takes
//	   such a print for a stale one (usdx.LevelHeldPrintIsStale); a stake
//	   pays for the yield escrow's value below one USDx
//	   (usdx.LevelEscrowExactInPrice); the reserve's target and floor are
//	   measured on the interval's peak supply
//	   (usdx.LevelReserveBoundsAtPeak); an account's reduce-only entries
//	   use a market's index reserve for at most two entries per side,
//	   not only twice the position's contracts
//	   (trade.LevelReserveCountsEntries); a resting limit order a print
//	   crossed but could not fill goes back into a price index that
//	   bracket legs took past its bound, instead of halting the replica
//	   (trade.LevelReindexPast); a Lightning withdrawal is refused while
//	   the account has another one, not returned, to the same payment
//	   hash under another invoice string (a re-signed invoice), and a
//	   withdrawal's payment hash is checked and recorded
//	   (funds.LevelInvoiceHashPaidOnce); a stake is refused while the
//	   sUSDx share price it would be served is below 0.01 USDx
//	   (usdx.LevelStakeSharePriceFloor); a USDx withdrawal to an
//	   address whose freeze waits for the custody worker is refused as
//	   one to a frozen address (usdx.LevelPendingFreezeRefuses); a paid
//	   USDx withdrawal and a redemption's saga are held two days, so a
//	   late retry answers the first (usdx.LevelUSDxWithdrawalsHeld,
//	   usdx.LevelRedemptionsHeld), and a keyed stake or unstake carries
//	   its key's id (usdx.LevelKeyedStakesOnce); an account's Proof of
//	   Reserves tag is keyed by its oldest live key with the read scope,
//	   so a revoked (leaked) key no longer recognises the account's leaf
//	   (LevelPoRTagLiveKey), and an account without such a key by the
//	   seed, not by a revoked key (LevelPoRTagNoRevokedKey); an
//	   account's held closed withdrawals are capped at 2,000
//	   (funds.LevelClosedWithdrawalsCapped).
//	9: a USDx markdown closes as many hedge orders as the loss needs
//	   (usdx.LevelMarkdownInChunks), and the mint velocity's rolling
//	   hour counts a minute until its end is an hour old
//	   (usdx.LevelVelocityWholeHour); a bracket entry that opens fewer
//	   contracts than it has (it first closed an opposite position)
//	   sizes its legs to what it opened (trade.LevelLegsSizedToEntry).
//	10: a Proof of Reserves snapshot is published por.PublishDelayMs
//	   after the entry whose time made it due, still of the state at that
//	   entry, so a node builds it beside apply (LevelPoRBesideApply).
//	11: an account past its USDx quote bound loses its oldest expired
//	   quote, then its oldest redeem quote, before an open mint quote
//	   (usdx.LevelQuotesKeepOpenMints).
//	12: the dead-man switches cancel at most trade.CancelAfterFireBudget
//	   orders (plus one account's) in one entry and leave the due
//	   switches after that to the next entries, and the refresh of a
//	   switch so left due fires it first (trade.LevelCancelAfterBudget).
//	13: one act on a market's book (a print, a funding boundary, an
//	   order's sweep) liquidates and checks crossed orders and triggers
//	   for at most trade.BookActBudget, and the next entries continue
//	   what it left against their own print (trade.LevelBookBudget);
//	   one print pays at most usdx.QueueDrainBudget queued redemptions,
//	   the next prints the rest (usdx.LevelQueueDrainBudget).
const FeatureLevel uint32 = 13

// LevelDomains is the level that turns on USDx (issue 13), the referral
// and leaderboard programmes (issue 15) and Proof of Reserves (issue 14):
// below it their state does not exist, their commands are refused as
// feature_unavailable and their timers and hooks do nothing, so a build
// with them applies an older cluster's log exactly as the build before
// them did. A new cluster's genesis starts at the build's level.
const LevelDomains uint32 = 2

// DomainsOn reports whether the cluster runs at LevelDomains or above.
func (st *State) DomainsOn() bool { return st.FeatureLevel >= LevelDomains && st.USDx != nil }

// enableDomains creates the state of the domains LevelDomains turns on.
func enableDomains(st *State) {
	if st.FeatureLevel < LevelDomains {
		return
	}
	if st.USDx == nil {
		st.USDx = usdx.NewState()
	}
	if st.Growth == nil {
		st.Growth = growth.NewState()
	}
	if st.PoR == nil {
		st.PoR = por.NewState()
	}
}

// registerDomain registers a handler of a LevelDomains command: below the
// level it is refused, changing nothing.
func registerDomain(t CmdType, h handler) {
	register(t, func(c *Ctx) (int, any, *wire.Refusal) {
		if !c.St.DomainsOn() {
			return 0, nil, wire.Refuse(http.StatusServiceUnavailable, wire.CodeFeatureUnavailable,
				"this cluster runs at feature level %d; this command needs level %d (perpd admin feature-level --raise %d once every node runs this build)",
				c.St.FeatureLevel, LevelDomains, LevelDomains)
		}
		return h(c)
	})
}

// CmdSetFeatureLevel raises the cluster's feature level (admin).
const CmdSetFeatureLevel CmdType = 7

func init() { register(CmdSetFeatureLevel, applySetFeatureLevel) }

// FeatureLevelPayload asks for a new cluster feature level, with the level
// each node's build implements as the leader found it.
type FeatureLevelPayload struct {
	Level uint32            `cbor:"1,keyasint"`
	Nodes []AdvertisedLevel `cbor:"2,keyasint"`
}

// AdvertisedLevel is the highest level one node's build implements.
type AdvertisedLevel struct {
	ID    string `cbor:"1,keyasint" json:"id"`
	Level uint32 `cbor:"2,keyasint" json:"level"`
}

// FeatureLevelResult is the cluster's level after the command.
type FeatureLevelResult struct {
	FeatureLevel uint32 `json:"featureLevel"`
}

// applySetFeatureLevel raises the level. It is refused when the level does
// not rise, or when a node the state records is missing from the payload
// or implements less. A replica whose own build does not implement the
// level cannot apply what follows correctly, so it stops (fail-stop)
// instead of diverging: that only happens when an old build replays a log
// raised without it, and the fix is to run the new build.
func applySetFeatureLevel(c *Ctx) (int, any, *wire.Refusal) {
	var p FeatureLevelPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if p.Level <= c.St.FeatureLevel {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"the cluster is at feature level %d; levels only rise", c.St.FeatureLevel)
	}
	levels := make(map[string]uint32, len(p.Nodes))
	for _, n := range p.Nodes {
		levels[n.ID] = n.Level
	}
	ids := make([]string, 0, len(c.St.Nodes))
	for id := range c.St.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var short []string
	for _, id := range ids {
		if l, ok := levels[id]; !ok || l < p.Level {
			short = append(short, fmt.Sprintf("%s (%d)", id, l))
		}
	}
	if len(short) > 0 {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"node(s) %v do not run a build that implements feature level %d: upgrade them first", short, p.Level)
	}
	if len(c.St.Nodes) == 0 {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "no node is recorded yet")
	}
	if p.Level > FeatureLevel {
		panic(fmt.Sprintf("the log raises the feature level to %d and this build implements %d at most: run a newer build", p.Level, FeatureLevel))
	}
	c.St.FeatureLevel = p.Level
	enableDomains(c.St)
	return http.StatusOK, FeatureLevelResult{FeatureLevel: p.Level}, nil
}
