package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/perpd/perpd/fsm/por"
)

// snapshotMagic starts every snapshot so a wrong file is refused early.
var snapshotMagic = []byte("PERPDSNP")

// Snapshot encodes the whole state: magic, format version, applied index,
// then the canonical CBOR of State. It first checks ledger conservation:
// a snapshot must never carry a broken state to another replica, so a
// failed check halts this one and fails the snapshot. A halted machine
// never snapshots (its state may hold part of an entry).
func (m *Machine) Snapshot() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(m.encodedSize.Load()) + 64)
	if err := m.SnapshotTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SnapshotTo writes Snapshot's bytes to w as they are encoded, a field of
// State at a time (encode_fields.go): only the largest field's encoding is
// in memory at once. An error from the checks is a *Halt; any other is
// the encoder's or w's, and w then holds part of a snapshot.
func (m *Machine) SnapshotTo(w io.Writer) error {
	if err := m.rlockFilled(); err != nil {
		return err
	}
	defer m.mu.RUnlock()
	if h := m.halt.Load(); h != nil {
		return h
	}
	if err := checkLedger(m.st.Ledger); err != nil {
		h := &Halt{Index: m.index, Reason: "ledger check failed at snapshot: " + err.Error()}
		m.haltWith(h)
		return m.halt.Load()
	}
	header := make([]byte, 0, len(snapshotMagic)+12)
	header = append(header, snapshotMagic...)
	header = binary.BigEndian.AppendUint32(header, uint32(StateVersion))
	header = binary.BigEndian.AppendUint64(header, m.index)
	if _, err := w.Write(header); err != nil {
		return err
	}
	return m.writeState(w)
}

// writeState writes the canonical CBOR of State to w, through a buffer
// sized from the last encoding's largest field: twice it, since canonical
// CBOR sorts a map's pairs in a staging area the size of the map at the
// buffer's tail, and one size too small would double at the largest map.
// The caller holds m.mu (read).
func (m *Machine) writeState(w io.Writer) error {
	hint := int(m.largestField.Load())
	buf := bytes.NewBuffer(make([]byte, 0, 2*hint+hint/16+4096))
	largest, total, err := writeState(w, m.st, buf)
	if err != nil {
		return err
	}
	m.largestField.Store(int64(largest))
	m.encodedSize.Store(int64(total))
	return nil
}

// Restore replaces the whole state with a snapshot's, taking the applied
// index from the snapshot's own header. Raft restores go through RestoreAt.
func (m *Machine) Restore(data []byte) error {
	st, index, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	return m.install(st, index)
}

// RestoreAt replaces the whole state with a snapshot's, at the log index
// raft gave the snapshot. The header's index is not trusted for that: a
// snapshot taken on another cluster (an operator's restore) carries an
// index of a different log. The applied index never runs backwards.
func (m *Machine) RestoreAt(data []byte, index uint64) error {
	st, _, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	return m.install(st, index)
}

func (m *Machine) install(st *State, index uint64) error {
	if h := m.halt.Load(); h != nil {
		return h
	}
	if err := checkInstallable(st); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = st
	m.index = max(m.index, index)
	// The last entry's Ctx and commands still point into the old state;
	// let it go now rather than at the next entry.
	m.ctx, m.cmd, m.subCmd = Ctx{}, Command{}, Command{}
	return nil
}

// ValidateSnapshot decodes a snapshot and checks its ledger without
// installing it. Raft panics when a user restore fails inside the state
// machine, so an operator's file is checked before raft sees it.
func ValidateSnapshot(data []byte) error {
	_, err := InspectSnapshot(data)
	return err
}

// SnapshotFacts is what a restore checks a snapshot against the cluster
// it would replace.
type SnapshotFacts struct {
	// Deployment is the snapshot's genesis deployment ("" before genesis).
	Deployment string
	// FeatureLevel is the level the snapshot's state is at.
	FeatureLevel uint32
}

// InspectSnapshot is ValidateSnapshot that also returns the snapshot's facts.
func InspectSnapshot(data []byte) (SnapshotFacts, error) {
	st, _, err := decodeSnapshot(data)
	if err != nil {
		return SnapshotFacts{}, err
	}
	f := SnapshotFacts{FeatureLevel: st.FeatureLevel}
	if st.Genesis != nil {
		f.Deployment = st.Genesis.Deployment
	}
	return f, checkInstallable(st)
}

// checkInstallable is what install refuses of a decoded state, so that
// ValidateSnapshot refuses it before raft sees an operator's file (raft
// panics when a user restore fails inside the state machine): a level
// past this build's, or a pending proof of reserves without its trees.
func checkInstallable(st *State) error {
	if err := checkBuildLevel(st); err != nil {
		return err
	}
	if st.PoR != nil && st.PoR.Pending != nil && st.PoR.Pending.Snap == nil {
		return errors.New("snapshot: its pending proof of reserves has no trees")
	}
	return nil
}

// checkBuildLevel refuses a state raised past this build's feature level:
// the entries after it would be applied by older rules. A replayed raise
// halts such a replica (applySetFeatureLevel); its snapshot is refused
// the same way, before anything is installed.
func checkBuildLevel(st *State) error {
	if st.FeatureLevel > FeatureLevel {
		return fmt.Errorf("snapshot at feature level %d; this build implements %d at most: run a newer build", st.FeatureLevel, FeatureLevel)
	}
	return nil
}

func decodeSnapshot(data []byte) (*State, uint64, error) {
	if len(data) < len(snapshotMagic)+12 || !bytes.Equal(data[:len(snapshotMagic)], snapshotMagic) {
		return nil, 0, errors.New("not a perpd snapshot")
	}
	rest := data[len(snapshotMagic):]
	version := binary.BigEndian.Uint32(rest[:4])
	index := binary.BigEndian.Uint64(rest[4:12])
	if version > StateVersion {
		return nil, 0, fmt.Errorf("snapshot format %d is newer than this build (%d)", version, StateVersion)
	}
	st, err := decodeState(rest[12:])
	if err != nil {
		return nil, 0, fmt.Errorf("decode snapshot: %w", err)
	}
	// Older formats are migrated here as versions are added.
	st.Version = StateVersion
	if err := finishDecoded(st); err != nil {
		return nil, 0, fmt.Errorf("snapshot refused: %w", err)
	}
	return st, index, nil
}

// finishDecoded fills a decoded state's missing parts and checks its
// ledger. A snapshot that decodes but holds what no replica writes (a
// null where the domains keep a record) can trip a fill hook; it is
// refused like any other bad snapshot rather than taking the node down.
// The state is not installed yet, so nothing shared is left half done.
func finishDecoded(st *State) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed state: %v", p)
		}
	}()
	st.fillNil()
	return checkLedger(st.Ledger)
}

// decodeState decodes the CBOR of State. The fast path (snapshot_fast.go)
// either gives the reference decoder's result or fails; on failure the
// reference decoder decides, so what is refused, and why, is its call.
func decodeState(body []byte) (*State, error) {
	st, err := decodeStateFast(body)
	if restoreShadow != nil {
		restoreShadow(body, st, err)
	}
	if err == nil {
		return st, nil
	}
	return decodeStateRef(body)
}

// restoreShadow, when set (by this package's tests), sees the outcome of
// every fast decode, so each restore the tests make is also checked
// against the reference decoder.
var restoreShadow func(body []byte, fast *State, err error)

// decodeStateRef is the reference decoder: Unmarshal into NewState().
func decodeStateRef(body []byte) (*State, error) {
	st := NewState()
	if err := Unmarshal(body, st); err != nil {
		return nil, err
	}
	return st, nil
}

// fillNil gives a decoded state non-nil maps, so an old snapshot without a
// newer domain still applies.
func (s *State) fillNil() {
	fresh := NewState()
	if s.Ledger == nil {
		s.Ledger = fresh.Ledger
	}
	if s.Ledger.Balances == nil {
		s.Ledger.Balances = map[string]int64{}
	}
	if s.Idem == nil {
		s.Idem = fresh.Idem
	}
	if s.Idem.Records == nil {
		s.Idem.Records = map[string]*IdemRecord{}
	}
	if s.Idem.Bytes == 0 && len(s.Idem.Records) > 0 {
		s.Idem.recount()
	}
	if s.Nodes == nil {
		s.Nodes = fresh.Nodes
	}
	if s.Access == nil {
		s.Access = fresh.Access
	}
	s.Access.FillNil()
	if s.Funds == nil {
		s.Funds = fresh.Funds
	}
	s.Funds.FillNil()
	if s.Market == nil {
		s.Market = fresh.Market
	}
	for _, f := range fillHooks {
		f(s)
	}
}

// fillHooks let domains initialise their part of a restored state.
var fillHooks []func(s *State)

// StateHash returns the applied index and the SHA-256 of the canonical
// encoding of State, read atomically. Replicas at the same index must agree.
func (m *Machine) StateHash() (uint64, string, error) {
	if err := m.rlockFilled(); err != nil {
		return 0, "", err
	}
	defer m.mu.RUnlock()
	h := sha256.New()
	if err := m.writeState(h); err != nil {
		return 0, "", err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return m.index, hex.EncodeToString(sum[:]), nil
}

// rlockFilled takes m.mu for reading, first giving a pending Proof of
// Reserves snapshot that this machine left to its PoRBuilds
// (LevelPoRBesideApply) its trees: the encoding is the state's, in which
// the pending snapshot is the one its entry's state gives, built or not
// here yet. The check is made under the read lock the caller then encodes
// under: an entry applied while a build is awaited may publish that tree
// and leave the next one pending without its trees. On an error the lock
// is not held.
func (m *Machine) rlockFilled() error {
	for {
		m.mu.RLock()
		if m.opts.PoRBuilds == nil {
			return nil
		}
		var pd *por.Pending
		if p := m.st.PoR; p != nil && p.Pending != nil && p.Pending.Snap == nil {
			pd = p.Pending
		}
		if pd == nil {
			return nil
		}
		m.mu.RUnlock()
		snap, err := m.opts.PoRBuilds.Await(pd.Index, pd.TsMs)
		if err == nil && (snap == nil || snap.TsMs != pd.TsMs) {
			err = errors.New("the build answered a snapshot of another time")
		}
		if err != nil {
			return fmt.Errorf("proof of reserves pending since entry %d: %w", pd.Index, err)
		}
		m.mu.Lock()
		if pd.Snap == nil {
			pd.Snap = snap
		}
		m.mu.Unlock()
	}
}
