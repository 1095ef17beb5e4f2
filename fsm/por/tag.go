package por

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// AccountTag is the account's tag in one tree:
//
//	HMAC-SHA256(secret, "perpd/por/tag/v1" 0x00 asset 0x00 accountID 0x00 tsMs)
//
// with tsMs as 8 bytes big-endian. secret is the SHA-256 of the account's
// oldest live API key that can read the proof (from feature level 8;
// before it, its oldest key still on record, revoked or not: see
// fsm.LevelPoRTagLiveKey): never published, unknown to anyone without that
// key, and known to the key's holder, who can recompute their own tag. Knowing rootSalt and
// every account id, nobody else can link a tag to an account, and tags of
// different trees (tsMs, asset) are unlinkable.
func AccountTag(secret []byte, asset, accountID string, tsMs int64) Hash {
	// HMAC (RFC 2104) spelled out over stack buffers: the state machine
	// tags every account each minute, and crypto/hmac allocates per call.
	var key [sha256.BlockSize]byte
	if len(secret) > sha256.BlockSize {
		k := sha256.Sum256(secret)
		copy(key[:], k[:])
	} else {
		copy(key[:], secret)
	}
	var ibuf [sha256.BlockSize + 192]byte
	in := ibuf[:sha256.BlockSize]
	for i, b := range key {
		in[i] = b ^ 0x36
	}
	in = append(in, "perpd/por/tag/v1\x00"...)
	in = append(in, asset...)
	in = append(in, 0)
	in = append(in, accountID...)
	in = append(in, 0)
	in = binary.BigEndian.AppendUint64(in, uint64(tsMs))
	inner := sha256.Sum256(in)
	var obuf [sha256.BlockSize + sha256.Size]byte
	for i, b := range key {
		obuf[i] = b ^ 0x5c
	}
	copy(obuf[sha256.BlockSize:], inner[:])
	return sha256.Sum256(obuf[:])
}

// RootSalt is a tree's salt: SHA-256("perpd/por/salt/v1" 0x00 asset 0x00
// tsMs seed), tsMs and seed as 8 bytes big-endian each. Published beside
// the root; it keeps leaf hashes of different trees apart.
func RootSalt(asset string, tsMs int64, seed uint64) Hash {
	var buf bytes.Buffer
	buf.WriteString("perpd/por/salt/v1\x00" + asset + "\x00")
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(tsMs))
	binary.BigEndian.PutUint64(b[8:], seed)
	buf.Write(b[:])
	return sha256.Sum256(buf.Bytes())
}

// DecodeProof reads a proof document strictly: unknown fields and
// trailing data are refused.
func DecodeProof(r io.Reader) (ProofDoc, error) {
	var d ProofDoc
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("not a proof document: %v", err)
	}
	if dec.More() {
		return d, fmt.Errorf("not a proof document: trailing data")
	}
	if _, err := dec.Token(); err != io.EOF {
		return d, fmt.Errorf("not a proof document: trailing data")
	}
	return d, nil
}
