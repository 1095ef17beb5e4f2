package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/node"
)

// prometheusBinary finds Debian's prometheus. CI installs it (.ci/run), so
// there its absence fails the test; elsewhere the test is skipped.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is not installed; .ci/run installs the Debian package `prometheus`")
		}
		t.Skip("prometheus binary not found (apt-get install prometheus to run this test)")
	}
	return p
}

// promQuery runs an instant query against Prometheus' HTTP API and returns
// the samples: labels and value.
func promQuery(base, q string) ([]promSample, error) {
	res, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("query %q: %v: %s", q, err, b)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v", q, r.Value[1])
		}
		out = append(out, promSample{r.Metric, v})
	}
	return out, nil
}

type promSample struct {
	labels map[string]string
	value  float64
}

// TestPrometheusScrapesADevnet starts a 3-node devnet (mutual TLS on the
// admin listener, a read-only metrics token) and a real Prometheus that
// scrapes it with the deploy/ scrape settings: client certificate and
// bearer token. Through Prometheus' query API it expects every target up,
// a raft series from each node, the leader's commit time from raft's own
// instrumentation, and the HTTP counter of a signup made through the API.
func TestPrometheusScrapesADevnet(t *testing.T) {
	prom := prometheusBinary(t)
	bin := perpdBinary(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "metrics-token")
	metricsToken := "prometheus-scrape-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := node.WriteSecretFile(tokenFile, metricsToken); err != nil {
		t.Fatal(err)
	}
	base := freePortBase(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := cluster.StartDevnet(ctx, cluster.DevnetConfig{
		Binary: bin, Nodes: 3, Dir: filepath.Join(dir, "devnet"), HTTPBase: base,
		ExtraArgs: []string{"--metrics-token-file", tokenFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	var targets []string
	for _, n := range d.Nodes {
		targets = append(targets, `"`+n.Admin+`"`)
	}
	promDir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(promDir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: perpd
    scheme: https
    authorization:
      type: Bearer
      credentials_file: %s
    tls_config:
      ca_file: %s
      cert_file: %s
      key_file: %s
    static_configs:
      - targets: [%s]
`, tokenFile, d.Admin.CA, d.Admin.Cert, d.Admin.Key, strings.Join(targets, ", "))
	confFile := filepath.Join(promDir, "prometheus.yml")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	promAddr := freePort(t)
	cmd := exec.Command(prom, "--config.file="+confFile, "--storage.tsdb.path="+filepath.Join(promDir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	logf, err := os.Create(filepath.Join(promDir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	promBase := "http://" + promAddr

	// A write through the public API of node2 (a follower or the leader:
	// either counts it where it was served).
	apiBase := "http://" + d.Nodes[1].HTTP
	// Until node2 has applied the genesis it answers 503 with Retry-After,
	// as a client would retry.
	var res *http.Response
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPost, apiBase+"/v1/signup", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("idempotency-key", "prometheus-signup")
		var err error
		if res, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("signup: %d", res.StatusCode)
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Error("signup answer has no X-Request-Id")
	}

	// Each condition is polled: Prometheus needs a scrape or two.
	waitFor := func(what, q string, ok func([]promSample) bool) []promSample {
		t.Helper()
		var last []promSample
		var lastErr error
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			last, lastErr = promQuery(promBase, q)
			if lastErr == nil && ok(last) {
				return last
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("%s: query %q never matched; last %v %v", what, q, last, lastErr)
		return nil
	}
	waitFor("every target up", `up{job="perpd"} == 1`, func(s []promSample) bool { return len(s) == 3 })
	waitFor("raft commit index from every node", `perpd_raft_commit_index > 0`, func(s []promSample) bool { return len(s) == 3 })
	waitFor("exactly one leader", `sum(perpd_raft_is_leader)`, func(s []promSample) bool { return len(s) == 1 && s[0].value == 1 })
	waitFor("raft's own commit time on the leader", `perpd_raft_commitTime_count > 0`, func(s []promSample) bool { return len(s) >= 1 })
	got := waitFor("the signup in the HTTP counter",
		`perpd_http_requests_total{route="/v1/signup",method="POST",status="201"}`,
		func(s []promSample) bool { return len(s) == 1 && s[0].value == 1 })
	if inst := got[0].labels["instance"]; inst != d.Nodes[1].Admin {
		t.Errorf("signup counted on %s, served by %s", inst, d.Nodes[1].Admin)
	}
	// Every query of the shipped dashboard parses and runs.
	for _, q := range dashboardQueries(t, "perpd") {
		if _, err := promQuery(promBase, q); err != nil {
			t.Errorf("dashboard: %v", err)
		}
	}
}

// dashboardQueries returns every PromQL expression of the shipped Grafana
// dashboard, with its $job variable set.
func dashboardQueries(t *testing.T, job string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, strings.ReplaceAll(tg.Expr, "$job", job))
		}
	}
	if len(out) < 10 {
		t.Fatalf("dashboard has only %d queries", len(out))
	}
	return out
}
