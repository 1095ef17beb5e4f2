package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The replica comparison's gauges carry the latest outcome (1, 0 or -1,
// when, at which index) and are absent while there is none (a follower);
// the disagreements counter is always there.
func TestReplicaCheckSeries(t *testing.T) {
	r := &Registry{reg: prometheus.NewRegistry()}
	var last *ReplicaCheck
	var disagreements uint64
	r.WatchReplicas(func() (ReplicaCheck, bool) {
		if last == nil {
			return ReplicaCheck{}, false
		}
		return *last, true
	}, func() uint64 { return disagreements })

	values := func() map[string]float64 {
		t.Helper()
		fams, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range fams {
			m := f.GetMetric()[0]
			if m.Counter != nil {
				out[f.GetName()] = m.Counter.GetValue()
			} else {
				out[f.GetName()] = m.Gauge.GetValue()
			}
		}
		return out
	}
	if got := values(); len(got) != 1 || got["perpd_replicas_check_disagreements_total"] != 0 {
		t.Fatalf("no comparison yet: %v", got)
	}
	at := time.UnixMilli(1_790_000_000_500)
	for _, agree := range []int{1, 0, -1} {
		last = &ReplicaCheck{At: at, Index: 4242, Agree: agree}
		disagreements = uint64(1 - agree)
		got := values()
		if got["perpd_replicas_check_agree"] != float64(agree) || got["perpd_replicas_check_index"] != 4242 ||
			got["perpd_replicas_check_timestamp_seconds"] != 1_790_000_000.5 ||
			got["perpd_replicas_check_disagreements_total"] != float64(disagreements) {
			t.Errorf("agree %d: %v", agree, got)
		}
	}
}
