package growth

// A trader's folds, kept between recomputes (derived, never encoded).
//
// A recompute folds every trader's days into the 7d and 30d windows and
// the equity curve. Between two recomputes of the same UTC day a trader's
// days change in one way only: Observe, their only writer, adds to the
// newest day, or appends a new one (dropping the oldest past
// TraderDaysKept). So the fold of every day but the newest is the same
// as last time while the day (the windows' end), the number of days and
// the newest day's date are, and the whole fold is the same while the
// newest day is too. The memo keeps both: a trader whose days did not
// change keeps its snapshot's windows and curve as they are (no day is
// read but the newest), and one whose newest day changed (a fill, an
// hourly funding flow) folds that day alone onto the kept prefix. What a
// memo gives is exactly what the full fold gives: the same days, folded
// in the same order by the same steps.
//
// Not kept: the "all" window (its fold is one day onto Trader.All, redone
// each time), the equity and the gates (read at every recompute), the
// opt-out, the ranks. A decoded trader starts with an empty memo, so the
// first recompute after a restore or a snapshot install folds every day
// as before. The memo is a fixed-size value inside Trader: one per trader,
// bounded as Board.Traders is.

// windowFold is a window's fold state: the sums so far (RoiQ9 and MaxDDQ9
// unused) and the equity index, its peak and the maximum drawdown.
type windowFold struct {
	sums               Metrics
	index, peak, maxDD int64
}

func newWindowFold() windowFold { return windowFold{index: Q9, peak: Q9} }

// add folds day d (windowMetrics's step).
func (f *windowFold) add(d Day) {
	f.sums.PnlMsat += d.PnlMsat
	f.sums.Volume += d.Volume
	f.sums.Trades += d.Trades
	f.sums.Wins += d.Wins
	f.sums.Closes += d.Closes
	f.index, f.peak, f.maxDD = foldDay(f.index, f.peak, f.maxDD, d)
}

// metrics are the window's figures from the fold so far.
func (f windowFold) metrics() Metrics {
	m := f.sums
	m.RoiQ9, m.MaxDDQ9 = f.index-Q9, f.maxDD
	return m
}

// inWindow says whether day is in window wi (7d or 30d) ending today.
func inWindow(wi int, day, today int64) bool {
	return day >= today-(windowDays[wi]-1)*DayMs && day <= today
}

// boardMemo is what the last recompute folded for a trader. ok: the
// fields hold a fold of this trader's days into its current Snap.
type boardMemo struct {
	ok    bool
	today int64
	// n is len(Days) then, and last the newest day as folded.
	n    int
	last Day
	// pre folds the 7d and 30d windows over every day but the newest;
	// curveIndex is the curve's index after them and curveN their points.
	pre        [2]windowFold
	curveIndex int64
	curveN     int
}

// foldInto writes the trader's 7d and 30d window metrics and its curve as
// of today into snap (whose Windows and Ranks have their full lengths),
// folding only what changed since the memo's fold into the same snap.
func (t *Trader) foldInto(snap *Snap, today int64) {
	m := &t.memo
	n := len(t.Days)
	if m.ok && m.today == today && m.n == n && n > 0 && m.last.Day == t.Days[n-1].Day {
		if m.last == t.Days[n-1] {
			return // nothing changed: snap holds this fold already
		}
		t.foldNewest(snap, today)
		return
	}
	m.ok, m.today, m.n = true, today, n
	m.pre = [2]windowFold{newWindowFold(), newWindowFold()}
	m.curveIndex, m.curveN = Q9, 0
	if n == 0 {
		m.last = Day{}
		for wi := range m.pre {
			snap.Windows[wi] = m.pre[wi].metrics()
		}
		snap.Curve = nil
		return
	}
	// Sized once, as curve() sizes it: the prefix's points and the newest
	// day's, if in range.
	points := 0
	for _, d := range t.Days {
		if inCurve(d.Day, today) {
			points++
		}
	}
	if points == 0 {
		snap.Curve = nil
	} else if cap(snap.Curve) < points {
		snap.Curve = make([]CurvePoint, 0, points)
	} else {
		snap.Curve = snap.Curve[:0]
	}
	for _, d := range t.Days[:n-1] {
		for wi := range m.pre {
			if inWindow(wi, d.Day, today) {
				m.pre[wi].add(d)
			}
		}
		if inCurve(d.Day, today) {
			m.curveIndex = indexStep(m.curveIndex, d)
			m.curveN++
			snap.Curve = append(snap.Curve, CurvePoint{Day: d.Day, IndexQ9: m.curveIndex})
		}
	}
	t.foldNewest(snap, today)
}

// foldNewest folds the newest day onto the memo's prefix: the 7d and 30d
// windows and the curve's last point.
func (t *Trader) foldNewest(snap *Snap, today int64) {
	m := &t.memo
	d := t.Days[len(t.Days)-1]
	m.last = d
	for wi := range m.pre {
		f := m.pre[wi]
		if inWindow(wi, d.Day, today) {
			f.add(d)
		}
		snap.Windows[wi] = f.metrics()
	}
	if !inCurve(d.Day, today) {
		return // no point: the prefix's points are the curve (nil if none)
	}
	// A snap whose curve had no point is nil, and append makes one.
	snap.Curve = append(snap.Curve[:m.curveN], CurvePoint{Day: d.Day, IndexQ9: indexStep(m.curveIndex, d)})
}

// allWindow is window "all": the all-time sums and index folded with the
// newest day (windowMetrics's "all").
func (t *Trader) allWindow() Metrics {
	m := Metrics{PnlMsat: t.All.PnlMsat, Volume: t.All.Volume, Trades: t.All.Trades, Wins: t.All.Wins, Closes: t.All.Closes}
	index, peak, dd := t.All.IndexQ9, t.All.PeakQ9, t.All.MaxDDQ9
	if n := len(t.Days); n > 0 {
		index, _, dd = foldDay(index, peak, dd, t.Days[n-1])
	}
	m.RoiQ9, m.MaxDDQ9 = index-Q9, dd
	return m
}
