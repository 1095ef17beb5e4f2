package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"strings"

	"github.com/perpd/perpd/fsm/funds"
)

// confirmToken: the withdrawal confirmation of SPEC sections 2 and 7.
//
// A token is stateless: "wct1_" + base64url(claims || mac), where claims
// are expiresAtMs (8 bytes), amountMsat (8 bytes) and a 16-byte nonce, and
// mac is HMAC-SHA256 over the account id, the normalized destination and
// the claims, keyed by a key the node derives from the cluster secret. So any
// node can issue and check one, and it binds account, destination and
// amount. The state machine, which never sees the key, checks the rest in
// log time: the amount, the expiry, and single use (a replicated set of
// spent token ids, pruned as they expire).
const (
	confirmTokenPrefix = "wct1_"
	confirmClaimsLen   = 8 + 8 + 16
	confirmMACLen      = sha256.Size
)

// Problems the proposing node reports instead of claims.
const (
	problemMalformed = "confirmToken is malformed: quote again and send the token unchanged"
	problemBinding   = "this confirmToken was issued for another account or destination: quote this destination again"
)

var errNoConfirmKey = errors.New("withdrawal confirmation is unavailable: the node has no cluster secret")

// confirmKey is derived by the node from the cluster secret (its own
// label), which every member shares and no operator holds.
func (s *Server) confirmKey() ([]byte, error) {
	key := s.Node.ConfirmKey()
	if len(key) == 0 {
		return nil, errNoConfirmKey
	}
	return key, nil
}

func confirmMAC(key []byte, account, dest string, claims []byte) []byte {
	m := hmac.New(sha256.New, key)
	writeField(m, account)
	writeField(m, dest)
	m.Write(claims)
	return m.Sum(nil)
}

// writeField writes a length-prefixed field, so that no two (account,
// destination) pairs hash alike.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// mintConfirmToken issues a token for account to withdraw amountMsat to
// dest until expiresAtMs.
func (s *Server) mintConfirmToken(account, dest string, amountMsat, expiresAtMs int64) (string, error) {
	key, err := s.confirmKey()
	if err != nil {
		return "", err
	}
	claims := make([]byte, confirmClaimsLen)
	binary.BigEndian.PutUint64(claims[0:8], uint64(expiresAtMs))
	binary.BigEndian.PutUint64(claims[8:16], uint64(amountMsat))
	if _, err := rand.Read(claims[16:]); err != nil {
		return "", err
	}
	raw := append(claims, confirmMAC(key, account, dest, claims)...)
	return confirmTokenPrefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// readConfirmToken checks a token's binding to account and dest and
// returns its claims for the state machine, or the problem with it.
func (s *Server) readConfirmToken(tok, account, dest string) *funds.Confirm {
	rest, ok := strings.CutPrefix(tok, confirmTokenPrefix)
	if !ok {
		return &funds.Confirm{Problem: problemMalformed}
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) != confirmClaimsLen+confirmMACLen {
		return &funds.Confirm{Problem: problemMalformed}
	}
	key, err := s.confirmKey()
	if err != nil {
		return &funds.Confirm{Problem: err.Error()}
	}
	claims, mac := raw[:confirmClaimsLen], raw[confirmClaimsLen:]
	if !hmac.Equal(mac, confirmMAC(key, account, dest, claims)) {
		return &funds.Confirm{Problem: problemBinding}
	}
	id := sha256.Sum256(raw)
	return &funds.Confirm{
		TokenID:     hex.EncodeToString(id[:16]),
		ExpiresAtMs: int64(binary.BigEndian.Uint64(claims[0:8])),
		AmountMsat:  int64(binary.BigEndian.Uint64(claims[8:16])),
	}
}
