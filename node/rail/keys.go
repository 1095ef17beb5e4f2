package rail

import (
	"bytes"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/btcsuite/btcd/btcec/v2"
)

// Sizes of the random values the rail draws.
const (
	NodeKeyBytes = 32 // secp256k1 private key of the Lightning node
	SeedBytes    = 32 // account seed behind a railAddress
	secretBytes  = 32 // payment preimage, payment secret
)

// NewNodeKey draws a node private key from r (crypto/rand when nil). The
// caller persists it and passes it to NewSimRail on every start, so that
// invoices stay payable across restarts; every node of a cluster should use
// the same key, so that an invoice signed by one leader is recognized by the
// next.
func NewNodeKey(r io.Reader) ([]byte, error) {
	r = orCryptoRand(r)
	for range 16 {
		k := make([]byte, NodeKeyBytes)
		if _, err := io.ReadFull(r, k); err != nil {
			return nil, fmt.Errorf("rail: draw node key: %w", err)
		}
		if validScalar(k) {
			return k, nil
		}
	}
	// Sixteen draws outside [1, n-1] (each has odds ~2^-128) mean the
	// reader is not random.
	return nil, errors.New("rail: draw node key: random source returned no valid key")
}

// DrawSeed draws an account seed for AccountAddress from r (crypto/rand
// when nil). The proposing node calls it and carries the seed in the
// signup command, so that every replica derives the same railAddress.
func DrawSeed(r io.Reader) ([]byte, error) {
	seed := make([]byte, SeedBytes)
	if _, err := io.ReadFull(orCryptoRand(r), seed); err != nil {
		return nil, fmt.Errorf("rail: draw account seed: %w", err)
	}
	return seed, nil
}

func orCryptoRand(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return r
}

// validScalar reports whether k (32 bytes) is a private key in [1, n-1].
func validScalar(k []byte) bool {
	var s btcec.ModNScalar
	overflow := s.SetByteSlice(k)
	return len(k) == 32 && !overflow && !s.IsZero()
}

// parseNodeKey checks and parses a node private key. btcec would silently
// reduce an out-of-range key modulo n; we refuse it instead, since it means
// the stored key is corrupt.
func parseNodeKey(k []byte) (*btcec.PrivateKey, error) {
	if len(k) != NodeKeyBytes {
		return nil, fmt.Errorf("rail: node key is %d bytes, want %d", len(k), NodeKeyBytes)
	}
	if !validScalar(k) {
		return nil, errors.New("rail: node key is not a valid secp256k1 private key")
	}
	key, _ := btcec.PrivKeyFromBytes(k)
	return key, nil
}

// NodeKeyFromSecret derives the cluster's node key from the cluster secret
// every member shares (never the operators' admin token), so all nodes sign
// and recognise the same invoices. HKDF-SHA256 with a label of its own, so
// the other keys derived from that secret reveal nothing of this one; the output is a valid scalar with overwhelming odds and
// NewNodeKey draws again from the same stream otherwise.
func NodeKeyFromSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("rail: node key secret is empty")
	}
	stream, err := hkdf.Key(sha256.New, []byte(secret), nil, "perpd/rail/node-key/v1", NodeKeyBytes*16)
	if err != nil {
		return nil, err
	}
	return NewNodeKey(bytes.NewReader(stream))
}
