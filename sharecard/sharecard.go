// Package sharecard renders a leaderboard trader's 1200x630 PNG share card
// (the Open Graph image of GET /v1/leaderboard/trader/{handle}/og.png):
// name and handle, the 30-day PnL and ROI, the best placements, the equity
// curve as a chart and, on testnet, a testnet mark. Rendering is pure Go
// (the standard image packages, golang.org/x/image for the vector
// rasterizer and the Go fonts) and deterministic: the same card gives the
// same bytes, which the golden-image test relies on.
package sharecard

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// Width and Height are the Open Graph image size.
const (
	Width  = 1200
	Height = 630
)

// Placement is one board placement.
type Placement struct {
	Board  string // pnl or roi
	Window string // 7d, 30d or all
	Rank   int64
}

// Card is what a share card shows.
type Card struct {
	Handle       string
	DisplayName  string // empty: the handle is the title
	TradingSince string // YYYY-MM-DD, or empty
	Placements   []Placement
	// Window names the period of PnlMsat and RoiQ9 (e.g. "30D").
	Window  string
	PnlMsat int64
	RoiQ9   int64
	// Curve is the equity index (q9, 1e9 = 1.0) at the end of each day.
	Curve        []int64
	Testnet      bool
	ComputedTsMs int64
}

var (
	bg0    = color.RGBA{0x0b, 0x10, 0x20, 0xff}
	bg1    = color.RGBA{0x15, 0x1e, 0x38, 0xff}
	panel  = color.RGBA{0x10, 0x18, 0x30, 0xff}
	border = color.RGBA{0x25, 0x32, 0x55, 0xff}
	white  = color.RGBA{0xf4, 0xf6, 0xfb, 0xff}
	muted  = color.RGBA{0x8a, 0x97, 0xb4, 0xff}
	dim    = color.RGBA{0x5b, 0x67, 0x85, 0xff}
	green  = color.RGBA{0x34, 0xd3, 0x99, 0xff}
	red    = color.RGBA{0xf8, 0x71, 0x71, 0xff}
	teal   = color.RGBA{0x2d, 0xd4, 0xbf, 0xff}
	violet = color.RGBA{0x8b, 0x5c, 0xf6, 0xff}
	amber  = color.RGBA{0xf5, 0xb9, 0x42, 0xff}
	chipBg = color.RGBA{0x1e, 0x2a, 0x47, 0xff}
	gold   = color.RGBA{0xfb, 0xd3, 0x4d, 0xff}
)

// parsedFonts are the Go fonts, regular and bold, parsed once. A parsed
// font is safe for concurrent use (each caller passes its own buffer); a
// face made from it is not (its glyph buffer, rasterizer and mask are
// reused from glyph to glyph), so faces belong to one render (faces).
var parsedFonts = sync.OnceValue(func() (f [2]*opentype.Font) {
	for b, src := range [2][]byte{goregular.TTF, gobold.TTF} {
		var err error
		if f[b], err = opentype.Parse(src); err != nil {
			panic(err) // an embedded font that does not parse is a build error
		}
	}
	return f
})

// faces are one render's font faces, by weight and size, made on first
// use: Render may run on several goroutines at once, and a face shared
// between them raced on its glyph buffers (two cards' text could be drawn
// with each other's glyph masks).
type faces map[[2]int]font.Face

// face returns the Go font (bold or regular) at size px.
func (fs faces) face(bold bool, size int) font.Face {
	b := 0
	if bold {
		b = 1
	}
	if f, ok := fs[[2]int{b, size}]; ok {
		return f
	}
	f, err := opentype.NewFace(parsedFonts()[b], &opentype.FaceOptions{Size: float64(size), DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		panic(err)
	}
	fs[[2]int{b, size}] = f
	return f
}

type canvas struct {
	img   *image.RGBA
	faces faces
}

func (c canvas) text(s string, bold bool, size, x, y int, col color.Color) int {
	d := &font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: c.faces.face(bold, size), Dot: fixed.P(x, y)}
	d.DrawString(s)
	return d.Dot.X.Round()
}

func (c canvas) measure(s string, bold bool, size int) int {
	return font.MeasureString(c.faces.face(bold, size), s).Round()
}

// drawable reports whether the font has a glyph for every rune of s.
func (c canvas) drawable(s string, bold bool, size int) bool {
	f := c.faces.face(bold, size)
	for _, r := range s {
		if _, ok := f.GlyphAdvance(r); !ok {
			return false
		}
	}
	return true
}

// fit shortens s with an ellipsis until it fits width at size.
func (c canvas) fit(s string, bold bool, size, width int) string {
	if c.measure(s, bold, size) <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 1 {
		r = r[:len(r)-1]
		if t := strings.TrimSpace(string(r)) + "…"; c.measure(t, bold, size) <= width {
			return t
		}
	}
	return "…"
}

// pather is what the shape helpers draw into: a path recorder.
type pather interface {
	MoveTo(x, y float32)
	LineTo(x, y float32)
	QuadTo(bx, by, cx, cy float32)
	ClosePath()
}

// pathOp is one recorded path operation (n points used).
type pathOp struct {
	kind byte // 'M', 'L', 'Q', 'Z'
	pts  [2][2]float32
}

// path records a shape and its bounding box (control points included: a
// quadratic segment stays inside the hull of its points).
type path struct {
	ops                    []pathOp
	minX, minY, maxX, maxY float32
	seen                   bool
}

// floatMathMinWidth is the narrowest rasterizer that uses floating point
// math (golang.org/x/image/vector's threshold is 512).
const floatMathMinWidth = 513

func (p *path) see(x, y float32) {
	if !p.seen {
		p.minX, p.maxX, p.minY, p.maxY, p.seen = x, x, y, y, true
	}
	p.minX, p.maxX = min(p.minX, x), max(p.maxX, x)
	p.minY, p.maxY = min(p.minY, y), max(p.maxY, y)
}

func (p *path) MoveTo(x, y float32) {
	p.see(x, y)
	p.ops = append(p.ops, pathOp{kind: 'M', pts: [2][2]float32{{x, y}}})
}

func (p *path) LineTo(x, y float32) {
	p.see(x, y)
	p.ops = append(p.ops, pathOp{kind: 'L', pts: [2][2]float32{{x, y}}})
}

func (p *path) QuadTo(bx, by, cx, cy float32) {
	p.see(bx, by)
	p.see(cx, cy)
	p.ops = append(p.ops, pathOp{kind: 'Q', pts: [2][2]float32{{bx, by}, {cx, cy}}})
}

func (p *path) ClosePath() { p.ops = append(p.ops, pathOp{kind: 'Z'}) }

// fill draws the path built by build in col. The rasterizer covers only
// the path's bounding box (a whole-card rasterizer per shape made one card
// cost about 890 MB and a second of CPU). The box is whole pixels, so the
// shift by its corner changes coverage only by float32 rounding: at most
// one level of a channel on an anti-aliased edge.
func (c canvas) fill(col color.Color, build func(z pather)) {
	var p path
	build(&p)
	if len(p.ops) == 0 {
		return
	}
	box := image.Rect(int(math.Floor(float64(p.minX)))-1, int(math.Floor(float64(p.minY)))-1,
		int(math.Ceil(float64(p.maxX)))+1, int(math.Ceil(float64(p.maxY)))+1).Intersect(c.img.Bounds())
	if box.Empty() {
		return
	}
	// At most 512 pixels wide and high the rasterizer switches to fixed
	// point math, which rounds edges differently: keep it on floating
	// point, as the whole-card rasterizer was.
	if w := floatMathMinWidth; box.Dx() < w {
		box.Min.X = min(box.Min.X, Width-w)
		box.Max.X = box.Min.X + w
	}
	ox, oy := float32(box.Min.X), float32(box.Min.Y)
	z := vector.NewRasterizer(box.Dx(), box.Dy())
	for _, op := range p.ops {
		switch op.kind {
		case 'M':
			z.MoveTo(op.pts[0][0]-ox, op.pts[0][1]-oy)
		case 'L':
			z.LineTo(op.pts[0][0]-ox, op.pts[0][1]-oy)
		case 'Q':
			z.QuadTo(op.pts[0][0]-ox, op.pts[0][1]-oy, op.pts[1][0]-ox, op.pts[1][1]-oy)
		case 'Z':
			z.ClosePath()
		}
	}
	z.Draw(c.img, box, image.NewUniform(col), image.Point{})
}

func roundRect(z pather, x0, y0, x1, y1, r float32) {
	z.MoveTo(x0+r, y0)
	z.LineTo(x1-r, y0)
	z.QuadTo(x1, y0, x1, y0+r)
	z.LineTo(x1, y1-r)
	z.QuadTo(x1, y1, x1-r, y1)
	z.LineTo(x0+r, y1)
	z.QuadTo(x0, y1, x0, y1-r)
	z.LineTo(x0, y0+r)
	z.QuadTo(x0, y0, x0+r, y0)
	z.ClosePath()
}

func circle(z pather, cx, cy, r float32) {
	const n = 24
	for i := 0; i <= n; i++ {
		a := float64(i) * 2 * math.Pi / n
		x, y := cx+r*float32(math.Cos(a)), cy+r*float32(math.Sin(a))
		if i == 0 {
			z.MoveTo(x, y)
		} else {
			z.LineTo(x, y)
		}
	}
	z.ClosePath()
}

// stroke draws a polyline of width w with round joins.
func (c canvas) stroke(pts [][2]float32, w float32, col color.Color) {
	c.fill(col, func(z pather) {
		for i := 1; i < len(pts); i++ {
			a, b := pts[i-1], pts[i]
			dx, dy := b[0]-a[0], b[1]-a[1]
			l := float32(math.Hypot(float64(dx), float64(dy)))
			if l == 0 {
				continue
			}
			nx, ny := -dy/l*w/2, dx/l*w/2
			z.MoveTo(a[0]+nx, a[1]+ny)
			z.LineTo(b[0]+nx, b[1]+ny)
			z.LineTo(b[0]-nx, b[1]-ny)
			z.LineTo(a[0]-nx, a[1]-ny)
			z.ClosePath()
		}
	})
	for _, p := range pts {
		c.fill(col, func(z pather) { circle(z, p[0], p[1], w/2) })
	}
}

func mix(a, b color.RGBA, num, den int) color.RGBA {
	l := func(x, y uint8) uint8 { return uint8((int(x)*(den-num) + int(y)*num) / den) }
	return color.RGBA{l(a.R, b.R), l(a.G, b.G), l(a.B, b.B), 0xff}
}

// Render draws the card and encodes it as PNG.
func Render(card Card) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, Width, Height))
	c := canvas{img: img, faces: faces{}}
	for y := 0; y < Height; y++ {
		draw.Draw(img, image.Rect(0, y, Width, y+1), image.NewUniform(mix(bg0, bg1, y, Height)), image.Point{}, draw.Src)
	}
	for x := 0; x < Width; x++ { // the accent bar: teal to violet
		draw.Draw(img, image.Rect(x, 0, x+1, 6), image.NewUniform(mix(teal, violet, x, Width)), image.Point{}, draw.Src)
	}

	// Header: brand, and the testnet mark.
	x := c.text("perpd", true, 34, 60, 76, white)
	c.text("leaderboard", false, 34, x+12, 76, muted)
	if card.Testnet {
		const label = "TESTNET"
		w := c.measure(label, true, 22)
		x0 := float32(Width - 60 - w - 36)
		c.fill(amber, func(z pather) { roundRect(z, x0, 44, float32(Width-60), 86, 21) })
		c.text(label, true, 22, int(x0)+18, 73, bg0)
	}

	// Title: the display name, else the handle. A name with a letter the
	// font has no glyph for (display names take any script's letters; the
	// Go fonts draw Latin, Greek and Cyrillic) would show empty boxes: the
	// handle stands in for it.
	name := card.DisplayName
	if !c.drawable(name, true, 64) {
		name = ""
	}
	title := name
	if title == "" {
		title = card.Handle
	}
	c.text(c.fit(title, true, 64, Width-120), true, 64, 60, 172, white)
	var parts []string
	if name != "" {
		parts = append(parts, "@"+card.Handle)
	}
	if card.TradingSince != "" {
		parts = append(parts, "trading since "+card.TradingSince)
	}
	sub := strings.Join(parts, "  ·  ")
	c.text(c.fit(sub, false, 26, Width-120), false, 26, 60, 218, muted)

	// Left column: PnL, ROI, placements.
	window := card.Window
	if window == "" {
		window = "30D"
	}
	c.text(window+" PNL", true, 20, 60, 298, dim)
	pnlCol := green
	if card.PnlMsat < 0 {
		pnlCol = red
	}
	c.text(c.fit(FormatPnl(card.PnlMsat), true, 50, 470), true, 50, 60, 352, pnlCol)
	c.text(window+" ROI", true, 20, 60, 404, dim)
	roiCol := green
	if card.RoiQ9 < 0 {
		roiCol = red
	}
	c.text(FormatRoi(card.RoiQ9), true, 50, 60, 458, roiCol)
	c.placements(card.Placements, 60, 500)

	// Right: the equity curve.
	c.chart(card.Curve, 580, 262, Width-60, 572)

	// Footer.
	foot := "Ranks recompute every 15 minutes"
	if card.ComputedTsMs > 0 {
		foot = "As of " + time.UnixMilli(card.ComputedTsMs).UTC().Format("2006-01-02 15:04") + " UTC"
	}
	if card.Testnet {
		foot += "  ·  test sats have no value"
	}
	c.text(foot, false, 18, 60, 608, dim)

	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// placements draws up to three placement chips, best rank first.
func (c canvas) placements(ps []Placement, x, y int) {
	best := append([]Placement(nil), ps...)
	for i := 1; i < len(best); i++ { // insertion sort: stable, by rank
		for j := i; j > 0 && best[j].Rank < best[j-1].Rank; j-- {
			best[j], best[j-1] = best[j-1], best[j]
		}
	}
	if len(best) == 0 {
		c.text("Not on a board yet", false, 22, x, y+34, muted)
		return
	}
	for _, p := range best[:min(3, len(best))] {
		rank := "#" + strconv.FormatInt(p.Rank, 10)
		label := strings.ToUpper(p.Board) + " · " + p.Window
		w := c.measure(rank, true, 24) + 10 + c.measure(label, false, 20) + 32
		c.fill(chipBg, func(z pather) { roundRect(z, float32(x), float32(y), float32(x+w), float32(y+48), 12) })
		col := white
		if p.Rank <= 3 {
			col = gold
		}
		nx := c.text(rank, true, 24, x+16, y+32, col)
		c.text(label, false, 20, nx+10, y+31, muted)
		x += w + 12
	}
}

// chart draws the equity index panel.
func (c canvas) chart(curve []int64, x0, y0, x1, y1 int) {
	c.fill(border, func(z pather) {
		roundRect(z, float32(x0), float32(y0), float32(x1), float32(y1), 18)
	})
	c.fill(panel, func(z pather) {
		roundRect(z, float32(x0+2), float32(y0+2), float32(x1-2), float32(y1-2), 16)
	})
	c.text("EQUITY INDEX", true, 18, x0+24, y0+38, dim)
	if n := len(curve); n > 0 {
		last := curve[n-1]
		col := green
		if last < 1_000_000_000 {
			col = red
		}
		s := FormatIndex(last)
		c.text(s, true, 22, x1-24-c.measure(s, true, 22), y0+40, col)
	}
	px0, py0, px1, py1 := float32(x0+28), float32(y0+64), float32(x1-28), float32(y1-28)
	if len(curve) == 0 {
		mid := (py0 + py1) / 2
		c.stroke([][2]float32{{px0, mid}, {px1, mid}}, 2, border)
		msg := "The curve grows with each trading day"
		c.text(msg, false, 20, int((px0+px1)/2)-c.measure(msg, false, 20)/2, int(mid)-16, muted)
		return
	}
	pts := append([]int64{1_000_000_000}, curve...)
	lo, hi := pts[0], pts[0]
	for _, v := range pts {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		hi, lo = hi+1, lo-1
	}
	pad := (hi - lo) / 10
	lo, hi = lo-pad, hi+pad
	yOf := func(v int64) float32 { return py1 - float32(v-lo)/float32(hi-lo)*(py1-py0) }
	var line [][2]float32
	for i, v := range pts {
		line = append(line, [2]float32{px0 + float32(i)*(px1-px0)/float32(len(pts)-1), yOf(v)})
	}
	// The 1.0 line, dashed.
	base := yOf(1_000_000_000)
	for xx := px0; xx < px1; xx += 14 {
		c.stroke([][2]float32{{xx, base}, {min(xx+7, px1), base}}, 1.5, border)
	}
	// The area under the curve, then the curve and its last point.
	lineCol := teal
	if curve[len(curve)-1] < 1_000_000_000 {
		lineCol = red
	}
	// Premultiplied: each channel at most the alpha (0x33).
	area := color.RGBA{lineCol.R / 5, lineCol.G / 5, lineCol.B / 5, 0x33}
	c.fill(area, func(z pather) {
		z.MoveTo(line[0][0], py1)
		for _, p := range line {
			z.LineTo(p[0], p[1])
		}
		z.LineTo(line[len(line)-1][0], py1)
		z.ClosePath()
	})
	c.stroke(line, 4, lineCol)
	end := line[len(line)-1]
	c.fill(white, func(z pather) { circle(z, end[0], end[1], 7) })
	c.fill(lineCol, func(z pather) { circle(z, end[0], end[1], 4.5) })
}

// FormatPnl writes msat as signed sats with thousands separators, or as
// BTC with four decimals from 0.1 BTC up (truncated toward zero).
func FormatPnl(msat int64) string {
	sign := "+"
	if msat < 0 {
		sign = "−"
	}
	sats := msat / 1000
	if sats < 0 {
		sats = -sats
	}
	if sats >= 10_000_000 {
		return fmt.Sprintf("%s%d.%04d BTC", sign, sats/100_000_000, sats%100_000_000/10_000)
	}
	return sign + group(sats) + " sats"
}

// FormatRoi writes a q9 fraction as a signed percentage with two decimals
// (truncated toward zero).
func FormatRoi(q9 int64) string {
	sign := "+"
	if q9 < 0 {
		sign, q9 = "−", -q9
	}
	bp := q9 / 100_000 // basis points
	return fmt.Sprintf("%s%s.%02d%%", sign, group(bp/100), bp%100)
}

// FormatIndex writes a q9 index as x1.2345.
func FormatIndex(q9 int64) string {
	return fmt.Sprintf("×%d.%04d", q9/1_000_000_000, q9%1_000_000_000/100_000)
}

func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
