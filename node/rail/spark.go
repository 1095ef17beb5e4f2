package rail

import (
	"crypto/sha256"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil/bech32"
)

// A Spark address, as Spark wallets write it, is bech32m over a protobuf
// message whose field 1 holds the wallet's 33-byte compressed secp256k1
// identity public key: payload = 0x0a 0x21 || key (field 1, wire type 2,
// length 33). The HRP names the network: spark, sparkt (testnet), sparks
// (signet), sparkrt (regtest); earlier SDKs wrote sp, spt, sps and sprt,
// which we still read. Messages with more fields (Spark invoices) are not
// plain addresses and are refused.
const (
	sparkKeyField   = 0x0a // protobuf tag: field 1, length-delimited
	sparkKeyLen     = 33
	sparkPayloadLen = 2 + sparkKeyLen
)

// accountKeyTag separates the account-address derivation from any other
// use of the same seed bytes.
const accountKeyTag = "perpd/rail/spark-identity/v1"

// SparkAddress is a decoded Spark address.
type SparkAddress struct {
	Network        Network
	IdentityPubKey []byte // 33-byte compressed secp256k1 key
}

// String is the canonical spelling: the network's current HRP, lowercase.
func (a SparkAddress) String() string {
	s, err := EncodeSparkAddress(a.Network, a.IdentityPubKey)
	if err != nil {
		return ""
	}
	return s
}

// EncodeSparkAddress writes a Spark address for a compressed identity key.
func EncodeSparkAddress(n Network, identityPubKey []byte) (string, error) {
	p, err := n.params()
	if err != nil {
		return "", err
	}
	if len(identityPubKey) != sparkKeyLen {
		return "", invalid(nil, "Spark identity key is %d bytes, want %d", len(identityPubKey), sparkKeyLen)
	}
	if _, err := btcec.ParsePubKey(identityPubKey); err != nil {
		return "", invalid(err, "Spark identity key is not a valid secp256k1 public key")
	}
	return encodeSparkWithHRP(p.sparkHRP, identityPubKey)
}

func encodeSparkWithHRP(hrp string, identityPubKey []byte) (string, error) {
	payload := make([]byte, 0, sparkPayloadLen)
	payload = append(payload, sparkKeyField, sparkKeyLen)
	payload = append(payload, identityPubKey...)
	return bech32.EncodeM(hrp, bytesToWords(payload))
}

// ParseSparkAddress decodes a Spark address of any network, upper or lower
// case, checking the bech32m checksum and that the key is a curve point.
func ParseSparkAddress(s string) (SparkAddress, error) {
	var a SparkAddress
	if len(s) > MaxDestinationLength {
		return a, invalid(nil, "invalid Spark address: longer than %d characters", MaxDestinationLength)
	}
	hrp, words, version, err := bech32.DecodeNoLimitWithVersion(s)
	if err != nil {
		return a, bech32Invalid("Spark address", err)
	}
	network, ok := sparkNetworkOf(hrp)
	if !ok {
		return a, invalid(nil, "invalid Spark address: unknown prefix %q (want spark, sparkt, sparks or sparkrt)", hrp)
	}
	if version != bech32.VersionM {
		return a, invalid(nil, "invalid Spark address: it has a bech32 checksum; Spark addresses use bech32m")
	}
	payload, err := bech32.ConvertBits(words, 5, 8, false)
	if err != nil {
		return a, invalid(nil, "invalid Spark address: malformed payload")
	}
	if len(payload) > sparkPayloadLen && payload[0] == sparkKeyField && payload[1] == sparkKeyLen {
		return a, invalid(nil, "invalid Spark address: it carries more than an identity key (a Spark invoice?); send a plain Spark address")
	}
	if len(payload) != sparkPayloadLen || payload[0] != sparkKeyField || payload[1] != sparkKeyLen {
		return a, invalid(nil, "invalid Spark address: it does not hold a 33-byte identity key")
	}
	key := payload[2:]
	if _, err := btcec.ParsePubKey(key); err != nil {
		return a, invalid(err, "invalid Spark address: its identity key is not a valid secp256k1 public key")
	}
	return SparkAddress{Network: network, IdentityPubKey: key}, nil
}

// accountAddress derives the Spark address of an account from its seed:
// the identity key is k*G with k = SHA-256(tag || counter || seed), taking
// the first counter (from 0) whose k is a valid private key (the odds that
// counter 0 fails are about 2^-128). Pure: the same seed and network give
// the same address on every node.
//
// The seed travels in the replicated log, so k is no secret: the simulated
// rail never signs with it. A real rail would derive the account's address
// from its own wallet keys, using the seed only as an index.
func accountAddress(n Network, seed []byte) string {
	for counter := range 256 {
		h := sha256.New()
		h.Write([]byte(accountKeyTag))
		h.Write([]byte{byte(counter)})
		h.Write(seed)
		k := h.Sum(nil)
		if !validScalar(k) {
			continue
		}
		_, pub := btcec.PrivKeyFromBytes(k)
		addr, err := EncodeSparkAddress(n, pub.SerializeCompressed())
		if err != nil {
			panic("rail: " + err.Error()) // n was checked by the constructor
		}
		return addr
	}
	panic("rail: no valid key in 256 hashes") // probability ~2^-32768
}
