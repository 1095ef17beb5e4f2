package fsm

import (
	"crypto/sha256"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/trade"
)

// CmdType names a command. Values are part of the log format: never reuse
// or renumber one.
type CmdType uint16

// Command types. Grouped by domain in blocks of 20.
const (
	CmdTick     CmdType = 1 // advance the log clock; fires timers
	CmdNodeMeta CmdType = 2 // record a node's advertised addresses
	CmdGenesis  CmdType = 3 // seed a new cluster's state once
	CmdNoop     CmdType = 4 // carries nothing; used by tests and read barriers
	CmdNodeGone CmdType = 5 // drop a removed member's advertised addresses
	CmdGroup    CmdType = 6 // several commands in one entry (group commit; machine.go)

	CmdSignup     CmdType = 20 // create an account and its master key
	CmdMintKey    CmdType = 21 // mint a delegate key (session)
	CmdRevokeKeys CmdType = 22 // revoke one key or all but the caller's
	CmdFaucet     CmdType = 23 // testnet faucet grant, settled as a deposit
	CmdTouchKeys  CmdType = 24 // record keys' last use, batched by nodes

	CmdDepositSettled CmdType = 40 // the rail saw a deposit arrive
	// 41-59: money rails (invoices, withdrawals), declared in apply_funds.go.
	// 60-79: markets and the oracle, declared in apply_market.go.
)

// Command is the envelope of every log entry the state machine applies.
type Command struct {
	Type CmdType `cbor:"1,keyasint"`
	// TsMs is the leader's clock when it proposed the entry. The FSM's time
	// is the maximum stamp seen, so it never runs backwards.
	TsMs int64 `cbor:"2,keyasint"`
	// Account is the acting trader account, when there is one.
	Account string `cbor:"3,keyasint,omitempty"`
	// KeyID is the acting API key, when there is one.
	KeyID string `cbor:"4,keyasint,omitempty"`
	// IdemKey is the fully scoped idempotency key (the proposer prefixes the
	// client's key with its scope). Empty for internal commands that dedupe
	// by their own content.
	IdemKey string `cbor:"5,keyasint,omitempty"`
	// ReqHash identifies the request body behind IdemKey: a retry with the
	// same key and a different hash is refused as a reuse.
	ReqHash []byte `cbor:"6,keyasint,omitempty"`
	// Payload is the CBOR encoding of the type's payload struct.
	Payload []byte `cbor:"7,keyasint,omitempty"`
}

var (
	encMode cbor.UserBufferEncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	// Core deterministic encoding sorts map keys, so equal values encode to
	// equal bytes on every replica: the snapshot and the state hash rely on it.
	encMode, err = cbor.CoreDetEncOptions().UserBufferEncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		MaxArrayElements: 1 << 27,
		MaxMapPairs:      1 << 27,
		MaxNestedLevels:  64,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// Marshal encodes v canonically (used for payloads, snapshots and hashes).
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// Unmarshal decodes canonical CBOR into v.
func Unmarshal(b []byte, v any) error { return decMode.Unmarshal(b, v) }

// NewCommand builds a command with its payload encoded.
func NewCommand(t CmdType, payload any) (*Command, error) {
	c := &Command{Type: t}
	// Every order placement and every group: written by hand
	// (fastencode.go), the same bytes as Marshal.
	switch p := payload.(type) {
	case trade.PlaceRequest:
		if b, ok := appendPlace(make([]byte, 0, 64+len(p.OrderID)+len(p.MarketID)+len(p.TriggerKind)), &p); ok {
			c.Payload = b
			return c, nil
		}
	case GroupPayload:
		if b, ok := appendGroup(nil, p.Cmds); ok {
			c.Payload = b
			return c, nil
		}
	}
	if payload != nil {
		b, err := Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		c.Payload = b
	}
	return c, nil
}

// Encode returns the log-entry bytes of c (fastencode.go: the bytes
// Marshal would write).
func (c *Command) Encode() ([]byte, error) {
	return appendCommand(make([]byte, 0, commandSize(c)), c), nil
}

// DecodeCommand parses log-entry bytes.
func DecodeCommand(b []byte) (*Command, error) {
	var c Command
	if err := decodeCommand(b, &c, false, nil); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeCommand parses log-entry bytes into c, the canonical form without
// reflection (fastdecode.go); alias and known as for decodeCommandFast.
func decodeCommand(b []byte, c *Command, alias bool, known *access.State) error {
	*c = Command{}
	if decodeCommandFast(b, c, alias, known) {
		return nil
	}
	*c = Command{}
	if err := Unmarshal(b, c); err != nil {
		return fmt.Errorf("decode command: %w", err)
	}
	return nil
}

// RequestHash hashes the parts of a request that make it "the same request"
// for idempotency: the method, the route and the canonical body.
func RequestHash(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		l := uint64(len(p))
		for i := 0; i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(p)
	}
	return h.Sum(nil)
}
