package metrics

import (
	"regexp"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft's go-metrics series share the perpd_raft_ prefix with the raft
// state we read ourselves, on one scrape (Handler gathers both). A family
// both export, with their two help texts, is a gathering error: the scrape
// drops one of them. A leader's raft sets raft.peers at every
// configuration change, so perpd_raft_peers was exported twice there.
func TestRaftSinkSharesNoNameWithOurSeries(t *testing.T) {
	g, err := global()
	if err != nil {
		t.Fatal(err)
	}
	// What a leader's raft does in startStopReplication.
	gometrics.SetGauge([]string{"raft", "peers"}, 3)
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string]bool{}
	for _, f := range fams {
		theirs[f.GetName()] = true
	}
	ch := make(chan *prometheus.Desc, 64)
	(&nodeCollector{}).Describe(ch)
	(&replicaCollector{}).Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		if theirs[m[1]] {
			t.Errorf("%s is both ours and raft's go-metrics sink's: one of them is dropped from the scrape", m[1])
		}
	}
	// The scrape itself: our raft_peers beside the sink's gathers cleanly.
	ours := prometheus.NewRegistry()
	ours.MustRegister(constCollector{prometheus.MustNewConstMetric(descPeers, prometheus.GaugeValue, 3)})
	if _, err := (prometheus.Gatherers{g, ours}).Gather(); err != nil {
		t.Errorf("gathering the process's and the node's series: %v", err)
	}
}

// constCollector exports fixed metrics.
type constCollector []prometheus.Metric

func (c constCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c {
		ch <- m.Desc()
	}
}

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}
