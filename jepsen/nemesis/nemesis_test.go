package nemesis

import (
	"context"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestParseSelectsAndCombinesNemeses(t *testing.T) {
	for spec, want := range map[string][]string{
		"all":                   Names,
		"none":                  nil,
		"":                      nil,
		"partition,kill":        {"kill", "partition"},
		" transfer , kill,kill": {"kill", "transfer"},
	} {
		got, err := Parse(spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q) = %v, %v; want %v", spec, got, err, want)
		}
	}
	if _, err := Parse("kill,meteor"); err == nil {
		t.Fatal("an unknown nemesis was accepted")
	}
}

func TestPartitionNeedsAFirewall(t *testing.T) {
	if _, err := New([]string{"partition"}, &Env{}); err == nil {
		t.Fatal("the partition nemesis was built without a firewall")
	}
}

type fake struct {
	name          string
	mu            sync.Mutex
	starts, heals int
	active        bool
}

func (f *fake) Name() string { return f.name }
func (f *fake) Start(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	f.active = true
	return "on", nil
}
func (f *fake) fired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts > 0
}
func (f *fake) Heal(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heals++
	f.active = false
	return "off", nil
}

type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Fault(f string, ok bool, detail string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, f)
}

func TestScheduleFiresEveryNemesisAndLeavesNoFaultBehind(t *testing.T) {
	a, b := &fake{name: "a"}, &fake{name: "b"}
	rec := &events{}
	s := &Schedule{Nemeses: []Nemesis{a, b}, QuietMin: time.Millisecond, QuietMax: 2 * time.Millisecond,
		HoldMin: time.Millisecond, HoldMax: 2 * time.Millisecond, Rand: rand.New(rand.NewSource(1)), Rec: rec}
	// The run lasts 100 ms and, on a loaded machine whose timers ran late,
	// on until both have fired (within a deadline it cannot miss).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	time.Sleep(100 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); !(a.fired() && b.fired()) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if a.starts == 0 || b.starts == 0 {
		t.Fatalf("a nemesis never fired: a=%d b=%d", a.starts, b.starts)
	}
	if a.active || b.active || a.heals < a.starts || b.heals < b.starts {
		t.Fatalf("a fault was left in place: a=%+v b=%+v", a, b)
	}
	if s.Faults != a.starts+b.starts || len(rec.got) != 2*s.Faults {
		t.Fatalf("faults %d, events %d", s.Faults, len(rec.got))
	}
}

func TestClockNeedsTheClockOffsetFlag(t *testing.T) {
	if _, err := New([]string{"clock"}, &Env{}); err == nil {
		t.Fatal("the clock nemesis was built for a perpd without --clock-offset")
	}
	ns, err := New([]string{"clock"}, &Env{ClockFlag: true})
	if err != nil || len(ns) != 1 || ns[0].Name() != "clock" {
		t.Fatalf("New(clock) = %v, %v", ns, err)
	}
	// Nothing stepped: healing does nothing.
	if d, err := ns[0].Heal(context.Background()); d != "" || err != nil {
		t.Fatalf("Heal with nothing stepped = %q, %v", d, err)
	}
}
