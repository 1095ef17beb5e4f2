package cli_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
)

// scrape fetches and parses a member's /metrics with token ("" for none).
func scrape(t *testing.T, adminAddr, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return res.StatusCode, fams
}

// sample returns the value of the series of family name whose labels
// include every pair of want; ok false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// TestMetricsOnTheAdminListener scrapes /metrics on every member of a
// cluster wired as `perpd serve` wires it: the bearer tokens it accepts,
// raft's series (ours and go-metrics'), the HTTP counter of a write made
// through a follower, apply and group-commit histograms, oracle staleness
// per feed, the conservation check a snapshot runs, the rate-limit table,
// the leader's scheduled replica comparison.
func TestMetricsOnTheAdminListener(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	const metricsToken = "metrics-read-only-token-0123456789"
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.MetricsToken(metricsToken),
		clustertest.TickInterval(50*time.Millisecond), clustertest.ReplicaCheckInterval(300*time.Millisecond))
	railMinIndex.Store(0)
	leader := c.Leader()
	f := c.Followers()[0]
	if !clustertest.Poll(15*time.Second, func() bool { _, ok := feedLast(c, f.ID, "ETHUSD"); return ok }) {
		t.Fatal("no ETH print reached the follower")
	}
	st, m := railCall(t, c.HTTP(f.ID), "POST", "/v1/signup", "", "metrics-signup", map[string]any{})
	if st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}

	// Who may scrape: the admin token or the metrics token, nobody else;
	// and the metrics token opens nothing but /metrics.
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {metricsToken, 200}, {c.Token, 200}} {
		if got, _ := scrape(t, f.AdminAddr, tc.token); got != tc.want {
			t.Errorf("scrape with token %q: %d, want %d", tc.token, got, tc.want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+f.AdminAddr+"/admin/status", nil)
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 {
		t.Fatalf("/admin/status with the metrics token: %v %v, want 401", res.StatusCode, err)
	}

	// A snapshot runs the conservation check.
	if _, err := c.Admin(f.ID).Snapshot(context.Background(), io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	_, fm := scrape(t, f.AdminAddr, metricsToken)
	_, lm := scrape(t, leader.AdminAddr, c.Token)

	mustAtLeast := func(fams map[string]*dto.MetricFamily, who string, min float64, name string, labels ...string) float64 {
		t.Helper()
		v, ok := sample(fams, name, labels...)
		if !ok {
			t.Errorf("%s: no series %s%v", who, name, labels)
		} else if v < min {
			t.Errorf("%s: %s%v = %v, want >= %v", who, name, labels, v, min)
		}
		return v
	}
	if v := mustAtLeast(fm, "follower", 1, "perpd_http_requests_total", "route", "/v1/signup", "method", "POST", "status", "201"); v != 1 {
		t.Errorf("follower counted %v signups, want 1", v)
	}
	if _, ok := sample(lm, "perpd_http_requests_total", "route", "/v1/signup"); ok {
		t.Error("the leader counted a signup it did not serve (the forward is not a public request)")
	}
	mustAtLeast(fm, "follower", 1, "perpd_http_request_duration_seconds", "route", "/v1/signup")
	if v, _ := sample(lm, "perpd_raft_is_leader"); v != 1 {
		t.Errorf("leader: perpd_raft_is_leader = %v", v)
	}
	if v, _ := sample(fm, "perpd_raft_is_leader"); v != 0 {
		t.Errorf("follower: perpd_raft_is_leader = %v", v)
	}
	mustAtLeast(fm, "follower", 1, "perpd_raft_state", "state", "Follower")
	mustAtLeast(fm, "follower", 1, "perpd_raft_commit_index")
	mustAtLeast(fm, "follower", 1, "perpd_raft_applied_index")
	mustAtLeast(fm, "follower", 3, "perpd_raft_peers")
	mustAtLeast(fm, "follower", 1, "perpd_raft_leader_changes_total")
	mustAtLeast(fm, "follower", 1, "perpd_fsm_apply_batch_entries")
	mustAtLeast(fm, "follower", 1, "perpd_fsm_apply_batch_seconds")
	mustAtLeast(lm, "leader", 1, "perpd_group_commit_commands")
	if v := mustAtLeast(fm, "follower", 0, "perpd_oracle_staleness_seconds", "feed", "ETHUSD"); v > 30 {
		t.Errorf("ETHUSD staleness %vs on a live cluster", v)
	}
	mustAtLeast(fm, "follower", 1, "perpd_conservation_check_ok")
	mustAtLeast(fm, "follower", 1, "perpd_conservation_check_index")
	mustAtLeast(fm, "follower", float64(time.Now().Add(-time.Minute).Unix()), "perpd_conservation_check_timestamp_seconds")
	mustAtLeast(fm, "follower", 1, "perpd_ratelimit_buckets")
	mustAtLeast(fm, "follower", 0, "perpd_ws_connections")
	mustAtLeast(fm, "follower", 0, "perpd_withdrawals_open", "state", "requested")
	mustAtLeast(fm, "follower", 0, "perpd_withdrawals_open", "state", "queued")
	mustAtLeast(fm, "follower", 0, "perpd_withdrawals_oldest_open_age_seconds")
	mustAtLeast(fm, "follower", 0, "perpd_usdx_withdrawals_in_flight")
	mustAtLeast(fm, "follower", 0, "perpd_ws_dropped_frames_total")
	if v, ok := sample(fm, "perpd_raft_store_failing"); !ok || v != 0 {
		t.Errorf("perpd_raft_store_failing = %v (reported %v)", v, ok)
	}
	if v, _ := sample(fm, "perpd_halted"); v != 0 {
		t.Errorf("perpd_halted = %v", v)
	}
	// The leader compares the replicas on its schedule and finds them
	// agreeing; a follower runs no comparison, so it reports none.
	if !clustertest.Poll(15*time.Second, func() bool {
		_, lm = scrape(t, leader.AdminAddr, c.Token)
		v, ok := sample(lm, "perpd_replicas_check_agree")
		return ok && v == 1
	}) {
		v, ok := sample(lm, "perpd_replicas_check_agree")
		t.Fatalf("leader: perpd_replicas_check_agree %v (present %v), want 1", v, ok)
	}
	mustAtLeast(lm, "leader", 1, "perpd_replicas_check_index")
	mustAtLeast(lm, "leader", float64(time.Now().Add(-time.Minute).Unix()), "perpd_replicas_check_timestamp_seconds")
	if v, ok := sample(lm, "perpd_replicas_check_disagreements_total"); !ok || v != 0 {
		t.Errorf("leader: perpd_replicas_check_disagreements_total %v (present %v), want 0", v, ok)
	}
	for _, m := range c.Followers() {
		_, fams := scrape(t, m.AdminAddr, metricsToken)
		for _, name := range []string{"perpd_replicas_check_agree", "perpd_replicas_check_timestamp_seconds", "perpd_replicas_check_index"} {
			if _, ok := sample(fams, name); ok {
				t.Errorf("follower %s exports %s", m.ID, name)
			}
		}
		if v, ok := sample(fams, "perpd_replicas_check_disagreements_total"); !ok || v != 0 {
			t.Errorf("follower %s: perpd_replicas_check_disagreements_total %v (present %v), want 0", m.ID, v, ok)
		}
	}
	// raft's own instrumentation, through go-metrics' Prometheus sink.
	mustAtLeast(lm, "leader", 1, "perpd_raft_commitTime")
	mustAtLeast(lm, "leader", 1, "perpd_raft_fsm_applyBatch")
	var raftNames []string
	for name := range lm {
		if strings.HasPrefix(name, "perpd_raft_") {
			raftNames = append(raftNames, name)
		}
	}
	if len(raftNames) < 10 {
		t.Errorf("only %d raft series: %v", len(raftNames), raftNames)
	}
	// raft's per-call internals are not collected (metrics.raftBlocked);
	// the log append's timing is.
	mustAtLeast(lm, "leader", 1, "perpd_raft_boltdb_storeLogs")
	for _, name := range raftNames {
		if strings.HasPrefix(name, "perpd_raft_net_") || name == "perpd_raft_boltdb_logSize" ||
			name == "perpd_raft_rpc_appendEntries_storeLogs" {
			t.Errorf("leader exports %s, one of raft's blocked per-call internals", name)
		}
	}
	// Every perpd_ series the shipped dashboard draws exists.
	name := regexp.MustCompile(`perpd_[A-Za-z0-9_]+`)
	for _, q := range dashboardQueries(t, "perpd") {
		for _, n := range name.FindAllString(q, -1) {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if _, ok := lm[base]; !ok {
					base = strings.TrimSuffix(base, suf)
				}
			}
			if lm[base] == nil && fm[base] == nil {
				t.Errorf("dashboard query %q uses %s, which no node exports", q, n)
			}
		}
	}
}
