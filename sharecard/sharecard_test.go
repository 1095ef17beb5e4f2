package sharecard

import (
	"bytes"
	"flag"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

var update = flag.Bool("update-golden", false, "rewrite testdata/*.png from the current renderer")

func sampleCard() Card {
	return Card{Handle: "swift-otter-0421", DisplayName: "Ada L.", TradingSince: "2026-11-02",
		Placements: []Placement{{"roi", "30d", 7}, {"pnl", "7d", 2}, {"pnl", "30d", 3}, {"roi", "all", 12}},
		Window:     "30D", PnlMsat: 12_345_678_000, RoiQ9: 184_700_000,
		Curve: []int64{1_010_000_000, 1_040_000_000, 1_020_000_000, 995_000_000, 1_060_000_000, 1_090_000_000,
			1_070_000_000, 1_120_000_000, 1_110_000_000, 1_150_000_000, 1_184_700_000},
		Testnet: true, ComputedTsMs: 1_795_000_000_000}
}

// golden compares a rendering with testdata/name pixel for pixel (or
// rewrites it with -update-golden).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to create it, then look at it)", err)
	}
	a, err := png.Decode(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	b, err := png.Decode(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if a.Bounds() != b.Bounds() {
		t.Fatalf("size %v, golden %v", a.Bounds(), b.Bounds())
	}
	diff := 0
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				diff++
			}
		}
	}
	if diff > 0 {
		_ = os.WriteFile(filepath.Join(t.TempDir(), name), got, 0o644)
		t.Fatalf("%d pixels differ from %s", diff, path)
	}
}

func TestShareCardGolden(t *testing.T) {
	b, err := Render(sampleCard())
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || format != "png" || cfg.Width != 1200 || cfg.Height != 630 {
		t.Fatalf("%s %dx%d %v", format, cfg.Width, cfg.Height, err)
	}
	golden(t, "card.png", b)
	again, _ := Render(sampleCard())
	if !bytes.Equal(b, again) {
		t.Fatal("rendering is not deterministic")
	}
}

// A new trader: no name, no placements, one day of curve, a loss; prod
// has no testnet mark.
func TestShareCardNewTraderGolden(t *testing.T) {
	b, err := Render(Card{Handle: "calm-heron-0007", Window: "30D", PnlMsat: -1_234_000, RoiQ9: -3_210_000,
		Curve: []int64{996_790_000}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "card_new.png", b)
}

func TestFormats(t *testing.T) {
	cases := map[string]string{
		FormatPnl(12_345_678_000): "+0.1234 BTC", FormatPnl(-1_234_567): "−1,234 sats", FormatPnl(999): "+0 sats",
		FormatPnl(1_000_000_000): "+1,000,000 sats", FormatRoi(184_700_000): "+18.47%", FormatRoi(-3_210_000): "−0.32%",
		FormatRoi(12_345_000_000_000): "+1,234,500.00%", FormatIndex(1_184_700_000): "×1.1847",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
}

// TestShareCardRenderIsCheap: a card is rendered on a public GET for
// every opted-in handle after each recompute, so one rendering must stay
// small. Each shape used to get a rasterizer (and a mask pass) the size of
// the whole card: a full card allocated about 890 MB and took over a
// second of CPU. The bound is on bytes allocated, which does not depend on
// the machine.
func TestShareCardRenderIsCheap(t *testing.T) {
	card := sampleCard()
	card.Curve = make([]int64, 30) // the longest curve a profile has
	for i := range card.Curve {
		card.Curve[i] = int64(1_000_000_000 + (i%7)*40_000_000)
	}
	if _, err := Render(card); err != nil { // fonts and faces cached
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Render(card); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	const maxBytes = 32 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > maxBytes {
		t.Fatalf("one card allocated %d MB, want at most %d MB", got>>20, maxBytes>>20)
	}
}

// TestTitleTheFontCannotDrawFallsBackToTheHandle: display names take any
// Unicode letter, the Go fonts draw Latin, Greek and Cyrillic only, and a
// name in another script rendered as a row of empty boxes (a devnet
// walkthrough of 2026-11-27: a name of CJK letters). Such a name gives
// the card a name-less card's title, the handle; a name the font draws
// stays the title.
func TestTitleTheFontCannotDrawFallsBackToTheHandle(t *testing.T) {
	render := func(name string) []byte {
		t.Helper()
		c := sampleCard()
		c.DisplayName = name
		b, err := Render(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	nameless := render("")
	for _, name := range []string{"漢字トレーダー", "Ada 漢", "متداول", "ट्रेडर"} {
		if !bytes.Equal(render(name), nameless) {
			t.Errorf("%q: the card differs from the handle-titled one", name)
		}
	}
	for _, name := range []string{"Ada L.", "Трейдер", "Έμπορος"} {
		if bytes.Equal(render(name), nameless) {
			t.Errorf("%q: the font draws it, yet the card shows the handle", name)
		}
	}
}
