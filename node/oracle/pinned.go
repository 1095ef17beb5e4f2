package oracle

import (
	"fmt"
	"math/big"
	"sync"
)

// PinnedConfQ9 is the confidence band of pinned and scripted prints (2 bp):
// a demo price is exact, but a zero band would hide confidence handling.
const PinnedConfQ9 = 200_000

// ScriptPointsMax bounds one script.
const ScriptPointsMax = 10_000

// Interp says how a script moves between its points.
type Interp int

const (
	// Step holds each point's price until the next point.
	Step Interp = iota
	// Linear moves in a straight line between points.
	Linear
)

// ScriptPoint is a price at an offset from the script's start.
type ScriptPoint struct {
	OffsetMs int64
	MidQ8    int64
}

// Pinned wraps a Source with per-feed overrides for tests and demos: a
// fixed price or a scripted path. Feeds without an override pass through to
// the inner source. It is safe for concurrent use: the admin listener pins
// while the driver goroutine calls Next.
type Pinned struct {
	inner Source

	mu   sync.Mutex
	pins map[string]*override
	// last is the newest print per feed, from any path, so an override
	// continues the clock and Unpin resumes the inner source from it.
	last map[string]Print
}

type override struct {
	points  []ScriptPoint // one point at offset 0 for a fixed pin
	startMs int64
	interp  Interp
}

// NewPinned wraps inner.
func NewPinned(inner Source) *Pinned {
	return &Pinned{inner: inner, pins: map[string]*override{}, last: map[string]Print{}}
}

// Pin holds feedID at midQ8 until Unpin or another override.
func (p *Pinned) Pin(feedID string, midQ8 int64) error {
	if midQ8 <= 0 {
		return fmt.Errorf("%w: %d", ErrBadPrice, midQ8)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pins[feedID] = &override{points: []ScriptPoint{{OffsetMs: 0, MidQ8: midQ8}}}
	return nil
}

// Script plays points on feedID from startMs: before the first point the
// price is the first point's, after the last it stays at the last until
// Unpin. Offsets must be non-negative and strictly increasing, prices
// positive. Linear interpolation rounds toward the earlier point's price.
func (p *Pinned) Script(feedID string, startMs int64, points []ScriptPoint, interp Interp) error {
	if err := validateScript(points, interp); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pins[feedID] = &override{points: append([]ScriptPoint(nil), points...), startMs: startMs, interp: interp}
	return nil
}

func validateScript(points []ScriptPoint, interp Interp) error {
	if interp != Step && interp != Linear {
		return fmt.Errorf("%w: interpolation %d", ErrBadScript, interp)
	}
	if len(points) == 0 || len(points) > ScriptPointsMax {
		return fmt.Errorf("%w: %d points, want 1..%d", ErrBadScript, len(points), ScriptPointsMax)
	}
	for i, pt := range points {
		if pt.MidQ8 <= 0 {
			return fmt.Errorf("%w: point %d price %d", ErrBadScript, i, pt.MidQ8)
		}
		if pt.OffsetMs < 0 || (i > 0 && pt.OffsetMs <= points[i-1].OffsetMs) {
			return fmt.Errorf("%w: point %d offset %d not increasing", ErrBadScript, i, pt.OffsetMs)
		}
	}
	return nil
}

// Unpin removes feedID's override. The inner source resumes from the last
// override print, so the feed carries on from there rather than snapping
// back to where the simulation was when the pin began.
func (p *Pinned) Unpin(feedID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pins[feedID]; !ok {
		return nil
	}
	delete(p.pins, feedID)
	if last, ok := p.last[feedID]; ok {
		return p.inner.Resume(feedID, last.MidQ8, last.TsMs)
	}
	return nil
}

// Resume forwards to the inner source and records the print as the feed's
// last, so an override also continues the committed clock.
func (p *Pinned) Resume(feedID string, lastMidQ8, lastTsMs int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.inner.Resume(feedID, lastMidQ8, lastTsMs); err != nil {
		return err
	}
	p.last[feedID] = Print{MidQ8: lastMidQ8, TsMs: lastTsMs}
	return nil
}

// Next returns the override's price at nowMs, or the inner source's print.
func (p *Pinned) Next(feedID string, nowMs int64) (Print, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, pinned := p.pins[feedID]
	if !pinned {
		pr, err := p.inner.Next(feedID, nowMs)
		if err == nil {
			p.last[feedID] = pr
		}
		return pr, err
	}
	if last, ok := p.last[feedID]; ok && nowMs <= last.TsMs {
		return Print{}, fmt.Errorf("%w: %s now %d, last %d", ErrNotAdvanced, feedID, nowMs, last.TsMs)
	}
	pr := Print{MidQ8: o.priceAt(nowMs), ConfQ9: PinnedConfQ9, TsMs: nowMs}
	p.last[feedID] = pr
	return pr, nil
}

func (o *override) priceAt(nowMs int64) int64 {
	off := nowMs - o.startMs
	pts := o.points
	if off <= pts[0].OffsetMs {
		return pts[0].MidQ8
	}
	for i := 1; i < len(pts); i++ {
		if off >= pts[i].OffsetMs {
			continue
		}
		a, b := pts[i-1], pts[i]
		if o.interp == Step {
			return a.MidQ8
		}
		return lerp(a, b, off)
	}
	return pts[len(pts)-1].MidQ8
}

// lerp interpolates between a and b at off (a.OffsetMs <= off < b.OffsetMs)
// in exact integer arithmetic; the quotient truncates toward zero, that is
// toward a's price.
func lerp(a, b ScriptPoint, off int64) int64 {
	num := new(big.Int).Mul(big.NewInt(b.MidQ8-a.MidQ8), big.NewInt(off-a.OffsetMs))
	num.Quo(num, big.NewInt(b.OffsetMs-a.OffsetMs))
	return a.MidQ8 + num.Int64()
}
