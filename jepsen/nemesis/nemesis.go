package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"
)

// Nemesis is one kind of fault.
type Nemesis interface {
	// Name is the NEMESIS= token that selects it.
	Name() string
	// Start injects the fault and describes what it did. An error means
	// the fault may be partly in place; Heal must still be called.
	Start(ctx context.Context) (string, error)
	// Heal undoes the fault (a no-op when none is in place) and describes
	// what it did. It must be safe to call at any time, more than once.
	Heal(ctx context.Context) (string, error)
}

// Names lists every nemesis in the order `all` selects them.
var Names = []string{"kill", "pause", "partition", "membership", "transfer", "clock"}

// Parse turns "kill,pause" or "all" (or "none") into names, rejecting
// unknown ones.
func Parse(spec string) ([]string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "none" {
		return nil, nil
	}
	if spec == "all" {
		return append([]string(nil), Names...), nil
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		known := false
		for _, n := range Names {
			known = known || n == s
		}
		if !known {
			return nil, fmt.Errorf("unknown nemesis %q (known: %s, all, none)", s, strings.Join(Names, ", "))
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return indexOf(out[i]) < indexOf(out[j]) })
	return out, nil
}

func indexOf(name string) int {
	for i, n := range Names {
		if n == name {
			return i
		}
	}
	return len(Names)
}

// Recorder is where the schedule logs faults (the history).
type Recorder interface {
	// Fault records a nemesis event: f is e.g. "kill-start", ok whether it
	// worked, detail what it did.
	Fault(f string, ok bool, detail string)
}

// Schedule runs nemeses one fault at a time: quiet, start, hold, heal.
type Schedule struct {
	Nemeses []Nemesis
	// Quiet is the time between a heal and the next fault, Hold how long a
	// fault stays in place; each is drawn uniformly from [min, max].
	QuietMin, QuietMax time.Duration
	HoldMin, HoldMax   time.Duration
	Rand               *rand.Rand
	Rec                Recorder
	// Log receives progress lines.
	Log func(format string, args ...any)
	// Faults counts faults injected.
	Faults int
}

// Run injects faults until ctx ends, going round the nemeses in a shuffled
// order so that every selected kind fires even in a short run. It heals
// the fault in place before returning.
func (s *Schedule) Run(ctx context.Context) {
	if len(s.Nemeses) == 0 {
		<-ctx.Done()
		return
	}
	var order []Nemesis
	for {
		if !sleep(ctx, s.draw(s.QuietMin, s.QuietMax)) {
			return
		}
		if len(order) == 0 {
			order = append([]Nemesis(nil), s.Nemeses...)
			s.Rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		nem := order[0]
		order = order[1:]
		s.once(ctx, nem)
	}
}

// once runs one fault to completion. The heal uses a fresh context so an
// ended run still heals.
func (s *Schedule) once(ctx context.Context, nem Nemesis) {
	startCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	detail, err := nem.Start(startCtx)
	cancel()
	s.Faults++
	s.record(nem.Name()+"-start", detail, err)
	sleep(ctx, s.draw(s.HoldMin, s.HoldMax))
	healCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	detail, err = nem.Heal(healCtx)
	s.record(nem.Name()+"-stop", detail, err)
}

func (s *Schedule) record(f, detail string, err error) {
	if err != nil {
		detail = strings.TrimSpace(detail + " error: " + err.Error())
	}
	if s.Log != nil {
		s.Log("nemesis %s: %s", f, detail)
	}
	if s.Rec != nil {
		s.Rec.Fault(f, err == nil, detail)
	}
}

// HealAll heals every nemesis, whatever state it is in, and joins the
// errors.
func HealAll(ctx context.Context, nemeses []Nemesis, rec Recorder) error {
	var errs []error
	for _, n := range nemeses {
		detail, err := n.Heal(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name(), err))
		}
		if rec != nil && detail != "" {
			rec.Fault(n.Name()+"-stop", err == nil, "final heal: "+detail)
		}
	}
	return errors.Join(errs...)
}

func (s *Schedule) draw(min, max time.Duration) time.Duration {
	if max <= min {
		return min
	}
	return min + time.Duration(s.Rand.Int63n(int64(max-min)))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
