// Package tokenrail is the outside world of USDx: the token issuer and its
// custody (deposit addresses, custody transfers for USDx withdrawals,
// address freezes, the issuer's attestation of supply). The state machine
// never calls it; the leader's driver (node/tokenraildriver.go) turns its
// answers into commands. Testnet runs the simulation (Sim).
package tokenrail

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
)

// Address is an account's token deposit address.
type Address struct {
	Address       string
	AccountNumber int64
}

// Attestation is the issuer's report of the token's supply and the
// venue's custody holdings.
type Attestation struct {
	Supply, Issued, Burned, Custody int64
}

// Rail is a token rail.
type Rail interface {
	// TokenIdentifier names the token, "" when unknown.
	TokenIdentifier() string
	// DepositAddress returns the account's deposit address, allocated on
	// first request; the same account always gets the same address.
	DepositAddress(ctx context.Context, accountID string) (Address, error)
	// Transfer sends usdx tokens from custody to addr for the withdrawal
	// id. Idempotent by id: a repeat returns the first transfer's ref.
	Transfer(ctx context.Context, id string, usdx int64, addr string) (issuerRef string, err error)
	// Freeze freezes (or unfreezes) addr at the issuer. impactedMicro is
	// the balance it froze in micro-USDx, -1 when the issuer does not say.
	Freeze(ctx context.Context, addr string, freeze bool) (issuerRef string, impactedMicro int64, err error)
}

// ErrUnavailable means the rail cannot answer now; the driver retries.
var ErrUnavailable = errors.New("token rail unavailable")

// Sim is the simulated issuer of testnet: addresses derived from the
// account id (so every node allocates the same one), transfers and
// freezes that land at once. It keeps no state: a transfer's ref is
// derived from its id, so a retried transfer answers the same ref without
// a record of it (a remembered set would grow with every withdrawal).
type Sim struct{}

// NewSim returns a simulated rail.
func NewSim() *Sim { return &Sim{} }

// TokenIdentifier is the simulated token's name.
func (s *Sim) TokenIdentifier() string { return "usdx-testnet" }

// DepositAddress derives the address from the account id: "sprt1" and 40
// hex characters of SHA-256("usdx-deposit:" + accountID); the account
// number is the hash's first 6 bytes.
func (s *Sim) DepositAddress(_ context.Context, accountID string) (Address, error) {
	sum := sha256.Sum256([]byte("usdx-deposit:" + accountID))
	var n [8]byte
	copy(n[2:], sum[:6])
	return Address{Address: "sprt1" + hex.EncodeToString(sum[:20]), AccountNumber: int64(binary.BigEndian.Uint64(n[:]))}, nil
}

// Transfer lands at once; the same id always answers the same ref.
func (s *Sim) Transfer(_ context.Context, id string, _ int64, _ string) (string, error) {
	sum := sha256.Sum256([]byte("usdx-transfer:" + id))
	return "simiss_" + hex.EncodeToString(sum[:8]), nil
}

// Freeze lands at once; the simulated issuer does not report balances.
func (s *Sim) Freeze(_ context.Context, addr string, freeze bool) (string, int64, error) {
	action := "unfreeze"
	if freeze {
		action = "freeze"
	}
	sum := sha256.Sum256([]byte(action + ":" + addr))
	return "simfrz_" + hex.EncodeToString(sum[:6]), -1, nil
}

// SimulateDeposit plays someone sending usdx tokens to the account's
// deposit address, and returns the issuer's ref of that transfer (fresh
// each time: two sends are two deposits).
func (s *Sim) SimulateDeposit(accountID string, usdx int64) string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return "simdep_" + hex.EncodeToString(nonce[:])
}
