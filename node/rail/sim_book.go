package rail

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// SimBook is the simulated payment network's record of payouts, the part
// of a real rail that lives at the provider, not in any one node: a payout
// is executed once per RailRef, and every later Pay with that RailRef, from
// whichever node, reports the first outcome. That is what keeps the Rail
// contract (Pay idempotent by RailRef across leaders) on the simulated rail:
// each node builds its own SimRail, and a new leader's SimRail used to
// remember nothing and pay again.
type SimBook struct {
	mu       sync.Mutex
	outcomes *fifoCache[PayoutResult]
	executed int64
	// dir, when set, holds one file per executed payout, so that nodes in
	// separate processes on one machine (a devnet) share the network.
	dir string
}

// NewDirSimBook returns a book that records outcomes as files in dir
// (created if missing): every process opening the same directory sees one
// simulated network, and a payout is executed once whichever process
// asks first. One small file per payout; the directory belongs to the
// test deployment and goes with it.
func NewDirSimBook(dir string) (*SimBook, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sim rail book: %w", err)
	}
	b := NewSimBook()
	b.dir = dir
	return b, nil
}

// NewSimBook returns an empty book.
func NewSimBook() *SimBook {
	return &SimBook{outcomes: newFIFOCache[PayoutResult](MaxRememberedPayouts)}
}

// pay executes p with simulate unless the book already holds an outcome
// for p.RailRef, which it returns instead.
func (b *SimBook) pay(p Payout, simulate func(Payout) PayoutResult) PayoutResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	if res, ok := b.outcomes.get(p.RailRef); ok {
		return res
	}
	if b.dir != "" {
		return b.payShared(p, simulate)
	}
	res := simulate(p)
	b.outcomes.put(p.RailRef, res)
	b.executed++
	return res
}

// payShared executes p unless another process already did: the outcome
// file is created by a hard link, which fails if it exists, so exactly one
// process wins and every other one reads the winner's outcome.
func (b *SimBook) payShared(p Payout, simulate func(Payout) PayoutResult) PayoutResult {
	sum := sha256.Sum256([]byte(p.RailRef))
	path := filepath.Join(b.dir, hex.EncodeToString(sum[:16])+".json")
	res, err := readOutcome(path)
	if err == nil {
		b.outcomes.put(p.RailRef, res)
		return res
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return unreadableOutcome(path, err)
	}
	res = simulate(p)
	if err := writeOutcomeOnce(path, res); errors.Is(err, fs.ErrExist) {
		won, err := readOutcome(path)
		if err != nil {
			return unreadableOutcome(path, err)
		}
		res = won
	} else if err != nil {
		// The book cannot record it: report pending, so the leader asks
		// again rather than apply an outcome no other process knows.
		return PayoutResult{Status: PayoutPending, Reason: "simulated network unavailable: " + err.Error()}
	} else {
		b.executed++
	}
	b.outcomes.put(p.RailRef, res)
	return res
}

// unreadableOutcome answers a payout whose record exists but does not
// read (cut short by a power loss, or not readable by this process): the
// network may have made it, so it is never executed again, only reported
// pending until an operator repairs the record. The reason reaches the
// withdrawal's owner: it names the record's file, not its directory.
func unreadableOutcome(path string, err error) PayoutResult {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return PayoutResult{Status: PayoutPending, Reason: fmt.Sprintf("simulated network: payout record %s is unreadable: %v", filepath.Base(path), err)}
}

func readOutcome(path string) (PayoutResult, error) {
	var res PayoutResult
	raw, err := os.ReadFile(path)
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal(raw, &res)
}

func writeOutcomeOnce(path string, res PayoutResult) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".payout-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// Readable by every process sharing the book, which may run under
	// other users (the fault-injection harness gives each node its own
	// uid): CreateTemp makes the file 0600.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	// Synced before the link and the directory after it: a power loss must
	// not leave a payout made and its record empty or gone.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Executed is how many payouts the simulated network carried out.
func (b *SimBook) Executed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.executed
}

// simNetworks holds one book per rail identity (network and node key) in
// this process: every member of a cluster derives the same node key, so
// the nodes of a cluster run in one process (tests, harnesses) share their
// simulated network without any wiring.
var simNetworks = struct {
	sync.Mutex
	books map[string]*SimBook
}{books: map[string]*SimBook{}}

func sharedSimBook(n Network, pubKey []byte) *SimBook {
	id := string(n) + ":" + hex.EncodeToString(pubKey)
	simNetworks.Lock()
	defer simNetworks.Unlock()
	b := simNetworks.books[id]
	if b == nil {
		b = NewSimBook()
		simNetworks.books[id] = b
	}
	return b
}
