package rail

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/ecdsa"
	"github.com/btcsuite/btcd/btcutil/bech32"
)

// MaxDestinationLength bounds every destination string the rail parses, in
// bytes. BOLT11 sets no limit; this is the most a QR code holds (7089
// characters), far above any invoice a wallet produces.
const MaxDestinationLength = 7089

// bolt11ReaderDefaultCLTV is the min_final_cltv_expiry a reader assumes when
// an invoice has no `c` field.
const bolt11ReaderDefaultCLTV = 18

// knownEvenFeatures are the compulsory feature bits (BOLT 9) a reader of
// invoices understands: var_onion_optin, payment_secret, basic_mpp,
// option_route_blinding and option_payment_metadata. Any other even bit set
// makes the invoice unpayable (BOLT11: "it's ok to be odd").
var knownEvenFeatures = map[int]bool{8: true, 14: true, 16: true, 24: true, 48: true}

// DecodedInvoice is a BOLT11 payment request whose checksum and signature
// have been verified.
type DecodedInvoice struct {
	Network            Network
	AmountMsat         int64 // 0 when the invoice leaves the amount to the payer
	TimestampSec       int64
	PaymentHash        [32]byte
	PaymentSecret      []byte // 32 bytes; nil when the invoice has none
	Description        string // the `d` field; "" when absent
	DescriptionHash    []byte // the `h` field (32 bytes); nil when absent
	ExpirySeconds      int64  // 3600 when the invoice has no `x` field
	MinFinalCLTVExpiry int64  // 18 when the invoice has no `c` field
	Features           []int  // feature bits set, ascending
	PayeePubKey        []byte // 33-byte compressed node key that signed it
}

// ExpiresAtMs is the invoice's expiry instant in ms, saturating at the
// largest int64 rather than overflowing.
func (d DecodedInvoice) ExpiresAtMs() int64 {
	const maxSec = (1<<63 - 1) / 1000
	sec := d.TimestampSec + d.ExpirySeconds // both < 2^62: no overflow
	if sec > maxSec {
		return 1<<63 - 1
	}
	return sec * 1000
}

// DecodeInvoice parses and verifies a BOLT11 payment request of any network
// (lnbc, lntb, lntbs, lnbcrt), upper or lower case. It verifies the bech32
// checksum and the signature: against the `n` field when the invoice has
// one, else by recovering the payee's key from it. It skips unknown fields
// and refuses unknown compulsory feature bits, as BOLT11 requires.
func DecodeInvoice(s string) (DecodedInvoice, error) {
	var d DecodedInvoice
	if len(s) > MaxDestinationLength {
		return d, invalid(nil, "invalid Lightning invoice: longer than %d characters", MaxDestinationLength)
	}
	hrp, words, version, err := bech32.DecodeNoLimitWithVersion(s)
	if err != nil {
		return d, bech32Invalid("Lightning invoice", err)
	}
	if d.Network, d.AmountMsat, err = parseInvoiceHRP(hrp); err != nil {
		return d, err
	}
	if version != bech32.Version0 {
		return d, invalid(nil, "invalid Lightning invoice: it has a bech32m checksum; invoices use bech32")
	}
	if len(words) < timestampWords+signatureWords {
		return d, invalid(nil, "invalid Lightning invoice: too short to hold a timestamp and a signature")
	}
	body, sigWords := words[:len(words)-signatureWords], words[len(words)-signatureWords:]
	for _, w := range body[:timestampWords] {
		d.TimestampSec = d.TimestampSec<<5 | int64(w)
	}
	if err := d.readFields(body[timestampWords:]); err != nil {
		return d, err
	}
	if err := d.verifySignature(hrp, body, sigWords); err != nil {
		return d, err
	}
	return d, nil
}

// parseInvoiceHRP splits "ln" + currency + amount.
func parseInvoiceHRP(hrp string) (Network, int64, error) {
	rest, ok := strings.CutPrefix(hrp, "ln")
	if !ok {
		return "", 0, invalid(nil, "invalid Lightning invoice: prefix %q does not start with \"ln\"", hrp)
	}
	for _, c := range lnCurrencies {
		if amount, ok := strings.CutPrefix(rest, c.prefix); ok && (amount == "" || amount[0] >= '0' && amount[0] <= '9') {
			msat, err := decodeAmount(amount)
			return c.network, msat, err
		}
	}
	return "", 0, invalid(nil, "invalid Lightning invoice: unknown network prefix %q (want lnbc, lntb, lntbs or lnbcrt)", hrp)
}

// readFields reads the tagged fields. Per BOLT11 a reader uses the first
// p, s, h and n of the right length and skips the rest, and unknown fields.
func (d *DecodedInvoice) readFields(w []byte) error {
	d.ExpirySeconds = DefaultInvoiceExpirySeconds
	d.MinFinalCLTVExpiry = bolt11ReaderDefaultCLTV
	var havePaymentHash, haveDescription bool
	for len(w) > 0 {
		if len(w) < 3 {
			return invalid(nil, "invalid Lightning invoice: truncated tagged field")
		}
		tag, n := w[0], int(w[1])<<5|int(w[2])
		if len(w) < 3+n {
			return invalid(nil, "invalid Lightning invoice: tagged field runs past the signature")
		}
		data := w[3 : 3+n]
		w = w[3+n:]
		switch {
		case tag == tagPaymentHash && n == 52 && !havePaymentHash:
			b, err := wordsToBytes(data)
			if err != nil {
				return err
			}
			copy(d.PaymentHash[:], b)
			havePaymentHash = true
		case tag == tagPaymentSecret && n == 52 && d.PaymentSecret == nil:
			b, err := wordsToBytes(data)
			if err != nil {
				return err
			}
			d.PaymentSecret = b
		case tag == tagDescriptionHash && n == 52 && d.DescriptionHash == nil:
			b, err := wordsToBytes(data)
			if err != nil {
				return err
			}
			d.DescriptionHash = b
		case tag == tagPayeePubKey && n == 53 && d.PayeePubKey == nil:
			b, err := wordsToBytes(data)
			if err != nil {
				return err
			}
			if _, err := btcec.ParsePubKey(b); err == nil {
				d.PayeePubKey = b
			}
		case tag == tagDescription && !haveDescription:
			b, err := wordsToBytes(data)
			if err != nil {
				return err
			}
			if !utf8.Valid(b) {
				return invalid(nil, "invalid Lightning invoice: description is not valid UTF-8")
			}
			d.Description, haveDescription = string(b), true
		case tag == tagExpiry:
			v, err := wordsToInt(data, "expiry")
			if err != nil {
				return err
			}
			d.ExpirySeconds = v
		case tag == tagMinFinalCLTV:
			v, err := wordsToInt(data, "min_final_cltv_expiry")
			if err != nil {
				return err
			}
			d.MinFinalCLTVExpiry = v
		case tag == tagFeatures:
			if err := d.readFeatures(data); err != nil {
				return err
			}
		}
	}
	if !havePaymentHash {
		return invalid(nil, "invalid Lightning invoice: no payment hash")
	}
	if !haveDescription && d.DescriptionHash == nil {
		return invalid(nil, "invalid Lightning invoice: neither a description nor a description hash")
	}
	return nil
}

func (d *DecodedInvoice) readFeatures(w []byte) error {
	d.Features = d.Features[:0]
	for i, word := range w {
		for b := 4; b >= 0; b-- {
			if word>>b&1 == 0 {
				continue
			}
			bit := (len(w)-1-i)*5 + b
			if bit%2 == 0 && !knownEvenFeatures[bit] {
				return invalid(nil, "invalid Lightning invoice: it requires unknown feature bit %d", bit)
			}
			d.Features = append(d.Features, bit)
		}
	}
	// Collected from the most significant bit down; report ascending.
	for i, j := 0, len(d.Features)-1; i < j; i, j = i+1, j-1 {
		d.Features[i], d.Features[j] = d.Features[j], d.Features[i]
	}
	return nil
}

// verifySignature checks the 65-byte R || S || recid over the HRP and body.
func (d *DecodedInvoice) verifySignature(hrp string, body, sigWords []byte) error {
	sig, err := bech32.ConvertBits(sigWords, 5, 8, false)
	if err != nil || len(sig) != 65 {
		return invalid(nil, "invalid Lightning invoice: malformed signature")
	}
	recid := sig[64]
	if recid > 3 {
		return invalid(nil, "invalid Lightning invoice: signature recovery id %d is not 0-3", recid)
	}
	digest := signingDigest(hrp, body)
	if d.PayeePubKey != nil {
		// With an `n` field BOLT11 checks the signature against that key
		// instead of recovering one.
		var r, s btcec.ModNScalar
		overflowR, overflowS := r.SetByteSlice(sig[:32]), s.SetByteSlice(sig[32:64])
		pub, err := btcec.ParsePubKey(d.PayeePubKey)
		if err != nil || overflowR || overflowS || r.IsZero() || s.IsZero() ||
			!ecdsa.NewSignature(&r, &s).Verify(digest[:], pub) {
			return invalid(nil, "invalid Lightning invoice: signature does not match the payee node key")
		}
		return nil
	}
	compact := make([]byte, 0, 65)
	compact = append(compact, 27+4+recid)
	compact = append(compact, sig[:64]...)
	recovered, _, err := ecdsa.RecoverCompact(compact, digest[:])
	if err != nil {
		return invalid(nil, "invalid Lightning invoice: signature does not verify (no public key recovers from it)")
	}
	d.PayeePubKey = recovered.SerializeCompressed()
	return nil
}

// wordsToBytes regroups 5-bit words into bytes; the leftover padding bits
// must be fewer than five and zero.
func wordsToBytes(w []byte) ([]byte, error) {
	b, err := bech32.ConvertBits(w, 5, 8, false)
	if err != nil {
		return nil, invalid(nil, "invalid Lightning invoice: a field has non-zero padding")
	}
	return b, nil
}

// wordsToInt reads a big-endian unsigned integer field, bounded below 2^60
// so that sums with a timestamp cannot overflow.
func wordsToInt(w []byte, name string) (int64, error) {
	var v int64
	for _, x := range w {
		if v >= 1<<55 {
			return 0, invalid(nil, "invalid Lightning invoice: %s is too large", name)
		}
		v = v<<5 | int64(x)
	}
	return v, nil
}

// bech32Invalid turns a bech32 decoding error into a message for a client.
func bech32Invalid(what string, err error) error {
	var (
		mixed    bech32.ErrMixedCase
		checksum bech32.ErrInvalidChecksum
		length   bech32.ErrInvalidLength
		sep      bech32.ErrInvalidSeparatorIndex
		char     bech32.ErrInvalidCharacter
		nonset   bech32.ErrNonCharsetChar
	)
	var reason string
	switch {
	case errors.As(err, &mixed):
		reason = "it mixes upper and lower case"
	case errors.As(err, &checksum):
		reason = "the checksum does not match (a typo, or the string was cut short)"
	case errors.As(err, &length), errors.As(err, &sep):
		reason = "it is too short or has no '1' separator before the data"
	case errors.As(err, &char), errors.As(err, &nonset):
		reason = "it contains a character outside the bech32 alphabet"
	default:
		reason = "it is not valid bech32"
	}
	return invalid(err, "invalid %s: %s", what, reason)
}
