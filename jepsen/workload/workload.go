package workload

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
)

// Account is a trader account the workload created.
type Account struct {
	ID     string
	APIKey string
	// RailAddress is the account's Spark address (from its signup).
	RailAddress string
	// WithdrawTo is where a withdrawer's Spark withdrawals go (a Spark
	// address the simulated rail pays).
	WithdrawTo string
	// mints counts session keys minted, to stay under the live-key cap.
	mints atomic.Int32
	// resting holds the trader's orders that may be resting.
	resting restingSet
}

// MaxMintsPerAccount keeps mints below the live-key cap (20, master key
// included) so a mint is refused only by a fault, not by the cap.
const MaxMintsPerAccount = 18

// Pending is a write whose outcome is unknown, kept to be resolved.
type Pending struct {
	Op      history.Op // the invocation
	Account *Account
	Body    any // the request body, resent unchanged
}

// Env is shared by every process.
type Env struct {
	Client   *client.Client
	Rec      *history.Recorder
	Nodes    []string // public HTTP addresses
	Accounts []*Account
	// Traders are funded accounts that trade; their balances move with
	// fills, so they are checked by checker.Trading, not as registers.
	Traders []*Account
	// Withdrawers are funded accounts that withdraw (withdraw.go); their
	// balances move with withdrawals, so they are checked by
	// checker.Withdrawals, not as registers.
	Withdrawers []*Account
	// Payee, when set, signs the Lightning invoices a share of the
	// withdrawals go to (withdraw.go).
	Payee *Payee
	// Markets are the live markets traders use.
	Markets []MarketInfo
	// NoCancelAfter is set when the build has no cancel-all-after route.
	NoCancelAfter bool
	// Linearizable makes balance reads ask for X-Consistency: linearizable.
	Linearizable bool
	// MinIndex, when set, is sent as X-Min-Index with balance reads. Only
	// the final reads use it (set while no worker runs): during the run it
	// would hide stale reads from the linearizability checker.
	MinIndex uint64

	// prices is the newest mid per market the workload read.
	prices priceBook

	mu      sync.Mutex
	pending []Pending
	nextPID atomic.Int64

	// signups counts Signup calls; signupFrom holds the clients of the
	// further source addresses (signupClient).
	signups    atomic.Int64
	signupFrom map[int64]*client.Client
}

// SignupsPerAddress is how many signups go out from one client address.
// The venue meters signups per client address (30 at once, then one a
// minute: httpapi's "signup" budget), and a long run sets up more
// accounts than that (harness.DefaultTraders).
const SignupsPerAddress = 25

// signupClient is the client of the next signup: Client for the first
// SignupsPerAddress, then one leaving from 127.0.1.k for the k-th further
// SignupsPerAddress (loopback, outside the nodes' 127.0.0.x, so no
// partition rule touches it).
func (e *Env) signupClient() *client.Client {
	k := (e.signups.Add(1) - 1) / SignupsPerAddress
	if k == 0 || k > 250 {
		return e.Client
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.signupFrom[k]
	if !ok {
		if e.signupFrom == nil {
			e.signupFrom = map[int64]*client.Client{}
		}
		c = client.NewFrom(client.DefaultTimeout, net.IPv4(127, 0, 1, byte(k)))
		e.signupFrom[k] = c
	}
	return c
}

// AddPending keeps an unknown-outcome write for resolution.
func (e *Env) AddPending(p Pending) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = append(e.pending, p)
}

// TakePending returns and clears the unresolved writes.
func (e *Env) TakePending() []Pending {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.pending
	e.pending = nil
	return out
}

// Process is one logical client: it runs one operation at a time against
// its node. After an operation with an unknown outcome it takes a new
// process id, as in Jepsen (the old process may still be "in flight"),
// and keeps its node: the workers of Run are spread evenly over the nodes
// and stay so through faults. (Moving every worker that timed out on a
// node to the same next node herded them all onto one node within
// minutes.) The write left unknown is retried at once on the other nodes
// (settle.go), so a faulty node's refusals do not pile up unknown
// outcomes.
type Process struct {
	ID   int
	Node string
	Rand *rand.Rand
}

// Kind is one kind of operation.
type Kind struct {
	Name   string
	Weight int
	// Trader makes the operation act on one of Env.Traders.
	Trader bool
	// Withdrawer makes the operation act on one of Env.Withdrawers.
	Withdrawer bool
	// Run performs one operation for p on acct, recording it.
	Run func(ctx context.Context, e *Env, p *Process, acct *Account) history.Type
}

// Kinds is the default mix. Reads dominate so the linearizability checker
// sees every balance change from many angles.
func Kinds() []Kind {
	return []Kind{
		{Name: history.FFaucet, Weight: 30, Run: Faucet},
		{Name: history.FRead, Weight: 55, Run: ReadBalance},
		{Name: history.FListDeposits, Weight: 10, Run: ListDeposits},
		{Name: history.FMint, Weight: 5, Run: MintKey},
		// Trader kinds weigh 25 in all, so a trader stays near its order
		// budget (60 a minute per key, burst 20) at the default rate.
		{Name: "order-market", Weight: 6, Trader: true, Run: PlaceMarket},
		{Name: "order-limit", Weight: 3, Trader: true, Run: PlaceLimit},
		{Name: history.FCancel, Weight: 4, Trader: true, Run: CancelResting},
		// About one call every 4-6 s per trader at the default rate, against
		// 1-3 s timeouts: most deadlines pass (see cancelafter.go).
		{Name: history.FCancelAfter, Weight: 4, Trader: true, Run: CancelAllAfter},
		{Name: "order-stop", Weight: 3, Trader: true, Run: PlaceStop},
		{Name: "order-entry", Weight: 2, Trader: true, Run: PlaceEntry},
		{Name: "order-bracket", Weight: 3, Trader: true, Run: PlaceBracket},
		// About one withdrawal a second at the default rate, spread over
		// the withdrawers (withdraw.go).
		{Name: history.FWithdraw, Weight: 2, Withdrawer: true, Run: Withdraw},
	}
}

// Options tunes Run.
type Options struct {
	Workers int
	// Rate is the target total operations per second across workers.
	Rate  float64
	Kinds []Kind
	Seed  int64
}

// Run drives the workers until ctx ends and returns how many operations
// were invoked. A panicking worker is reported, not allowed to crash the
// harness (which must still heal the cluster).
func Run(ctx context.Context, e *Env, opts Options) (int64, error) {
	if len(e.Accounts) == 0 || len(e.Nodes) == 0 {
		return 0, fmt.Errorf("workload needs accounts and nodes")
	}
	total := 0
	for _, k := range opts.Kinds {
		total += k.Weight
	}
	if total <= 0 {
		return 0, fmt.Errorf("workload has no operation kinds")
	}
	// Each worker waits this long between operations on average.
	think := time.Duration(float64(opts.Workers) / opts.Rate * float64(time.Second))
	var wg sync.WaitGroup
	var invoked atomic.Int64
	errs := make(chan error, opts.Workers)
	for w := 0; w < opts.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs <- fmt.Errorf("worker %d panicked: %v\n%s", w, r, debug.Stack())
				}
			}()
			rng := rand.New(rand.NewSource(opts.Seed + int64(w)*7919))
			p := &Process{ID: e.newPID(), Node: e.Nodes[w%len(e.Nodes)], Rand: rng}
			for ctx.Err() == nil {
				k := pickKind(opts.Kinds, total, rng)
				acct := e.Accounts[rng.Intn(len(e.Accounts))]
				switch {
				case k.Trader && len(e.Traders) == 0, k.Withdrawer && len(e.Withdrawers) == 0:
					k = Kind{Name: history.FRead, Run: ReadBalance}
				case k.Trader:
					acct = e.Traders[rng.Intn(len(e.Traders))]
				case k.Withdrawer:
					acct = e.Withdrawers[rng.Intn(len(e.Withdrawers))]
				}
				invoked.Add(1)
				if k.Run(ctx, e, p, acct) == history.Info {
					// Crashed process: continue as a new one on the same
					// node, first settling what the old one left unknown.
					old := p.ID
					p.ID = e.newPID()
					for _, pend := range e.takePendingOf(old) {
						settleNow(ctx, e, p, pend)
					}
				}
				jitter := time.Duration(rng.Int63n(int64(think) + 1))
				select {
				case <-ctx.Done():
				case <-time.After(think/2 + jitter):
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return invoked.Load(), <-errs
}

func pickKind(kinds []Kind, total int, rng *rand.Rand) Kind {
	r := rng.Intn(total)
	for _, k := range kinds {
		if r < k.Weight {
			return k
		}
		r -= k.Weight
	}
	return kinds[len(kinds)-1]
}

// idemKey draws a fresh idempotency key.
func idemKey(rng *rand.Rand, prefix string) string {
	return fmt.Sprintf("jepsen-%s-%016x%016x", prefix, rng.Uint64(), rng.Uint64())
}

// opCtx bounds one operation; the client's own timeout is shorter, so an
// unanswered request ends as info before this fires.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*client.DefaultTimeout)
}
