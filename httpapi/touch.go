package httpapi

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/perpd/perpd/fsm"
)

// touchEvery is how often a node replicates the last use of the keys it
// served. lastSeenTsMs is therefore accurate to about this much, at the
// cost of one small log entry per interval per node, not one per read.
const touchEvery = 30 * time.Second

// touchMinAdvanceMs skips keys whose replicated last use is recent enough.
const touchMinAdvanceMs = 60_000

// touchMax bounds one batch; the rest waits for the next interval.
const touchMax = 10_000

// touches collects key uses seen by this node's readers.
type touches struct {
	mu   sync.Mutex
	last map[string]int64
}

func newTouches() *touches { return &touches{last: map[string]int64{}} }

func (t *touches) seen(keyID string) {
	t.mu.Lock()
	if len(t.last) < touchMax {
		t.last[keyID] = time.Now().UnixMilli()
	}
	t.mu.Unlock()
}

func (t *touches) drain() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.last
	t.last = map[string]int64{}
	return out
}

// RunTouches replicates key uses until ctx ends.
func (s *Server) RunTouches(ctx context.Context) {
	tk := time.NewTicker(touchEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			s.flushTouches(ctx)
		}
	}
}

func (s *Server) flushTouches(ctx context.Context) {
	seen := s.touch.drain()
	var p fsm.TouchPayload
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		ids := make([]string, 0, len(seen))
		for id := range seen {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if k := st.Access.Keys[id]; k != nil && seen[id]-k.LastSeenTsMs >= touchMinAdvanceMs {
				p.KeyIDs = append(p.KeyIDs, id)
				p.TsMs = append(p.TsMs, seen[id])
			}
		}
	})
	if len(p.KeyIDs) == 0 {
		return
	}
	cmd, err := fsm.NewCommand(fsm.CmdTouchKeys, p)
	if err != nil {
		return
	}
	if _, err := s.Node.Propose(ctx, cmd); err != nil {
		s.log.Debug("touch keys not replicated", "err", err)
	}
}
