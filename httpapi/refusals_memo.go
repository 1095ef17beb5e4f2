package httpapi

import (
	"sync"
	"time"

	"github.com/perpd/perpd/node"
)

// A leader budget (order, withdraw, signup) is drawn by the leader, when
// the write reaches it. Without memory, a node forwarded every write of a
// client already past its budget, and each cost the leader a forward, a
// meter check and log lines: the budget bounded what was applied, not
// what the leader spent refusing (load review of 2026-11-27: one address
// past its signup budget, through a follower, took a third of the
// leader's core). So a node remembers the leader's refusal of a subject
// (a key, or a client address) for a budget until the refusal's
// Retry-After, and answers that subject's writes on that budget 429
// itself meanwhile, with the leader's figures: the leader would have
// refused them too, as no token comes back before then. A new leader
// starts with full buckets, so such a client may wait out one
// Retry-After it would not have needed; a refusal is never remembered
// past it.
type leaderRefusals struct {
	mu    sync.Mutex
	until map[string]remembered // budget + "|" + subject
}

type remembered struct {
	until time.Time
	v     node.Verdict
}

// maxLeaderRefusals bounds the memory (a refusal lasts at most the
// budget's refill time); when full, expired ones are swept and a new one
// past the bound is not remembered (its subject is refused by the leader
// as before).
const maxLeaderRefusals = 65_536

func newLeaderRefusals() *leaderRefusals { return &leaderRefusals{until: map[string]remembered{}} }

// refused returns the remembered refusal of subject on budget at now, its
// Retry-After shortened to what is left of it.
func (r *leaderRefusals) refused(budget, subject string, now time.Time) (node.Verdict, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.until[budget+"|"+subject]
	if !ok {
		return node.Verdict{}, false
	}
	left := m.until.Sub(now)
	if left <= 0 {
		delete(r.until, budget+"|"+subject)
		return node.Verdict{}, false
	}
	v := m.v
	v.OK, v.Remaining = false, 0
	v.RetryAfterMs = (left + time.Millisecond - 1).Milliseconds()
	return v, true
}

// remember records the leader's refusal v of subject on budget, at now.
func (r *leaderRefusals) remember(budget, subject string, v node.Verdict, now time.Time) {
	if v.RetryAfterMs <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.until) >= maxLeaderRefusals {
		for k, m := range r.until {
			if !m.until.After(now) {
				delete(r.until, k)
			}
		}
		if len(r.until) >= maxLeaderRefusals {
			return
		}
	}
	r.until[budget+"|"+subject] = remembered{until: now.Add(time.Duration(v.RetryAfterMs) * time.Millisecond), v: v}
}
