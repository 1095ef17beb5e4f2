package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/usdx"
)

// TestPayoutGaugesShowWhatWaitsOnTheRails checks the counts, amounts and
// oldest ages of the withdrawals waiting on the rails, read from state at
// the log's time.
func TestPayoutGaugesShowWhatWaitsOnTheRails(t *testing.T) {
	const nowMs = 1_000_000
	st := &fsm.State{
		Funds: &funds.State{
			Withdrawals: map[uint64]*funds.Withdrawal{
				3: {Seq: 3, State: funds.StateQueued, AmountMsat: 5_000, RequestedTsMs: nowMs - 90_000},
				8: {Seq: 8, State: funds.StateRequested, AmountMsat: 7_000, RequestedTsMs: nowMs - 2_000},
				9: {Seq: 9, State: funds.StateRequested, AmountMsat: 1_000, RequestedTsMs: nowMs - 1_000},
				1: {Seq: 1, State: funds.StatePaid, AmountMsat: 99_000, RequestedTsMs: nowMs - 500_000},
			},
			Open: []uint64{3, 8, 9},
		},
		USDx: &usdx.State{
			Withdrawals: map[string]*usdx.Withdrawal{
				"uw_1": {ID: "uw_1", RequestedTsMs: nowMs - 30_000},
				"uw_2": {ID: "uw_2", RequestedTsMs: nowMs - 10_000},
			},
			InFlight: []string{"uw_1", "uw_2"},
		},
	}
	got := map[string]float64{}
	collectPayouts(st, nowMs, func(d *prometheus.Desc, v float64, labels ...string) {
		m := prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		key := d.String()
		for _, l := range pb.Label {
			key += "/" + l.GetValue()
		}
		got[key] = v
	})
	for _, tc := range []struct {
		d      *prometheus.Desc
		labels string
		want   float64
	}{
		{descPayoutsOpen, "/requested", 2},
		{descPayoutsOpen, "/queued", 1},
		{descPayoutsOpenAmt, "/requested", 8_000},
		{descPayoutsOpenAmt, "/queued", 5_000},
		{descPayoutsOldest, "", 90},
		{descTokenOpen, "", 2},
		{descTokenOldest, "", 30},
	} {
		if v, ok := got[tc.d.String()+tc.labels]; !ok || v != tc.want {
			t.Errorf("%s%s = %v (present %v), want %v", tc.d, tc.labels, v, ok, tc.want)
		}
	}

	// Nothing open: the gauges read zero, not absent, so an alert's
	// expression has a series; below the domains level USDx has none.
	got = map[string]float64{}
	collectPayouts(&fsm.State{Funds: &funds.State{}}, nowMs, func(d *prometheus.Desc, v float64, labels ...string) {
		got[d.String()+"/"+labels0(labels)] = v
	})
	if v, ok := got[descPayoutsOldest.String()+"/"]; !ok || v != 0 {
		t.Errorf("no open withdrawal: oldest age %v (present %v), want 0", v, ok)
	}
	if _, ok := got[descTokenOpen.String()+"/"]; ok {
		t.Error("a state without USDx exported a USDx gauge")
	}
}

func labels0(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}
