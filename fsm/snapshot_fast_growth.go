package fsm

import "github.com/perpd/perpd/fsm/growth"

// The leaderboards' part of the fast restore path (snapshot_fast.go).

// decGrowth reads the leaderboards' per-trader records by hand; the
// referral programme's maps go to the reference decoder, on a worker.
func decGrowth(r *fastRun, d *rd, s *growth.State) {
	ref := func(v any) { r.spawn(d, func(d *rd) { d.delegate(v) }) }
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				ref(&s.Policy)
			case 2:
				ref(&s.Codes)
			case 3:
				ref(&s.Referrers)
			case 4:
				ref(&s.Bindings)
			case 5:
				ref(&s.VestDays)
			case 6:
				s.VestedThroughDay = d.i64()
			case 7:
				s.ActiveDay = d.i64()
			case 8:
				if d.null() {
					s.Board = nil
					return
				}
				if s.Board == nil {
					s.Board = new(growth.Boards)
				}
				decBoards(r, d, s.Board)
			case 9:
				ref(&s.Promoters)
			case 10:
				ref(&s.PromoterCodes)
			case 11:
				s.ActiveCountedTsMs = d.i64()
			default:
				failf("unknown growth.State field")
			}
		})
	})
}

func decBoards(r *fastRun, d *rd, b *growth.Boards) {
	ref := func(v any) { r.spawn(d, func(d *rd) { d.delegate(v) }) }
	d.nested(func() {
		decStruct(d, func(k int) {
			switch k {
			case 1:
				r.spawn(d, func(d *rd) { b.Traders = decStrMap(d, decPtr(decTrader)) })
			case 2:
				r.spawn(d, func(d *rd) { b.Handles = decStrMap(d, (*rd).str) })
			case 3:
				b.ComputedTsMs = d.i64()
			case 4:
				b.NextTsMs = d.i64()
			case 5:
				ref(&b.Rows)
			case 6:
				ref(&b.Gates)
			default:
				failf("unknown growth.Boards field")
			}
		})
	})
}

func decTrader(d *rd, t *growth.Trader) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			t.Handle = d.str()
		case 2:
			t.DisplayName = d.str()
		case 3:
			t.OptedOut = d.bool()
		case 4:
			t.SinceTsMs = d.i64()
		case 5:
			t.Days = decSlice(d, func(d *rd) (v growth.Day) { decDay(d, &v); return v })
		case 6:
			decTotals(d, &t.All)
		case 7:
			t.Rev = d.i64()
		case 8:
			t.Snap = decPtr(decSnap)(d)
		default:
			failf("unknown growth.Trader field")
		}
	}
}

func decDay(d *rd, v *growth.Day) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			v.Day = d.i64()
		case 2:
			v.PnlMsat = d.i64()
		case 3:
			v.Volume = d.i64()
		case 4:
			v.Trades = d.i64()
		case 5:
			v.Wins = d.i64()
		case 6:
			v.Closes = d.i64()
		case 7:
			v.OpenEquityMsat = d.i64()
		default:
			failf("unknown growth.Day field")
		}
	}
}

func decTotals(d *rd, v *growth.Totals) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			v.PnlMsat = d.i64()
		case 2:
			v.Volume = d.i64()
		case 3:
			v.Trades = d.i64()
		case 4:
			v.Wins = d.i64()
		case 5:
			v.Closes = d.i64()
		case 6:
			v.IndexQ9 = d.i64()
		case 7:
			v.PeakQ9 = d.i64()
		case 8:
			v.MaxDDQ9 = d.i64()
		default:
			failf("unknown growth.Totals field")
		}
	}
}

func decSnap(d *rd, s *growth.Snap) {
	decStruct(d, func(k int) {
		switch k {
		case 1:
			s.Windows = decSlice(d, func(d *rd) (v growth.Metrics) { decMetrics(d, &v); return v })
		case 2:
			s.Ranks = d.i64s()
		case 3:
			s.Curve = decSlice(d, func(d *rd) (v growth.CurvePoint) {
				decStruct(d, func(k int) {
					switch k {
					case 1:
						v.Day = d.i64()
					case 2:
						v.IndexQ9 = d.i64()
					default:
						failf("unknown growth.CurvePoint field")
					}
				})
				return v
			})
		default:
			failf("unknown growth.Snap field")
		}
	})
}

func decMetrics(d *rd, v *growth.Metrics) {
	n, prev := d.mapN(), -1
	for range n {
		switch d.key(&prev) {
		case 1:
			v.PnlMsat = d.i64()
		case 2:
			v.RoiQ9 = d.i64()
		case 3:
			v.Volume = d.i64()
		case 4:
			v.Trades = d.i64()
		case 5:
			v.Wins = d.i64()
		case 6:
			v.Closes = d.i64()
		case 7:
			v.MaxDDQ9 = d.i64()
		default:
			failf("unknown growth.Metrics field")
		}
	}
}
