package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/perpd/perpd/node"
)

// chromiumPath finds a Chromium to drive. Outside CI a machine without
// one skips the dashboard test; in CI (.ci/run installs it) it fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH; .ci/run installs Debian's chromium")
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the dashboard test needs a headless browser")
	return ""
}

// TestPorDashboardVerifiesAProofInTheBrowser loads /por/dashboard in
// headless Chromium, checks that it shows the snapshot, then pastes a
// real proof fetched from GET /v1/por/proof: the page's own JavaScript
// (Web Crypto SHA-256) must call it valid against the published root, and
// the same proof with its balance raised by one msat invalid.
func TestPorDashboardVerifiesAProofInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chrome := chromiumPath(t)
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	key, _ := a.signup()
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: nextIdem(), body: "{}"}); r.status != 201 {
		t.Fatalf("faucet: %d %s", r.status, r.body)
	}
	_, _ = a.signup()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	// This chromedp's protocol tables predate some of Chromium's event
	// fields; it logs and skips those events, which this test ignores.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "could not unmarshal event") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	// The tree, its proof and the page must be of one tree. On a loaded
	// machine log time can still be catching up with the moved clock when
	// GET /por looks settled, and a tree that lands between the reads
	// would fail the comparison for no fault of the page: then the check
	// starts again (at most three times) from the next tree.
	var snap, liab map[string]any
	var proof, tampered string
	for attempt := 1; ; attempt++ {
		snap = a.settledPor(clk)
		liab = snap["liability"].(map[string]any)
		r := a.do(req{method: "GET", path: "/v1/por/proof", key: key})
		if r.status != 200 {
			t.Fatalf("proof: %d %s", r.status, r.body)
		}
		proof = string(r.body)
		var doc map[string]any
		_ = json.Unmarshal(r.body, &doc)
		doc["leaf"].(map[string]any)["balanceMsat"] = incDecimal(doc["leaf"].(map[string]any)["balanceMsat"].(string))
		b, _ := json.Marshal(doc)
		tampered = string(b)

		// a.http.URL is http://127.0.0.1:PORT: a secure context, so
		// crypto.subtle is there.
		var status, total, root string
		if err := chromedp.Run(ctx,
			chromedp.Navigate(a.http.URL+"/por/dashboard"),
			chromedp.WaitVisible("#summary", chromedp.ByQuery),
			chromedp.Text("#status", &status, chromedp.ByQuery),
			chromedp.Text("#msatTotal", &total, chromedp.ByQuery),
			chromedp.Text("#msatRoot", &root, chromedp.ByQuery),
		); err != nil {
			t.Fatal(err)
		}
		if now := a.get("/por").json(t); now["tsMs"] != snap["tsMs"] {
			if attempt == 3 {
				t.Fatalf("a new tree landed during each of %d checks", attempt)
			}
			t.Logf("tree %v replaced by %v during the check; again", snap["tsMs"], now["tsMs"])
			continue
		}
		if !strings.HasPrefix(status, "clean") || total != liab["totalMsat"] || root != liab["rootHash"] {
			t.Fatalf("dashboard shows status %q total %q root %q; /por says %v", status, total, root, liab)
		}
		break
	}
	verdict := func(p string) string {
		var out string
		if err := chromedp.Run(ctx,
			chromedp.Evaluate(`document.getElementById("verdict").textContent = ""`, nil),
			chromedp.SetValue("#proof", p, chromedp.ByQuery),
			chromedp.Click("#verify", chromedp.ByQuery),
			chromedp.Poll(`(function(){var t=document.getElementById("verdict").textContent; return /^(VALID|INVALID|UNCONFIRMED)/.test(t) ? t : null})()`, &out),
		); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if v := verdict(proof); !strings.HasPrefix(v, "VALID") || !strings.Contains(v, "the expected root") || !strings.Contains(v, liab["rootHash"].(string)) {
		t.Fatalf("real proof: %q", v)
	}
	if v := verdict(tampered); !strings.HasPrefix(v, "INVALID") {
		t.Fatalf("tampered proof: %q", v)
	}
	if v := verdict(strings.Replace(proof, liab["rootHash"].(string), strings.Repeat("0", 64), 1)); !strings.HasPrefix(v, "INVALID") {
		t.Fatalf("proof with another root: %q", v)
	}
	// A proof of a tree GET /por never published (treeTsMs is not hashed,
	// so a venue can name any time): its path is consistent, but nothing
	// ties its root to a published one, so it is not VALID.
	unpublished := strings.Replace(proof, `"treeTsMs":"`+snap["tsMs"].(string)+`"`, `"treeTsMs":"1"`, 1)
	if unpublished == proof {
		t.Fatal("the proof names no treeTsMs")
	}
	if v := verdict(unpublished); !strings.HasPrefix(v, "UNCONFIRMED") || !strings.Contains(v, "publishes no root") {
		t.Fatalf("proof of an unpublished tree: %q", v)
	}
	// The same with the root typed in: GET /por published that root for
	// another time than the proof names, and the leaf's tag binds the
	// proof's time, so this is a leaf of another tree in the current one:
	// INVALID (it said VALID). The real proof against the typed root is
	// VALID and names its tree.
	var got string
	if err := chromedp.Run(ctx, chromedp.SetValue("#expected", liab["rootHash"].(string), chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got = verdict(unpublished); !strings.HasPrefix(got, "INVALID") || !strings.Contains(got, "a leaf of another tree") {
		t.Fatalf("proof of an unpublished tree against a typed root: %q", got)
	}
	if got = verdict(proof); !strings.HasPrefix(got, "VALID") || !strings.Contains(got, "the expected root") || !strings.Contains(got, "tree of "+snap["tsMs"].(string)) {
		t.Fatalf("real proof against a typed root: %q", got)
	}
}

// incDecimal adds one to a non-negative decimal string.
func incDecimal(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}
