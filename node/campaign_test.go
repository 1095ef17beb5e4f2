package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/internal/testdisk"
)

// fullStore is a watched log store on a small filesystem that a filler
// file has filled, after an append failed on it. Removing the filler
// gives the room back.
func fullStore(t *testing.T) (w *watchedStore, filler string) {
	t.Helper()
	dir := t.TempDir()
	testdisk.MountTmpfs(t, dir, "4m")
	bs, err := openLogStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bs.Close() })
	w = &watchedStore{BoltStore: bs}
	data := make([]byte, 64<<10)
	if err := w.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
		t.Fatal(err)
	}
	filler = testdisk.Fill(t, dir)
	for idx := uint64(2); idx < 100; idx++ {
		if err := w.StoreLogs([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("an append on a full disk: %v, want ENOSPC", err)
			}
			return w, filler
		}
	}
	t.Fatal("100 appends on a full disk, and none failed")
	return nil, ""
}

// A node whose log store cannot append asks no peer for a pre-vote or a
// vote and refuses a leadership transfer. A term written once the disk has
// room again (a small write, which fits where an append does not) does not
// end that; the probe at its next campaign does, and its requests go out.
func TestANodeThatCannotAppendAsksForNoVotesUntilAProbeFits(t *testing.T) {
	w, filler := fullStore(t)
	addr, raw := raft.NewInmemTransport("")
	peerAddr, peer := raft.NewInmemTransport("")
	raw.Connect(peerAddr, peer)
	peer.Connect(addr, raw)
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.store = w
	g.start(&fakeHeld{})
	t.Cleanup(func() { _ = g.Close() })
	asked := make(chan any, 4)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() { // the peer grants whatever it is asked
		for {
			select {
			case rpc := <-peer.Consumer():
				asked <- rpc.Command
				switch rpc.Command.(type) {
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Term: 2, Granted: true}, nil)
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: 2, Granted: true}, nil)
				}
			case <-done:
				return
			}
		}
	}()
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("me"), Addr: []byte(addr)}
	preVote := func() error {
		return g.RequestPreVote("peer", peerAddr, &raft.RequestPreVoteRequest{RPCHeader: header, Term: 2}, &raft.RequestPreVoteResponse{})
	}
	vote := func() error {
		return g.RequestVote("peer", peerAddr, &raft.RequestVoteRequest{RPCHeader: header, Term: 2}, &raft.RequestVoteResponse{})
	}
	transfer := func() error {
		return peer.TimeoutNow("me", addr, &raft.TimeoutNowRequest{RPCHeader: header}, &raft.TimeoutNowResponse{})
	}

	for name, ask := range map[string]func() error{"pre-vote": preVote, "vote": vote} {
		err := ask()
		if !errors.Is(err, errStoreCannotAppend) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("a %s asked with a full disk: %v", name, err)
		}
		// raft counts a pre-vote failing with this text as granted.
		if strings.Contains(err.Error(), "unexpected command") {
			t.Fatalf("the refusal reads as a peer without pre-vote: %v", err)
		}
	}
	if err := transfer(); err == nil || !strings.Contains(err.Error(), errStoreCannotAppend.Error()) {
		t.Fatalf("a leadership transfer to a node with a full disk: %v", err)
	}
	select {
	case cmd := <-asked:
		t.Fatalf("the peer was asked %T", cmd)
	default:
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := w.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	if !w.appendFailing() || w.writeFailure() == nil {
		t.Fatal("a term write ended the append failure")
	}
	if err := transfer(); err == nil {
		t.Fatal("a transfer was taken before an append or a probe succeeded")
	}
	w.probedAt = time.Time{} // the next campaign, past probeReuse
	if err := preVote(); err != nil {
		t.Fatalf("a pre-vote once the disk has room: %v", err)
	}
	if w.appendFailing() || w.writeFailure() != nil {
		t.Fatalf("the probe that fitted left the failure: %v", w.writeFailure())
	}
	if err := vote(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"*raft.RequestPreVoteRequest", "*raft.RequestVoteRequest"} {
		select {
		case cmd := <-asked:
			if got := fmt.Sprintf("%T", cmd); got != want {
				t.Fatalf("the peer was asked %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the peer was never asked %s", want)
		}
	}
	go func() { // raft takes the transfer now
		rpc := <-g.Consumer()
		rpc.Respond(&raft.TimeoutNowResponse{}, nil)
	}()
	if err := transfer(); err != nil {
		t.Fatalf("a transfer once the store appends: %v", err)
	}
}

// The probe writes the failed append's size within its bounds: a failed
// append of a few hundred bytes is probed with probeBytesMin, 64 KiB (room
// for a small write is not room for an append), one of many megabytes with
// probeBytesMax, 1 MiB (the disk need not hold the largest catch-up at
// once).
func TestTheProbeWritesTheFailedAppendsSizeWithinItsBounds(t *testing.T) {
	w, filler := fullStore(t)
	shrink := func(room int64) { // leaves about room bytes free
		t.Helper()
		fi, err := os.Stat(filler)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filler, fi.Size()-room); err != nil {
			t.Fatal(err)
		}
	}

	w.appendFailed.Store(&appendFailure{err: syscall.ENOSPC, bytes: 300})
	shrink(16 << 10)
	if err := w.appendRoom(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a probe for a 300-byte append with %d bytes free: %v, want ENOSPC", 16<<10, err)
	}

	w.appendFailed.Store(&appendFailure{err: syscall.ENOSPC, bytes: 64 << 20})
	shrink(2 << 20)
	if err := w.appendRoom(); err != nil {
		t.Fatalf("a probe for a 64 MiB append with %d bytes free: %v", 2<<20, err)
	}
	if w.appendFailing() {
		t.Fatal("a probe that fitted left the failure")
	}
}
