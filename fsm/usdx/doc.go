// Package usdx is USDx, the venue's dollar unit, and sUSDx, its staking
// junior tranche (SPEC sections 2, 3, 4, 7 and 8; DESIGN's primer: Ethena
// USDe/sUSDe, in sats).
//
// A mint debits the trader's sats and, in the same entry, opens one
// 1-dollar short contract per USDx in the inverse BTC market on the venue's
// own trading account (HedgeAccount), at leverage 1, through the trading
// book (fsm/trade): the hedge is a real position, with real fills, margin,
// funding and open interest. The backing identity, USDx supply == hedge
// contracts, is checked after every entry (CheckInvariants), together with
// the unit's own conservation: supply == holders' USDx + pending
// redemptions + the staking pool + withdrawals in flight + USDx outside
// custody, and sUSDx supply == holders' sUSDx + cooling sUSDx.
//
// Like the other domain packages it is pure and deterministic: time comes
// from the entry, integers only, maps are walked in sorted order, and every
// formula states its rounding (always in the venue's favour, or, inside the
// staking pool, in the favour of the stakers who stay).
package usdx
