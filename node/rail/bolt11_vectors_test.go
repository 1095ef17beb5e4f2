package rail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/bech32"
)

// The example invoices of BOLT #11 ("Examples" and "Examples of Invalid
// Invoices"), all signed with specKeyHex.

const (
	specTimestamp = 1496314658
	specHash      = "0001020304050607080900010203040506070809000102030405060708090102"
	specCakeList  = "One piece of chocolate cake, one icecream cone, one pickle, one slice of swiss cheese, one slice of salami, one lollypop, one piece of cherry pie, one sausage, one cupcake, and one slice of watermelon"

	specDonation   = "lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6twvus8g6rfwvs8qun0dfjkxaq8rkx3yf5tcsyz3d73gafnh3cax9rn449d9p5uxz9ezhhypd0elx87sjle52x86fux2ypatgddc6k63n7erqz25le42c4u4ecky03ylcqca784w"
	specCoffee     = "lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpuaztrnwngzn3kdzw5hydlzf03qdgm2hdq27cqv3agm2awhz5se903vruatfhq77w3ls4evs3ch9zw97j25emudupq63nyw24cg27h2rspfj9srp"
	specNonsense   = "lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny"
	specHashed     = "lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqscc6gd6ql3jrc5yzme8v4ntcewwz5cnw92tz0pc8qcuufvq7khhr8wpald05e92xw006sq94mg8v2ndf4sefvf9sygkshp5zfem29trqq2yxxz7"
	specTestnet    = "lntb20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfpp3x9et2e20v6pu37c5d9vax37wxq72un98kmzzhznpurw9sgl2v0nklu2g4d0keph5t7tj9tcqd8rexnd07ux4uv2cjvcqwaxgj7v4uwn5wmypjd5n69z2xm3xgksg28nwht7f6zspwp3f9t"
	specRouted     = "lnbc20m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqsfpp3qjmp7lwpagxun9pygexvgpjdc4jdj85fr9yq20q82gphp2nflc7jtzrcazrra7wwgzxqc8u7754cdlpfrmccae92qgzqvzq2ps8pqqqqqqpqqqqq9qqqvpeuqafqxu92d8lr6fvg0r5gv0heeeqgcrqlnm6jhphu9y00rrhy4grqszsvpcgpy9qqqqqqgqqqqq7qqzqj9n4evl6mr5aj9f58zp6fyjzup6ywn3x6sk8akg5v4tgn2q8g4fhx05wf6juaxu9760yp46454gpg5mtzgerlzezqcqvjnhjh8z3g2qqdhhwkj"
	specP2SH       = "lnbc20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfppj3a24vwu6r8ejrss3axul8rxldph2q7z9kmrgvr7xlaqm47apw3d48zm203kzcq357a4ls9al2ea73r8jcceyjtya6fu5wzzpe50zrge6ulk4nvjcpxlekvmxl6qcs9j3tz0469gq5g658y"
	specP2WPKH     = "lnbc20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfppqw508d6qejxtdg4y5r3zarvary0c5xw7kepvrhrm9s57hejg0p662ur5j5cr03890fa7k2pypgttmh4897d3raaq85a293e9jpuqwl0rnfuwzam7yr8e690nd2ypcq9hlkdwdvycqa0qza8"
	specP2WSH      = "lnbc20m1pvjluezhp58yjmdan79s6qqdhdzgynm4zwqd5d7xmw5fk98klysy043l2ahrqspp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqfp4qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q28j0v3rwgy9pvjnd48ee2pl8xrpxysd5g44td63g6xcjcu003j3qe8878hluqlvl3km8rm92f5stamd3jw763n3hck0ct7p8wwj463cql26ava"
	specPico       = "lnbc9678785340p1pwmna7lpp5gc3xfm08u9qy06djf8dfflhugl6p7lgza6dsjxq454gxhj9t7a0sd8dgfkx7cmtwd68yetpd5s9xar0wfjn5gpc8qhrsdfq24f5ggrxdaezqsnvda3kkum5wfjkzmfqf3jkgem9wgsyuctwdus9xgrcyqcjcgpzgfskx6eqf9hzqnteypzxz7fzypfhg6trddjhygrcyqezcgpzfysywmm5ypxxjemgw3hxjmn8yptk7untd9hxwg3q2d6xjcmtv4ezq7pqxgsxzmnyyqcjqmt0wfjjq6t5v4khxxqyjw5qcqp2rzjq0gxwkzc8w6323m55m4jyxcjwmy7stt9hwkwe2qxmy8zpsgg7jcuwz87fcqqeuqqqyqqqqlgqqqqn3qq9qn07ytgrxxzad9hc4xt3mawjjt8znfv8xzscs7007v9gh9j569lencxa8xeujzkxs0uamak9aln6ez02uunw6rd2ht2sqe4hz8thcdagpleym0j"
	specBeans      = "lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqpqsq67gye39hfg3zd8rgc80k32tvy9xk2xunwm5lzexnvpx6fd77en8qaq424dxgt56cag2dpt359k3ssyhetktkpqh24jqnjyw6uqd08sgptq44qu"
	specBeansUpper = "LNBC25M1PVJLUEZPP5QQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQQQSYQCYQ5RQWZQFQYPQDQ5VDHKVEN9V5SXYETPDEESSP5ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYG3ZYGS9Q5SQQQQQQQQQQQQQQQPQSQ67GYE39HFG3ZD8RGC80K32TVY9XK2XUNWM5LZEXNVPX6FD77EN8QAQ424DXGT56CAG2DPT359K3SSYHETKTKPQH24JQNJYW6UQD08SGPTQ44QU"
	specBeansSkip  = "lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q5sqqqqqqqqqqqqqqqpqsq2qrqqqfppnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqppnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqpp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqhpnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqhp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqspnqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqsp4qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnp5qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnpkqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq2jxxfsnucm4jf4zwtznpaxphce606fvhvje5x7d4gw7n73994hgs7nteqvenq8a4ml8aqtchv5d9pf7l558889hp4yyrqv6a7zpq9fgpskqhza"
)

func TestSpecValidInvoicesDecodeAndVerify(t *testing.T) {
	cakeHash := sha256.Sum256([]byte(specCakeList))
	beansSecret := bytes.Repeat([]byte{0x11}, 32)
	type want struct {
		network     Network
		amountMsat  int64
		timestamp   int64
		hash        string
		description string
		descHash    []byte
		expiry      int64
		cltv        int64
		secret      []byte
		features    []int
	}
	coffee := want{Mainnet, 250_000_000, specTimestamp, specHash, "1 cup coffee", nil, 60, 18, nil, nil}
	hashed := want{Mainnet, 2_000_000_000, specTimestamp, specHash, "", cakeHash[:], 3600, 18, nil, nil}
	beans := want{Mainnet, 2_500_000_000, specTimestamp, specHash, "coffee beans", nil, 3600, 18, beansSecret, []int{9, 15, 99}}
	testnet := hashed
	testnet.network = Testnet
	nonsense := coffee
	nonsense.description = "ナンセンス 1杯"
	cases := []struct {
		name    string
		invoice string
		want    want
	}{
		{"donation of any amount", specDonation, want{Mainnet, 0, specTimestamp, specHash, "Please consider supporting this project", nil, 3600, 18, nil, nil}},
		{"cup of coffee within one minute", specCoffee, coffee},
		{"UTF-8 description", specNonsense, nonsense},
		{"hashed description", specHashed, hashed},
		{"testnet with P2PKH fallback", specTestnet, testnet},
		{"fallback and routing hints", specRouted, hashed},
		{"P2SH fallback", specP2SH, hashed},
		{"P2WPKH fallback", specP2WPKH, hashed},
		{"P2WSH fallback", specP2WSH, hashed},
		{"pico-BTC amount", specPico, want{Mainnet, 967_878_534, 1572468703, "462264ede7e14047e9b249da94fefc47f41f7d02ee9b091815a5506bc8abf75f",
			`Blockstream Store: 88.85 USD for Blockstream Ledger Nano S x 1, "Back In My Day" Sticker x 2, "I Got Lightning Working" Sticker x 2 and 1 more items`,
			nil, 604800, 10, nil, nil}},
		{"payment secret and features 9, 15, 99", specBeans, beans},
		{"all upper case", specBeansUpper, beans},
		{"fields that must be skipped", specBeansSkip, beans},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeInvoice(c.invoice)
			if err != nil {
				t.Fatalf("DecodeInvoice: %v", err)
			}
			if got := hex.EncodeToString(d.PayeePubKey); got != specPayeeHex {
				t.Errorf("payee %s, want %s", got, specPayeeHex)
			}
			w := c.want
			if d.Network != w.network || d.AmountMsat != w.amountMsat || d.TimestampSec != w.timestamp {
				t.Errorf("network/amount/timestamp = %s/%d/%d, want %s/%d/%d", d.Network, d.AmountMsat, d.TimestampSec, w.network, w.amountMsat, w.timestamp)
			}
			if got := hex.EncodeToString(d.PaymentHash[:]); got != w.hash {
				t.Errorf("payment hash %s, want %s", got, w.hash)
			}
			if d.Description != w.description || !bytes.Equal(d.DescriptionHash, w.descHash) {
				t.Errorf("description %q / hash %x, want %q / %x", d.Description, d.DescriptionHash, w.description, w.descHash)
			}
			if d.ExpirySeconds != w.expiry || d.MinFinalCLTVExpiry != w.cltv {
				t.Errorf("expiry/cltv %d/%d, want %d/%d", d.ExpirySeconds, d.MinFinalCLTVExpiry, w.expiry, w.cltv)
			}
			if !bytes.Equal(d.PaymentSecret, w.secret) || !slices.Equal(d.Features, w.features) {
				t.Errorf("secret %x features %v, want %x %v", d.PaymentSecret, d.Features, w.secret, w.features)
			}
		})
	}
}

func TestSpecInvalidInvoicesAreRefused(t *testing.T) {
	cases := []struct {
		name, invoice, reason string
	}{
		{"unknown even feature 100", "lnbc25m1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5vdhkven9v5sxyetpdeessp5zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zyg3zygs9q4psqqqqqqqqqqqqqqqpqsqq40wa3khl49yue3zsgm26jrepqr2eghqlx86rttutve3ugd05em86nsefzh4pfurpd9ek9w2vp95zxqnfe2u7ckudyahsa52q66tgzcp6t2dyk", "unknown feature bit 100"},
		{"bech32 checksum is invalid", "lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrnt", "checksum"},
		{"malformed bech32 string (no 1)", "pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny", "separator"},
		{"malformed bech32 string (mixed case)", "LNBC2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpquwpc4curk03c9wlrswe78q4eyqc7d8d0xqzpuyk0sg5g70me25alkluzd2x62aysf2pyy8edtjeevuv4p2d5p76r4zkmneet7uvyakky2zr4cusd45tftc9c5fh0nnqpnl2jfll544esqchsrny", "mixes upper and lower case"},
		{"signature is not recoverable", "lnbc2500u1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpuaxtrnwngzn3kdzw5hydlzf03qdgm2hdq27cqv3agm2awhz5se903vruatfhq77w3ls4evs3ch9zw97j25emudupq63nyw24cg27h2rspk28uwq", "signature"},
		{"string is too short", "lnbc1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdpl2pkx2ctnv5sxxmmwwd5kgetjypeh2ursdae8g6na6hlh", "too short"},
		{"invalid multiplier", "lnbc2500x1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpujr6jxr9gq9pv6g46y7d20jfkegkg4gljz2ea2a3m9lmvvr95tq2s0kvu70u3axgelz3kyvtp2ywwt0y8hkx2869zq5dll9nelr83zzqqpgl2zg", "multiplier"},
		{"invalid sub-millisatoshi precision", "lnbc2500000001p1pvjluezpp5qqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqqqsyqcyq5rqwzqfqypqdq5xysxxatsyp3k7enxv4jsxqzpu7hqtk93pkf7sw55rdv4k9z2vj050rxdr6za9ekfs3nlt5lr89jqpdmxsmlj9urqumg0h9wzpqecw7th56tdms40p2ny9q4ddvjsedzcplva53s", "whole number of millisatoshis"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeInvoice(c.invoice)
			if err == nil {
				t.Fatal("decoded; want a refusal")
			}
			if !IsValidation(err) || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q (validation=%v), want a validation error mentioning %q", err, IsValidation(err), c.reason)
			}
		})
	}
}

// reencode rebuilds an invoice from its HRP and data words with a fresh,
// valid checksum, so that only the signature can catch a change.
func reencode(t *testing.T, hrp string, words []byte) string {
	t.Helper()
	s, err := bech32.Encode(hrp, words)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpecTamperedInvoiceFailsSignatureCheck(t *testing.T) {
	hrp, words, err := bech32.DecodeNoLimit(specCoffee)
	if err != nil {
		t.Fatal(err)
	}
	// Flip one bit of the description ("1 cup coffee" -> other text) and
	// keep the checksum valid: recovery now yields some other key, so the
	// invoice no longer verifies as the spec node's.
	descAt := bytes.Index(words, []byte{tagDescription, 0, 20}) + 3
	tampered := bytes.Clone(words)
	tampered[descAt] ^= 1
	d, err := DecodeInvoice(reencode(t, hrp, tampered))
	if err == nil && hex.EncodeToString(d.PayeePubKey) == specPayeeHex {
		t.Fatal("tampered invoice still verifies as signed by the spec node")
	}

	// Raising the amount in the HRP is covered by the signature too.
	d, err = DecodeInvoice(reencode(t, "lnbc2501u", words))
	if err == nil && hex.EncodeToString(d.PayeePubKey) == specPayeeHex {
		t.Fatal("invoice with a changed amount still verifies as signed by the spec node")
	}
}

func TestInvoiceWithPayeeFieldIsCheckedAgainstIt(t *testing.T) {
	key := mustHex(t, specKeyHex)
	inv := testInvoiceFields(Testnet)
	good, err := EncodeInvoice(inv, key)
	if err != nil {
		t.Fatal(err)
	}
	withPayee := func(payee []byte) string {
		hrp, words, err := bech32.DecodeNoLimit(good)
		if err != nil {
			t.Fatal(err)
		}
		body := appendField(bytes.Clone(words[:len(words)-signatureWords]), tagPayeePubKey, bytesToWords(payee))
		pk, _ := parseNodeKey(key)
		return signWords(t, hrp, body, pk)
	}

	d, err := DecodeInvoice(withPayee(mustHex(t, specPayeeHex)))
	if err != nil || hex.EncodeToString(d.PayeePubKey) != specPayeeHex {
		t.Fatalf("invoice with its own n field: %v, payee %x", err, d.PayeePubKey)
	}
	other, _ := parseNodeKey(otherKey(t))
	_, err = DecodeInvoice(withPayee(other.PubKey().SerializeCompressed()))
	if err == nil || !strings.Contains(err.Error(), "payee node key") {
		t.Fatalf("invoice whose n field names another node: err %v, want a signature mismatch", err)
	}
}

func TestUnknownEvenFeatureIsRefusedOddIsIgnored(t *testing.T) {
	key, _ := parseNodeKey(mustHex(t, specKeyHex))
	for _, c := range []struct {
		bit int
		ok  bool
	}{{101, true}, {100, false}, {16, true}, {17, true}, {20, false}} {
		hrp, words, _ := bech32.DecodeNoLimit(mustEncode(t, testInvoiceFields(Testnet)))
		body := appendField(bytes.Clone(words[:len(words)-signatureWords]), tagFeatures, featureWords(c.bit))
		_, err := DecodeInvoice(signWords(t, hrp, body, key))
		if (err == nil) != c.ok {
			t.Errorf("feature bit %d: err %v, want ok=%v", c.bit, err, c.ok)
		}
	}
}

func TestDecodeRefusesABech32mInvoice(t *testing.T) {
	hrp, words, _ := bech32.DecodeNoLimit(specCoffee)
	m, _ := bech32.EncodeM(hrp, words)
	if _, err := DecodeInvoice(m); err == nil || !strings.Contains(err.Error(), "bech32m") {
		t.Fatalf("err %v, want bech32m refusal", err)
	}
}

func TestDecodeRefusesMissingPaymentHash(t *testing.T) {
	key, _ := parseNodeKey(mustHex(t, specKeyHex))
	body := uintWords(specTimestamp, timestampWords)
	body = appendField(body, tagDescription, bytesToWords([]byte("x")))
	_, err := DecodeInvoice(signWords(t, "lntb", body, key))
	if err == nil || !strings.Contains(err.Error(), "no payment hash") {
		t.Fatalf("err %v, want missing payment hash", err)
	}
}
