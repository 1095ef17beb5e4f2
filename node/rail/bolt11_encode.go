package rail

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/ecdsa"
	"github.com/btcsuite/btcd/btcutil/bech32"
)

// BOLT11 tagged-field types: the 5-bit value of each field's letter.
const (
	tagPaymentHash     = 1  // p
	tagFeatures        = 5  // 9
	tagExpiry          = 6  // x
	tagDescription     = 13 // d
	tagPaymentSecret   = 16 // s
	tagPayeePubKey     = 19 // n
	tagDescriptionHash = 23 // h
	tagMinFinalCLTV    = 24 // c
)

// Feature bits (BOLT 9) that the rail's invoices require: the compulsory
// (even) bit of var_onion_optin and of payment_secret, which every current
// Lightning wallet expects.
const (
	featureVarOnionOptin = 8
	featurePaymentSecret = 14
)

// Invoice limits and defaults.
const (
	// DefaultInvoiceExpirySeconds is BOLT11's own default expiry.
	DefaultInvoiceExpirySeconds = 3600
	// MaxInvoiceExpirySeconds is the SPEC's bound on expirySeconds
	// (2^53-1, the largest integer a JSON number carries exactly).
	MaxInvoiceExpirySeconds = 9_007_199_254_740_991
	// DefaultMinFinalCLTVExpiry is the min_final_cltv_expiry we write, the
	// value common Lightning nodes use (BOLT11's reader default is 18).
	DefaultMinFinalCLTVExpiry = 80
	// MaxMemoBytes is the longest description a `d` field holds: a field
	// carries at most 1023 5-bit words, which is 639 whole bytes.
	MaxMemoBytes = 639
	// DefaultInvoiceMemo is written when a deposit request has no memo, so
	// that a wallet shows what the payment is for.
	DefaultInvoiceMemo = "perpd deposit"

	timestampWords  = 7   // 35-bit timestamp
	signatureWords  = 104 // 520 bits: 64-byte signature + recovery id
	maxFieldWords   = 1023
	maxTimestampSec = 1<<35 - 1
)

// InvoiceFields is what EncodeInvoice writes and signs.
type InvoiceFields struct {
	Network            Network
	AmountMsat         int64 // 0 = any amount
	TimestampSec       int64
	PaymentHash        [32]byte
	PaymentSecret      [32]byte
	Description        string // UTF-8, at most MaxMemoBytes
	ExpirySeconds      int64  // > 0
	MinFinalCLTVExpiry int64  // > 0
}

// EncodeInvoice writes a BOLT11 payment request for f and signs it with the
// 32-byte node key: fields p, s, d, x, c and 9 (var_onion_optin and
// payment_secret compulsory), no `n` field, so a reader recovers the node's
// public key from the signature.
func EncodeInvoice(f InvoiceFields, nodeKey []byte) (string, error) {
	key, err := parseNodeKey(nodeKey)
	if err != nil {
		return "", err
	}
	return encodeInvoice(f, key)
}

func encodeInvoice(f InvoiceFields, key *btcec.PrivateKey) (string, error) {
	if err := f.check(); err != nil {
		return "", err
	}
	hrp := f.Network.InvoicePrefix()
	if f.AmountMsat > 0 {
		hrp += encodeAmount(f.AmountMsat)
	}

	words := uintWords(uint64(f.TimestampSec), timestampWords)
	words = appendField(words, tagPaymentHash, bytesToWords(f.PaymentHash[:]))
	words = appendField(words, tagPaymentSecret, bytesToWords(f.PaymentSecret[:]))
	words = appendField(words, tagDescription, bytesToWords([]byte(f.Description)))
	words = appendField(words, tagExpiry, uintWords(uint64(f.ExpirySeconds), 0))
	words = appendField(words, tagMinFinalCLTV, uintWords(uint64(f.MinFinalCLTVExpiry), 0))
	words = appendField(words, tagFeatures, featureWords(featureVarOnionOptin, featurePaymentSecret))

	digest := signingDigest(hrp, words)
	// SignCompact yields [27 + 4 (compressed key) + recid] || R || S; BOLT11
	// wants R || S || recid. The signature is RFC 6979 and low-S.
	compact := ecdsa.SignCompact(key, digest[:], true)
	sig := make([]byte, 0, 65)
	sig = append(sig, compact[1:]...)
	sig = append(sig, compact[0]-31)
	words = append(words, bytesToWords(sig)...)

	return bech32.Encode(hrp, words)
}

func (f InvoiceFields) check() error {
	if _, err := f.Network.params(); err != nil {
		return err
	}
	switch {
	case f.AmountMsat < 0 || f.AmountMsat > MaxInvoiceAmountMsat:
		return invalid(nil, "invoice amount must be between 0 and %d msat", MaxInvoiceAmountMsat)
	case f.TimestampSec < 0 || f.TimestampSec > maxTimestampSec:
		return invalid(nil, "invoice timestamp %d is outside the 35-bit range", f.TimestampSec)
	case f.ExpirySeconds < 1 || f.ExpirySeconds > MaxInvoiceExpirySeconds:
		return invalid(nil, "expirySeconds must be between 1 and %d", int64(MaxInvoiceExpirySeconds))
	case f.MinFinalCLTVExpiry < 1 || f.MinFinalCLTVExpiry > 1<<32:
		return invalid(nil, "min_final_cltv_expiry %d is out of range", f.MinFinalCLTVExpiry)
	case len(f.Description) > MaxMemoBytes:
		return invalid(nil, "memo is %d bytes; at most %d fit in an invoice", len(f.Description), MaxMemoBytes)
	case !utf8.ValidString(f.Description):
		return invalid(nil, "memo is not valid UTF-8")
	}
	return nil
}

// signingDigest is what BOLT11 signs: SHA-256 of the HRP's bytes followed by
// the data words (without the signature) packed into bytes, zero-padded to
// a byte boundary.
func signingDigest(hrp string, words []byte) [32]byte {
	packed, _ := bech32.ConvertBits(words, 5, 8, true) // padding never fails
	msg := make([]byte, 0, len(hrp)+len(packed))
	msg = append(msg, hrp...)
	msg = append(msg, packed...)
	return sha256.Sum256(msg)
}

// appendField writes a tagged field: type, 10-bit length, data. Callers keep
// data within maxFieldWords (check() bounds the only variable-size field).
func appendField(words []byte, tag byte, data []byte) []byte {
	if len(data) > maxFieldWords {
		panic(fmt.Sprintf("rail: bolt11 field %d has %d words", tag, len(data)))
	}
	words = append(words, tag, byte(len(data)>>5), byte(len(data)&31))
	return append(words, data...)
}

// bytesToWords regroups bytes into 5-bit words, zero-padding the last one.
func bytesToWords(b []byte) []byte {
	w, _ := bech32.ConvertBits(b, 8, 5, true) // padding never fails
	return w
}

// uintWords writes v big-endian in 5-bit words: exactly n words when n > 0
// (v must fit), else the fewest words that hold v (none for 0).
func uintWords(v uint64, n int) []byte {
	if n == 0 {
		for x := v; x > 0; x >>= 5 {
			n++
		}
	}
	w := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		w[i] = byte(v & 31)
		v >>= 5
	}
	return w
}

// featureWords writes a feature bit field, big-endian with bit 0 the least
// significant bit of the last word, in the fewest words.
func featureWords(bits ...int) []byte {
	top := 0
	for _, b := range bits {
		top = max(top, b)
	}
	w := make([]byte, top/5+1)
	for _, b := range bits {
		w[len(w)-1-b/5] |= 1 << (b % 5)
	}
	return w
}
