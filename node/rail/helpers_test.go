package rail

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// specKeyHex is the private key that signs every example invoice of the
// BOLT11 spec; specPayeeHex is its public key. Using it as our test node key
// lets one constant serve both the spec vectors and our own invoices.
const (
	specKeyHex   = "e126f68f7eafcc8b74f54d269fe206be715000f94dac067d1c04a8ca3b2db734"
	specPayeeHex = "03e7156ae33b0a208d0744199163177e909e80176e55d97a2f221ede0f934dd9ad"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// detReader is a deterministic byte stream (a SHA-256 chain) standing in
// for crypto/rand, so that tests reproduce exactly.
type detReader struct {
	state [32]byte
	buf   []byte
}

func newDetReader(label string) *detReader {
	return &detReader{state: sha256.Sum256([]byte(label))}
}

func (r *detReader) Read(p []byte) (int, error) {
	for n := 0; n < len(p); {
		if len(r.buf) == 0 {
			r.state = sha256.Sum256(r.state[:])
			r.buf = append(r.buf[:0], r.state[:]...)
		}
		c := copy(p[n:], r.buf)
		r.buf = r.buf[c:]
		n += c
	}
	return len(p), nil
}

func newTestRail(t testing.TB, n Network) *SimRail {
	t.Helper()
	r, err := NewSimRail(SimConfig{Network: n, NodeKey: mustHex(t, specKeyHex), Rand: newDetReader(t.Name()), Book: NewSimBook()})
	if err != nil {
		t.Fatalf("NewSimRail: %v", err)
	}
	return r
}

// otherKey is a second node key, for invoices this rail did not issue.
func otherKey(t testing.TB) []byte {
	t.Helper()
	k, err := NewNodeKey(newDetReader("other node"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
