package rail

// Paths name the ways money moves; the strings are the SPEC's wire values.
const (
	PathSpark     = "spark"     // Spark transfer to or from a Spark address
	PathLightning = "lightning" // Lightning payment of a BOLT11 invoice
	PathL1        = "l1"        // on-chain Bitcoin; a deposit path only
)

// Rail is the payment rail as the node sees it.
//
// Every method must be safe for concurrent use.
//
// Pure methods: ParseDestination, QuoteFee, DepositFees and AccountAddress
// depend only on their arguments and on how the rail was constructed (its
// network and schedule). They read no clock, draw no randomness, do no I/O,
// and give the same answer on every node, so a follower may call them while
// validating a request and the result may be carried in a command.
//
// CreateInvoice and Pay touch the outside world (a Lightning node, a Spark
// wallet, or the simulation's randomness), and what they return enters the
// state only as a proposed command. Pay is leader-only; CreateInvoice may run
// on any node, since every member shares the node key and the replicated
// invoice record, not the issuing node, decides whether a payment credits.
//
// No method changes the ledger or reads replicated state: the rail reports
// facts, the state machine decides what they do to balances.
type Rail interface {
	// CreateInvoice issues a BOLT11 deposit invoice for an account. It draws
	// the payment preimage and secret itself; the caller records the
	// returned PaymentRef (the hex payment hash) in the replicated state
	// with the account, which is what a later settlement is matched against.
	// It returns a *ValidationError for a request the rail refuses (negative
	// amount, expiry out of range, memo too long or not UTF-8).
	// Any node may call it (the cluster shares one node key). Not idempotent:
	// each call yields a new invoice.
	CreateInvoice(req InvoiceRequest) (Invoice, error)

	// ParseDestination validates a withdrawal destination: a BOLT11 payment
	// request (checksum and signature verified) or a Spark address, of this
	// rail's network. Anything else is a *ValidationError whose message can
	// be shown to the client as is. It does not check expiry, since that
	// needs a clock: use Destination.Expired with the entry's time.
	// Pure.
	ParseDestination(dest string) (Destination, error)

	// QuoteFee is the withdrawal fee for amountMsat over path, in msat,
	// rounded up (in the venue's favour). It is never negative; a path that
	// is not a withdrawal path quotes 0, since ParseDestination already
	// refused it.
	// Pure.
	QuoteFee(path string, amountMsat int64) (feeMsat int64)

	// DepositFees is the Account.depositFees array of SPEC section 2, one
	// entry per deposit path. The caller owns the returned slice.
	// Pure.
	DepositFees() []DepositFee

	// Pay sends a payout. Leader only. It may block on the outside world.
	// It must be idempotent by RailRef: the leader retries after a
	// leadership change or a crash, and a second call with the same RailRef
	// must report the first call's outcome, never pay twice. Status
	// "pending" means the outcome is not known yet and the caller asks
	// again later with the same Payout. Pay never returns an error: a payout
	// that cannot be made is "returned" with a Reason for the client.
	Pay(p Payout) PayoutResult

	// AccountAddress is the account's railAddress: a Spark address of this
	// rail's network derived from seed, which the proposing node drew (see
	// DrawSeed) and carried in the signup command.
	// Pure.
	AccountAddress(seed []byte) string
}

// Simulator is implemented by rails that can pretend an invoice was paid:
// the operator's `perpd admin rail pay-invoice INVOICE [AMOUNT]` drives a
// deposit through it on a deployment with no real rail. Leader only.
type Simulator interface {
	// SimulatePayment validates paymentRequest as an unexpired invoice that
	// this rail issued and returns the settlement facts. amountMsat is the
	// amount paid: required (> 0) for an amountless invoice, and either 0
	// or exactly the invoice amount otherwise. Refusals are
	// *ValidationError values wrapping ErrWrongNetwork, ErrUnknownInvoice,
	// ErrInvoiceExpired, ErrAmountRequired or ErrAmountMismatch. Whether
	// the invoice was already settled is for the state machine to decide.
	SimulatePayment(paymentRequest string, amountMsat, nowMs int64) (Settlement, error)
}

// InvoiceRequest asks for a deposit invoice.
type InvoiceRequest struct {
	AccountID     string
	AmountMsat    int64  // 0 = any amount (the payer chooses)
	ExpirySeconds int64  // 0 = DefaultInvoiceExpirySeconds
	Memo          string // BOLT11 description; "" = DefaultInvoiceMemo
	NowMs         int64  // the leader's clock; the invoice timestamp
}

// Invoice is an issued deposit invoice.
type Invoice struct {
	PaymentRequest string // BOLT11, lowercase
	PaymentRef     string // hex of the 32-byte payment hash
	// ExpiresAtMs is the invoice's own expiry, (timestamp + expiry) seconds
	// in ms, which is what every wallet computes from the invoice.
	ExpiresAtMs int64
}

// Destination is a validated withdrawal destination.
type Destination struct {
	Path string // PathLightning or PathSpark
	// Normalized is the canonical spelling: lowercase, no "lightning:"
	// prefix, and a Spark address re-encoded with the network's current
	// prefix. Two spellings of one destination normalize equal, which is
	// what first-seen detection compares.
	Normalized string
	AmountMsat int64  // the invoice's amount; 0 for none or for Spark
	PaymentRef string // invoice payment hash (hex); "" for Spark
	// ExpiresAtMs is the invoice's expiry; 0 for Spark (never expires).
	ExpiresAtMs int64
}

// Expired reports whether an invoice destination has expired at nowMs (the
// entry's time). An invoice is expired from its expiry instant on.
func (d Destination) Expired(nowMs int64) bool {
	return d.ExpiresAtMs != 0 && nowMs >= d.ExpiresAtMs
}

// DepositFee is one element of Account.depositFees.
type DepositFee struct {
	Path                   string // PathSpark, PathL1 or PathLightning
	Description            string
	RecommendedMinimumSats *int64 // nil when the path has no minimum
}

// Payout is a withdrawal the leader asks the rail to send.
type Payout struct {
	RailRef     string // idempotency key of the payout, unique per withdrawal
	Path        string // PathSpark or PathLightning
	Destination string // Destination.Normalized
	AmountMsat  int64  // what the recipient gets; the fee is not included
}

// Payout statuses; "paid" and "returned" are final and are the withdrawal
// states of the same name.
const (
	PayoutPaid     = "paid"
	PayoutReturned = "returned"
	PayoutPending  = "pending"
)

// PayoutResult is the outcome of Pay.
type PayoutResult struct {
	Status string // PayoutPaid, PayoutReturned or PayoutPending
	Reason string // why it was returned or is pending; "" when paid
}

// Settlement is what a paid invoice tells the state machine.
type Settlement struct {
	PaymentRef string // hex payment hash: the key of the issued invoice
	AmountMsat int64  // amount paid
	FeeMsat    int64  // deposit fee kept by the venue; credit is AmountMsat-FeeMsat
	// AccountID is the account the invoice was issued to when this node still
	// remembers it, else "": the replicated record of the invoice, looked up
	// by PaymentRef, is authoritative either way.
	AccountID string
	// SettledAtMs is when the rail saw the payment, by the clock it was
	// given (SimulatePayment's nowMs): the invoice's expiry is judged at
	// this instant, not when the deposit entry is applied. The state
	// machine requires it to lie between the invoice's recording and the
	// entry, in log time, so whoever proposes a settlement expresses it on
	// the log's clock (node.SettleInvoice passes the leader's ClockMs), not
	// on a wall clock that may be hours off log time.
	SettledAtMs int64
}
