package fsm

import (
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// The trading book's part of the fast restore path (snapshot_fast.go):
// orders, accounts and the price indexes, each a job of its own.

func decTrade(r *fastRun, d *rd, s *trade.State) {
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				s.NextOrderNo = d.u64()
			case 2:
				r.spawn(d, func(d *rd) { s.Orders = decU64Map(d, decPtr(decOrder)) })
			case 3:
				r.spawn(d, func(d *rd) { s.Accounts = decStrMap(d, decPtr(decTradeAccount)) })
			case 4:
				r.spawn(d, func(d *rd) { s.Books = decStrMap(d, decPtr(decBook)) })
			case 5:
				s.NextPositionNo = d.u64()
			case 6:
				s.BooksBehind = d.strings()
			default:
				failf("unknown trade.State field")
			}
		})
	})
}

func decOrder(d *rd, o *trade.Order) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			o.No = d.u64()
		case 2:
			o.OrderID = d.str()
		case 3:
			o.AccountID = d.str()
		case 4:
			o.MarketID = d.strSmall()
		case 5:
			o.Side = trade.Side(d.i8())
		case 6:
			o.Type = d.strSmall()
		case 7:
			o.Contracts = d.i64()
		case 8:
			o.LimitQ8 = d.i64()
		case 9:
			o.ReduceOnly = d.bool()
		case 10:
			o.HasMaxSlippage = d.bool()
		case 11:
			o.MaxSlippageQ9 = d.i64()
		case 12:
			o.Status = d.strSmall()
		case 13:
			o.Reason = d.strSmall()
		case 14:
			o.ReservedMsat = d.i64()
		case 15:
			o.LevelQ8 = d.i64()
		case 16:
			o.ReqHash = d.bytes()
		case 17:
			o.CreatedTsMs = d.i64()
		case 18:
			o.UpdatedTsMs = d.i64()
		case 19:
			o.Seq = d.u64()
		case 20:
			o.Kind = d.strSmall()
		case 21:
			o.TriggerQ8 = d.i64()
		case 22:
			o.Dir = market.Direction(d.i8())
		case 23:
			o.TrigState = d.strSmall()
		case 24:
			o.OCOGroup = d.str()
		case 25:
			o.Parent = d.u64()
		case 26:
			o.Sibling = d.u64()
		case 27:
			o.Legs = d.u64s()
		case 28:
			o.Leverage = d.i64()
		case 29:
			o.Opened = d.i64()
		default:
			failf("unknown trade.Order field")
		}
	}
}

func decTradeAccount(d *rd, a *trade.Account) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			a.OrderNos = decStrMap(d, (*rd).u64)
		case 2:
			a.Positions = decStrMap(d, decPtr(decPosition))
		case 3:
			a.Fills = decSlice(d, decPtr(decFill))
		case 4:
			a.Closed = d.u64s()
		case 5:
			a.Resting = d.int()
		case 6:
			a.CancelAfterTsMs = d.i64()
		case 7:
			a.Triggers = d.u64s()
		case 8:
			a.FundingFlows = decSlice(d, decPtr(decFundingFlow))
		case 9:
			a.Liquidations = decSlice(d, decPtr(decLiquidation))
		case 10:
			a.Live = d.u64s()
		default:
			failf("unknown trade.Account field")
		}
	}
}

func decPosition(d *rd, p *trade.Position) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			p.Side = trade.Side(d.i8())
		case 2:
			p.Contracts = d.i64()
		case 3:
			p.EntryQ8 = d.i64()
		case 4:
			p.MarginMsat = d.i64()
		case 5:
			p.FundingClockTsMs = d.i64()
		case 6:
			p.ID = d.u64()
		default:
			failf("unknown trade.Position field")
		}
	}
}

func decFill(d *rd, f *trade.Fill) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			f.OrderID = d.str()
		case 2:
			f.AccountID = d.str()
		case 3:
			f.MarketID = d.strSmall()
		case 4:
			f.Side = trade.Side(d.i8())
		case 5:
			f.Closed = d.i64()
		case 6:
			f.Opened = d.i64()
		case 7:
			f.ExecQ8 = d.i64()
		case 8:
			f.OracleMidQ8 = d.i64()
		case 9:
			f.OracleConfQ9 = d.i64()
		case 10:
			f.OracleTsMs = d.i64()
		case 11:
			f.SpreadQ9 = d.i64()
		case 12:
			f.TradeNotionalMsat = d.i64()
		case 13:
			f.FeeMsat = d.i64()
		case 14:
			f.ImpactMsat = d.i64()
		case 15:
			f.RealizedPnlMsat = d.i64()
		case 16:
			f.FundingSettledMsat = d.i64()
		case 17:
			f.ReleasedMarginMsat = d.i64()
		case 18:
			f.ReservedMarginMsat = d.i64()
		case 19:
			f.DeficitMsat = d.i64()
		case 20:
			decPosition(d, &f.After)
		case 21:
			f.Seq = d.u64()
		case 22:
			f.TsMs = d.i64()
		case 23:
			f.Referral = decPtr(decReferral)(d)
		default:
			failf("unknown trade.Fill field")
		}
	}
}

func decReferral(d *rd, v *trade.Referral) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			v.Code = d.str()
		case 2:
			v.GrossFeeMsat = d.i64()
		case 3:
			v.DiscountMsat = d.i64()
		case 4:
			v.RewardMsat = d.i64()
		case 5:
			v.PolicyVersion = d.i64()
		default:
			failf("unknown trade.Referral field")
		}
	}
}

func decFundingFlow(d *rd, v *trade.FundingFlow) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			v.Seq = d.u64()
		case 2:
			v.BoundaryTsMs = d.i64()
		case 3:
			v.MarketID = d.strSmall()
		case 4:
			v.RateQ9 = d.i64()
		case 5:
			v.FlowMsat = d.i64()
		case 6:
			v.PaidMsat = d.i64()
		case 7:
			v.PositionID = d.u64()
		default:
			failf("unknown trade.FundingFlow field")
		}
	}
}

func decLiquidation(d *rd, v *trade.Liquidation) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			v.AccountID = d.str()
		case 2:
			v.PositionID = d.u64()
		case 3:
			v.MarketID = d.strSmall()
		case 4:
			v.Side = trade.Side(d.i8())
		case 5:
			v.Closed = d.i64()
		case 6:
			v.Partial = d.bool()
		case 7:
			v.ExecQ8 = d.i64()
		case 8:
			v.OracleMidQ8 = d.i64()
		case 9:
			v.OracleConfQ9 = d.i64()
		case 10:
			v.OracleTsMs = d.i64()
		case 11:
			v.SpreadQ9 = d.i64()
		case 12:
			v.RealizedPnlMsat = d.i64()
		case 13:
			v.PenaltyMsat = d.i64()
		case 14:
			v.RemainderMsat = d.i64()
		case 15:
			v.DeficitMsat = d.i64()
		case 16:
			v.InsuranceCoveredMsat = d.i64()
		case 17:
			v.ADLTriggered = d.bool()
		case 18:
			v.RemainingContracts = d.i64()
		case 19:
			v.RemainingMarginMsat = d.i64()
		case 20:
			v.Seq = d.u64()
		case 21:
			v.TsMs = d.i64()
		default:
			failf("unknown trade.Liquidation field")
		}
	}
}

func decBook(d *rd, b *trade.Book) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			b.Index = decPriceIndex(d)
		case 2:
			b.LastMidQ8 = d.i64()
		case 3:
			b.Liq = decPriceIndex(d)
		default:
			failf("unknown trade.Book field")
		}
	}
}

// decPriceIndex reads a PriceIndex, a struct without CBOR tags: its one
// exported field is keyed by name. The B-trees stay nil, as the
// reference leaves them; the index builds them on first use.
func decPriceIndex(d *rd) *market.PriceIndex {
	if d.null() {
		return nil
	}
	x := new(market.PriceIndex)
	n := d.mapN()
	for i := range n {
		if i > 0 || string(d.text()) != "Entries" {
			failf("unknown PriceIndex field")
		}
		x.Entries = decStrMap(d, decIndexEntry)
	}
	return x
}

func decIndexEntry(d *rd) (e market.IndexEntry) {
	n := d.mapN()
	var seen [2]bool
	for range n {
		switch string(d.text()) {
		case "Dir":
			if seen[0] {
				failf("duplicate IndexEntry field")
			}
			seen[0] = true
			e.Dir = market.Direction(d.i8())
		case "LevelQ8":
			if seen[1] {
				failf("duplicate IndexEntry field")
			}
			seen[1] = true
			e.LevelQ8 = d.i64()
		default:
			failf("unknown IndexEntry field")
		}
	}
	return e
}
