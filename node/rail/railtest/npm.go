// Package railtest holds test helpers shared by the packages that test
// the payment rail. It is imported only from _test files.
package railtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// NPMInstall is the command that installs the independent decoder.
const NPMInstall = "npm ci --ignore-scripts --prefix node/rail/testdata/bolt11js"

// decoderDir is node/rail/testdata/bolt11js, found from this file's own
// location so callers in any package reach it.
func decoderDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "bolt11js")
}

// DecodeWithNPM decodes BOLT11 invoices with the independent npm bolt11
// decoder (one JSON object per invoice, into out, a pointer to a slice).
// It skips the test when Node.js is absent and fails it when Node.js is
// present but the decoder is not installed.
func DecodeWithNPM(t testing.TB, invoices []string, out any) {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("Node.js is not installed, so invoices are not cross-checked against an independent decoder. " +
			"To run this test: apt-get install -y nodejs npm && " + NPMInstall)
	}
	dir := decoderDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "bolt11")); err != nil {
		t.Fatalf("Node.js is installed but the npm bolt11 decoder is not; from the repository root run: %s", NPMInstall)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "decode.js")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(strings.Join(invoices, "\n") + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node decode.js: %v\n%s", err, stderr.String())
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) != len(invoices) {
		t.Fatalf("node decode.js printed %d results for %d invoices (%v): %s", len(items), len(invoices), err, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("decode.js output: %v", err)
	}
}
