package rail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"
)

// Bounds of the simulated rail's memory.
const (
	// MaxIssuedInvoices is how many issued invoices SimRail remembers (to
	// name the account in a Settlement); the oldest is forgotten first.
	MaxIssuedInvoices = 10_000
	// MaxRememberedPayouts is how many payout outcomes a SimBook remembers
	// to answer a retried Pay with the same RailRef; the oldest is forgotten
	// first. Simulated payouts are final at once, so a retry comes only
	// while the answer is being proposed (seconds around a leadership
	// change), far inside this window.
	MaxRememberedPayouts = 10_000
)

// ReasonUnknownPayoutInvoice is the reason every Lightning payout is
// returned with on the simulated rail: on testnet "a Lightning payout is not
// exercisable: every payment request fails as an unknown payout invoice"
// (SPEC section 7).
const ReasonUnknownPayoutInvoice = "unknown payout invoice"

// SimConfig configures a SimRail.
type SimConfig struct {
	Network Network   // whose invoices and Spark addresses are valid
	NodeKey []byte    // 32-byte Lightning node private key; see NewNodeKey
	Rand    io.Reader // source of preimages and secrets; nil = crypto/rand
	// Book is the simulated network's payout record; nil = the one this
	// process keeps for the rail's network and node key, shared by every
	// SimRail of the same cluster.
	Book *SimBook
}

// SimRail is the simulated rail of the testnet and local deployments. Its
// invoices are real BOLT11 invoices signed by the node key, which any wallet
// decodes, but no Lightning node stands behind them: they are settled only
// through SimulatePayment. Spark payouts succeed at once and Lightning
// payouts are all returned. It moves no real money on any network.
type SimRail struct {
	network Network
	key     *btcec.PrivateKey
	pubKey  []byte // compressed node public key

	mu     sync.Mutex // guards rand and issued
	rand   io.Reader
	issued *fifoCache[issuedInvoice]
	book   *SimBook
}

type issuedInvoice struct {
	accountID string
}

var (
	_ Rail      = (*SimRail)(nil)
	_ Simulator = (*SimRail)(nil)
)

// NewSimRail builds a simulated rail.
func NewSimRail(cfg SimConfig) (*SimRail, error) {
	if _, err := cfg.Network.params(); err != nil {
		return nil, err
	}
	key, err := parseNodeKey(cfg.NodeKey)
	if err != nil {
		return nil, err
	}
	pub := key.PubKey().SerializeCompressed()
	book := cfg.Book
	if book == nil {
		book = sharedSimBook(cfg.Network, pub)
	}
	return &SimRail{
		network: cfg.Network,
		key:     key,
		pubKey:  pub,
		rand:    orCryptoRand(cfg.Rand),
		issued:  newFIFOCache[issuedInvoice](MaxIssuedInvoices),
		book:    book,
	}, nil
}

// Network is the network the rail serves.
func (r *SimRail) Network() Network { return r.network }

// NodePubKey is the compressed public key that signs the rail's invoices:
// the payee node a wallet shows.
func (r *SimRail) NodePubKey() []byte { return bytes.Clone(r.pubKey) }

// CreateInvoice implements Rail. The invoice's timestamp is NowMs rounded
// down to the second, so ExpiresAtMs is up to 999 ms earlier than
// NowMs + ExpirySeconds*1000: it is the instant every wallet computes.
func (r *SimRail) CreateInvoice(req InvoiceRequest) (Invoice, error) {
	expiry := req.ExpirySeconds
	if expiry == 0 {
		expiry = DefaultInvoiceExpirySeconds
	}
	memo := req.Memo
	if memo == "" {
		memo = DefaultInvoiceMemo
	}
	if req.AmountMsat < 0 {
		return Invoice{}, invalid(nil, "amountMsat must not be negative")
	}
	if expiry < 0 || expiry > MaxInvoiceExpirySeconds {
		return Invoice{}, invalid(nil, "expirySeconds must be an integer greater than 0, at most %d", int64(MaxInvoiceExpirySeconds))
	}
	if req.NowMs < 0 {
		return Invoice{}, fmt.Errorf("rail: negative clock %d", req.NowMs)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var preimage, secret [secretBytes]byte
	if _, err := io.ReadFull(r.rand, preimage[:]); err != nil {
		return Invoice{}, fmt.Errorf("rail: draw preimage: %w", err)
	}
	if _, err := io.ReadFull(r.rand, secret[:]); err != nil {
		return Invoice{}, fmt.Errorf("rail: draw payment secret: %w", err)
	}
	// No Lightning node will ever settle an HTLC for this invoice, so the
	// preimage is not kept: only its hash matters, as the payment ref.
	f := InvoiceFields{
		Network:            r.network,
		AmountMsat:         req.AmountMsat,
		TimestampSec:       req.NowMs / 1000,
		PaymentHash:        sha256.Sum256(preimage[:]),
		PaymentSecret:      secret,
		Description:        memo,
		ExpirySeconds:      expiry,
		MinFinalCLTVExpiry: DefaultMinFinalCLTVExpiry,
	}
	pr, err := encodeInvoice(f, r.key)
	if err != nil {
		return Invoice{}, err
	}
	ref := hex.EncodeToString(f.PaymentHash[:])
	r.issued.put(ref, issuedInvoice{accountID: req.AccountID})
	return Invoice{
		PaymentRequest: pr,
		PaymentRef:     ref,
		ExpiresAtMs:    (f.TimestampSec + f.ExpirySeconds) * 1000, // < 2^63: both bounded
	}, nil
}

// ParseDestination implements Rail.
func (r *SimRail) ParseDestination(dest string) (Destination, error) {
	return parseDestination(r.network, dest)
}

// QuoteFee implements Rail with the schedule of fees.go.
func (r *SimRail) QuoteFee(path string, amountMsat int64) int64 {
	return quoteFee(path, amountMsat)
}

// DepositFees implements Rail with the schedule of fees.go.
func (r *SimRail) DepositFees() []DepositFee { return depositFees() }

// AccountAddress implements Rail.
func (r *SimRail) AccountAddress(seed []byte) string {
	return accountAddress(r.network, seed)
}

// Pay implements Rail: a valid Spark payout is paid at once, every
// Lightning payout is returned as an unknown payout invoice. Outcomes are
// kept by RailRef in the rail's SimBook, so a retry from any node sharing
// it (a new leader) reports the first outcome and pays nothing again.
func (r *SimRail) Pay(p Payout) PayoutResult {
	if p.RailRef == "" {
		return PayoutResult{Status: PayoutReturned, Reason: "payout has no railRef"}
	}
	return r.book.pay(p, r.simulatePayout)
}

// Book is the simulated network's payout record this rail pays through.
func (r *SimRail) Book() *SimBook { return r.book }

func (r *SimRail) simulatePayout(p Payout) PayoutResult {
	returned := func(reason string) PayoutResult {
		return PayoutResult{Status: PayoutReturned, Reason: reason}
	}
	switch p.Path {
	case PathLightning:
		return returned(ReasonUnknownPayoutInvoice)
	case PathSpark:
		if p.AmountMsat <= 0 {
			return returned("payout amount must be positive")
		}
		if p.AmountMsat%1000 != 0 {
			return returned("Spark transfers move whole sats: the amount is not a multiple of 1000 msat")
		}
		if _, err := parseSparkDestination(r.network, p.Destination); err != nil {
			return returned(err.Error())
		}
		return PayoutResult{Status: PayoutPaid}
	default:
		return returned(fmt.Sprintf("unknown payout path %q", p.Path))
	}
}

// SimulatePayment implements Simulator. An invoice is this rail's when its
// signature is by the node key; it need not still be in the in-memory
// cache, which only supplies Settlement.AccountID.
func (r *SimRail) SimulatePayment(paymentRequest string, amountMsat, nowMs int64) (Settlement, error) {
	s := strings.TrimSpace(paymentRequest)
	if len(s) >= len("lightning:") && strings.EqualFold(s[:len("lightning:")], "lightning:") {
		s = s[len("lightning:"):]
	}
	inv, err := DecodeInvoice(s)
	if err != nil {
		return Settlement{}, err
	}
	if inv.Network != r.network {
		return Settlement{}, invalid(ErrWrongNetwork, "this is a %s invoice; this rail issues %s invoices (%s...)", inv.Network, r.network, r.network.InvoicePrefix())
	}
	if !bytes.Equal(inv.PayeePubKey, r.pubKey) {
		return Settlement{}, invalid(ErrUnknownInvoice, "unknown invoice: it was not issued by this venue (payee %x)", inv.PayeePubKey)
	}
	if nowMs >= inv.ExpiresAtMs() {
		return Settlement{}, invalid(ErrInvoiceExpired, "invoice expired at %d ms", inv.ExpiresAtMs())
	}
	paid, err := settledAmount(inv.AmountMsat, amountMsat)
	if err != nil {
		return Settlement{}, err
	}
	ref := hex.EncodeToString(inv.PaymentHash[:])
	r.mu.Lock()
	issued, _ := r.issued.get(ref)
	r.mu.Unlock()
	return Settlement{
		PaymentRef:  ref,
		AmountMsat:  paid,
		FeeMsat:     LightningDepositFeeMsat,
		AccountID:   issued.accountID,
		SettledAtMs: nowMs,
	}, nil
}

// settledAmount is what a payment of amountMsat (0 = "the invoice's
// amount") against an invoice of invoiceMsat (0 = any) pays.
func settledAmount(invoiceMsat, amountMsat int64) (int64, error) {
	switch {
	case amountMsat < 0 || amountMsat > MaxInvoiceAmountMsat:
		return 0, invalid(nil, "amount must be between 1 and %d msat", MaxInvoiceAmountMsat)
	case invoiceMsat == 0 && amountMsat == 0:
		return 0, invalid(ErrAmountRequired, "the invoice has no amount: give the amount to pay")
	case invoiceMsat == 0:
		return amountMsat, nil
	case amountMsat != 0 && amountMsat != invoiceMsat:
		return 0, invalid(ErrAmountMismatch, "amount %d msat does not match the invoice's %d msat", amountMsat, invoiceMsat)
	default:
		return invoiceMsat, nil
	}
}
