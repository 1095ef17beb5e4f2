package sharecard

import (
	"bytes"
	"image"
	"sync"
	"testing"
)

// Render is a plain function of its card, so callers may render cards at
// once: two nodes' servers in one process (the cluster tests), or a server
// whose cards are not serialised. The faces cached across renders share
// their glyph buffers (a font.Face is not safe for concurrent use), so
// concurrent renders raced on them (go test -race) and could draw one
// card's glyphs with another's mask. httpapi renders one card at a time,
// so no served card was hit; the package no longer relies on it.
func TestConcurrentRendersAreTheSequentialOnes(t *testing.T) {
	cards := []Card{sampleCard(), {Handle: "calm-heron-0007", Window: "30D", PnlMsat: -1_234_000, RoiQ9: -3_210_000,
		Curve: []int64{996_790_000}}}
	want := make([][]byte, len(cards))
	for i, c := range cards {
		b, err := Render(c)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 2 {
				i := (g + r) % len(cards)
				b, err := Render(cards[i])
				if err != nil || !bytes.Equal(b, want[i]) {
					errs <- cards[i].Handle
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for h := range errs {
		t.Errorf("a concurrent render of %s differs from the sequential one", h)
	}
}

// The text steps of two renders at once, each on its own canvas as Render
// makes it (faces cached across renders raced here). Tight loops, so
// that the race detector sees the two goroutines' glyph work overlap.
func TestConcurrentTextUsesNoSharedFaceState(t *testing.T) {
	const s = "Ada Lovelace +0.1234 BTC"
	draw := func() []byte {
		c := canvas{img: image.NewRGBA(image.Rect(0, 0, 600, 60)), faces: faces{}}
		c.text(s, true, 40, 0, 45, white)
		return c.img.Pix
	}
	want := draw()
	var wg sync.WaitGroup
	bad := make(chan bool, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if !bytes.Equal(draw(), want) {
					bad <- true
					return
				}
			}
		}()
	}
	wg.Wait()
	close(bad)
	for range bad {
		t.Error("text drawn at the same time as other text differs from text drawn alone")
	}
}
