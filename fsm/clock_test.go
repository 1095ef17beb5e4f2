package fsm

import "testing"

func TestClockTakesTheEntryStamp(t *testing.T) {
	r := newReplica(t)
	res := r.apply(tickAt(1_700_000_000_000))
	wantOK(t, res)
	if got := r.now(); got != 1_700_000_000_000 {
		t.Fatalf("now %d, want the entry's stamp", got)
	}
	if got := nowOf(t, res); got != 1_700_000_000_000 {
		t.Fatalf("tick answered nowMs %d", got)
	}
}

func TestTickAdvancesTime(t *testing.T) {
	r := newReplica(t)
	for _, ts := range []int64{1000, 1001, 2500, 2500 + MaxClockStepMs} {
		if got := nowOf(t, r.apply(tickAt(ts))); got != ts {
			t.Fatalf("tick at %d answered nowMs %d", ts, got)
		}
		if r.now() != ts {
			t.Fatalf("state time %d after a tick at %d", r.now(), ts)
		}
	}
}

func TestClockNeverRunsBackwards(t *testing.T) {
	r := newReplica(t)
	r.apply(tickAt(5000))
	for _, older := range []int64{4999, 1, 0, -7} {
		res := r.apply(tickAt(older))
		wantOK(t, res)
		if r.now() != 5000 || nowOf(t, res) != 5000 {
			t.Fatalf("a stamp of %d moved time to %d (answer %d), want 5000", older, r.now(), nowOf(t, res))
		}
	}
}

func TestOlderOrEqualStampChangesNoState(t *testing.T) {
	r := newReplica(t)
	r.apply(tickAt(5000))
	before := r.hash()
	r.apply(tickAt(5000))
	r.apply(tickAt(10))
	if after := r.hash(); after != before {
		t.Fatal("a tick that does not advance time changed the state")
	}
	r.apply(tickAt(5001))
	if r.hash() == before {
		t.Fatal("a tick that advances time must change the state (its time)")
	}
}

func TestEveryCommandCarriesTheClock(t *testing.T) {
	r := newReplica(t)
	wantOK(t, r.apply(noopAt(7000, "k", []byte{1})))
	if r.now() != 7000 {
		t.Fatalf("a non-tick entry must move time too; now %d", r.now())
	}
	// Even a refused entry was stamped by the leader: time passed.
	r.apply(mustCommand(t, CmdNodeMeta, 8000, NodeMeta{}))
	if r.now() != 8000 {
		t.Fatalf("now %d after a refused entry stamped 8000", r.now())
	}
}

func TestTimersFireOnlyWhenTimeAdvances(t *testing.T) {
	r := newReplica(t)
	const t0 = 1_000_000
	wantOK(t, r.apply(noopAt(t0, "k", []byte{1})))
	// An entry stamped in the past, however far, fires nothing.
	r.apply(tickAt(t0 - IdemRetentionMs*10))
	if !r.apply(noopAt(0, "k", []byte{1})).Replay {
		t.Fatal("record pruned by a backwards stamp")
	}
	// Advancing past the retention fires the pruning timer.
	r.advanceTo(t0 + IdemRetentionMs)
	if res := r.apply(noopAt(0, "k", []byte{2})); res.Replay || !res.OK() {
		t.Fatalf("record should be gone once time passed its retention: %+v", res)
	}
}

// A leader whose clock jumps a day ahead moves log time by MaxClockStepMs
// only: stored answers and timers keep their meaning.
func TestOneEntryAdvancesTimeAtMostMaxClockStep(t *testing.T) {
	r := newReplica(t)
	const t0 = 1_700_000_000_000
	wantOK(t, r.apply(noopAt(t0, "K", []byte{1})))
	res := r.apply(tickAt(t0 + 24*60*60*1000 + 5))
	if got := nowOf(t, res); got != t0+MaxClockStepMs {
		t.Fatalf("a stamp a day ahead moved time to +%d ms, want +%d", got-t0, MaxClockStepMs)
	}
	// The pruning timer ran at the new time and kept the record.
	if !r.apply(noopAt(t0+24*60*60*1000+6, "K", []byte{1})).Replay {
		t.Fatal("one skewed entry expired the idempotency store")
	}
	// A second skewed entry moves another step, no more.
	r.apply(tickAt(t0 + 48*60*60*1000))
	if got := r.now(); got != t0+3*MaxClockStepMs {
		t.Fatalf("now +%d after three skewed entries, want +%d", got-t0, 3*MaxClockStepMs)
	}
}

// The first stamp of a new cluster sets time as is: there is nothing to
// step from.
func TestFirstStampIsTakenAsIs(t *testing.T) {
	r := newReplica(t)
	r.apply(tickAt(1_700_000_000_000))
	if r.now() != 1_700_000_000_000 {
		t.Fatalf("now %d", r.now())
	}
}
