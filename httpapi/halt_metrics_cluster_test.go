package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
)

// scrapeFamilies fetches and parses a member's /metrics.
func scrapeFamilies(t *testing.T, c *clustertest.Cluster, id string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+c.Member(id).AdminAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s /metrics: %d", id, res.StatusCode)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// stateFigures are the series read from the replicated state at the log's
// time: a halted replica's state is frozen (perhaps half an entry in)
// while its estimate of log time runs on, so every feed's staleness and
// every open withdrawal's age would climb there, paging "feed X has not
// printed" and "a withdrawal has waited" (deploy/alerts.yml takes the max
// over the members) for a venue that is fine.
var stateFigures = []string{"perpd_oracle_staleness_seconds", "perpd_withdrawals_open",
	"perpd_withdrawals_oldest_open_age_seconds", "perpd_usdx_withdrawals_oldest_in_flight_age_seconds"}

// A halted replica exports that it halted, and none of the figures of the
// state it no longer serves.
func TestHaltedReplicaExportsNoStateFigures(t *testing.T) {
	c := readyCluster(t)
	f := c.Followers()[0]
	if !clustertest.Poll(15*time.Second, func() bool {
		_, ok := scrapeFamilies(t, c, f.ID)["perpd_oracle_staleness_seconds"]
		return ok
	}) {
		t.Fatal("no oracle staleness on a healthy follower")
	}
	fams := scrapeFamilies(t, c, f.ID)
	for _, name := range stateFigures {
		if fams[name] == nil {
			t.Fatalf("healthy follower: no %s", name)
		}
	}
	f.Node.Machine().Read(func(st *fsm.State, _ uint64) { haltOn.Store(st) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Leader().Node.Propose(ctx, &fsm.Command{Type: cmdBreakOne}); err != nil {
		t.Fatal(err)
	}
	if !clustertest.Poll(10*time.Second, func() bool { return f.Node.Halted() != nil }) {
		t.Fatal("the follower did not halt")
	}
	fams = scrapeFamilies(t, c, f.ID)
	if h := fams["perpd_halted"]; h == nil || h.Metric[0].GetGauge().GetValue() != 1 {
		t.Fatalf("halted follower: perpd_halted %v", h)
	}
	for _, name := range stateFigures {
		if fams[name] != nil {
			t.Errorf("halted follower exports %s: %v", name, fams[name].Metric)
		}
	}
}
