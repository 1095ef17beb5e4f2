package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cli/loadgen"
	"github.com/perpd/perpd/cluster/clustertest"
)

// `perpd bench` against one in-process node of the bench profile, wired as
// `perpd serve` wires it (ledger conservation checked after every entry):
// every operation of the mix runs and succeeds, and no request meets the
// rate budgets the profile raised.
func TestBenchRunsTheMixAgainstABenchNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for a few seconds")
	}
	c := clustertest.Start(t, 1, clustertest.Assemble(Assemble), clustertest.Deployment("bench"))
	out := filepath.Join(t.TempDir(), "result.json")
	cmd := benchCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--nodes", c.Leader().HTTPAddr, "--traders", "4", "--duration", "3s", "--out", out, "--seed", "7"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("bench: %v\n%s", err, stdout.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result: %v\n%s", err, raw)
	}
	t.Logf("\n%s", stdout.String())
	if res.Tier != "bench" || res.TradersRunning != 4 || res.Config.Traders != 4 || res.Config.Seed != 7 || res.Interrupted {
		t.Fatalf("result header %+v", res)
	}
	if res.DurationMs < 3000 || res.DurationMs > 3000+loadgen.DefaultRequestTimeout.Milliseconds() {
		t.Fatalf("mix ran %d ms for a 3 s run", res.DurationMs)
	}
	for _, op := range []string{loadgen.OpSignup, loadgen.OpFaucet} {
		if o := res.Ops[op]; o.Count != 4 || o.OK != 4 {
			t.Errorf("%s: %+v, want 4 of 4", op, o)
		}
	}
	for _, op := range loadgen.MixOps {
		o, ok := res.Ops[op]
		if !ok || o.OK == 0 || o.OKPerSec <= 0 {
			t.Errorf("%s did not run: %+v", op, o)
			continue
		}
		if !(0 < o.P50Ms && o.P50Ms <= o.P90Ms && o.P90Ms <= o.P99Ms && o.P99Ms <= o.MaxMs) {
			t.Errorf("%s latencies out of order: %+v", op, o)
		}
		if !strings.Contains(stdout.String(), "\n"+op+" ") {
			t.Errorf("the table has no %s line", op)
		}
	}
	for op, o := range res.Ops {
		if len(o.Errors) != 0 || o.Count != o.OK {
			t.Errorf("%s: errors %v (count %d, ok %d)", op, o.Errors, o.Count, o.OK)
		}
	}
}

func TestBenchRefusesBadFlagsBeforeCallingAnyone(t *testing.T) {
	for _, tc := range []struct{ args []string }{
		{[]string{"--mix", "buy=1"}},
		{[]string{"--mix", "cancel=1"}},
		{[]string{"--nodes", "ftp://x:1"}},
		{[]string{"--traders", "0"}},
		{[]string{"--duration", "0s"}},
	} {
		cmd := benchCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		// Port 1 on loopback: a run that got as far as calling would fail
		// on readiness after --ready-timeout instead.
		cmd.SetArgs(append([]string{"--nodes", "127.0.0.1:1", "--ready-timeout", "50ms", "--out", ""}, tc.args...))
		began := time.Now()
		err := cmd.ExecuteContext(context.Background())
		if err == nil || strings.Contains(err.Error(), "not ready") {
			t.Errorf("%v: %v", tc.args, err)
		}
		if time.Since(began) > time.Second {
			t.Errorf("%v took %v", tc.args, time.Since(began))
		}
	}
}
