package harness

import (
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/client"
)

func TestRestorePathHeadsBackToThePlan(t *testing.T) {
	plan := &pricePlan{points: []client.ScriptPoint{{OffsetMs: 0, MidQ8: 100}, {OffsetMs: 4000, MidQ8: 104},
		{OffsetMs: 8000, MidQ8: 99}, {OffsetMs: 12000, MidQ8: 102}}}
	got := restorePath(plan, 90, 7500) // 500 ms before the 8000 point: skipped
	want := []client.ScriptPoint{{OffsetMs: 0, MidQ8: 90}, {OffsetMs: 4500, MidQ8: 102}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("restore path %v, want %v", got, want)
	}
	// Past the plan's end: back to its last price.
	got = restorePath(plan, 90, 20000)
	if len(got) != 2 || got[1].MidQ8 != 102 || got[1].OffsetMs <= 0 {
		t.Fatalf("restore path after the plan %v", got)
	}
}

func TestBoundaryNear(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		from, to string
		near     bool
	}{
		{"2026-01-01T10:20:00Z", "2026-01-01T10:25:00Z", false},
		{"2026-01-01T10:55:00Z", "2026-01-01T10:57:00Z", false},
		{"2026-01-01T10:55:00Z", "2026-01-01T10:58:30Z", true}, // 11:00 within 2 min after
		{"2026-01-01T11:01:30Z", "2026-01-01T11:05:00Z", true}, // 11:00 within 2 min before
		{"2026-01-01T11:02:00Z", "2026-01-01T11:05:00Z", true}, // exactly 2 min: counted
		{"2026-01-01T11:02:01Z", "2026-01-01T11:05:00Z", false},
		{"2026-01-01T10:30:00Z", "2026-01-01T11:30:00Z", true},
	}
	for _, c := range cases {
		if got := boundaryNear(at(c.from), at(c.to)); got != c.near {
			t.Errorf("boundaryNear(%s, %s) = %t, want %t", c.from, c.to, got, c.near)
		}
	}
}
