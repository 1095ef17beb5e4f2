package ledger

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Well-known venue accounts. Trader accounts are built with Free, Reserved
// and Margin.
const (
	House              = "venue:house"               // counterparty of every fill; may go negative
	FeeRevenue         = "venue:fees"                // taker and rail fees
	Insurance          = "venue:insurance"           // liquidation penalties, deficit cover
	PendingWithdrawals = "venue:withdrawals_pending" // debited from traders, not yet paid out
	Faucet             = "venue:faucet"              // testnet faucet float (credited as a deposit)
)

// Free is a trader's spendable balance.
func Free(accountID string) string { return "acct:" + accountID + ":free" }

// Reserved holds a trader's margin and fees set aside for resting orders.
func Reserved(accountID string) string { return "acct:" + accountID + ":reserved" }

// Margin holds a trader's position margin in one market.
func Margin(accountID, marketID string) string {
	return "acct:" + accountID + ":margin:" + marketID
}

// Errors returned by the ledger. Callers check balances before moving money,
// so seeing one of these inside apply means a bug; they are still refusals,
// never panics.
var (
	ErrNonPositive  = errors.New("ledger: amount must be positive")
	ErrInsufficient = errors.New("ledger: insufficient balance")
	ErrOverflow     = errors.New("ledger: overflow")
	ErrSameAccount  = errors.New("ledger: transfer to the same account")
)

// Ledger is the set of balances plus the external flow counters.
type Ledger struct {
	Balances map[string]int64 `cbor:"1,keyasint"`
	// CreditedMsat is all money that ever entered (deposits settled).
	CreditedMsat int64 `cbor:"2,keyasint"`
	// PaidMsat is all money that ever left (withdrawals paid).
	PaidMsat int64 `cbor:"3,keyasint"`
}

// New returns an empty ledger.
func New() *Ledger { return &Ledger{Balances: map[string]int64{}} }

// mayGoNegative names the accounts allowed a negative balance: the house
// book pays traders' gains before it earns them back.
func mayGoNegative(account string) bool { return account == House }

// Balance returns an account's balance (0 when it has never been used).
func (l *Ledger) Balance(account string) int64 { return l.Balances[account] }

// Transfer moves msat from one account to another.
func (l *Ledger) Transfer(from, to string, msat int64) error {
	if msat <= 0 {
		return ErrNonPositive
	}
	if from == to {
		return ErrSameAccount
	}
	fb, tb := l.Balances[from], l.Balances[to]
	if fb < msat && !mayGoNegative(from) {
		return fmt.Errorf("%w: %s has %d, needs %d", ErrInsufficient, from, fb, msat)
	}
	if fb < math.MinInt64+msat || tb > math.MaxInt64-msat {
		return ErrOverflow
	}
	l.set(from, fb-msat)
	l.set(to, tb+msat)
	return nil
}

// Credit brings msat into the venue (a settled deposit) into account to.
func (l *Ledger) Credit(to string, msat int64) error {
	if err := l.CanCredit(to, msat); err != nil {
		return err
	}
	l.set(to, l.Balances[to]+msat)
	l.CreditedMsat += msat
	return nil
}

// CanCredit reports whether Credit(to, msat) would succeed, changing
// nothing.
func (l *Ledger) CanCredit(to string, msat int64) error {
	if msat <= 0 {
		return ErrNonPositive
	}
	if l.Balances[to] > math.MaxInt64-msat || l.CreditedMsat > math.MaxInt64-msat {
		return ErrOverflow
	}
	return nil
}

// Debit takes msat out of the venue (a paid withdrawal) from account from.
func (l *Ledger) Debit(from string, msat int64) error {
	if msat <= 0 {
		return ErrNonPositive
	}
	fb := l.Balances[from]
	if fb < msat {
		return fmt.Errorf("%w: %s has %d, needs %d", ErrInsufficient, from, fb, msat)
	}
	if l.PaidMsat > math.MaxInt64-msat {
		return ErrOverflow
	}
	l.set(from, fb-msat)
	l.PaidMsat += msat
	return nil
}

// set stores a balance, dropping zero entries so that the state (and its
// hash) does not depend on which accounts were ever touched.
func (l *Ledger) set(account string, v int64) {
	if v == 0 {
		delete(l.Balances, account)
		return
	}
	l.Balances[account] = v
}

// Check verifies conservation (sum of balances == credited - paid) and that
// no account other than the house is negative. It walks every account, so
// tests and the simulation call it after every entry; production calls it
// on snapshots.
func (l *Ledger) Check() error {
	var sum int64
	for _, k := range l.Accounts() {
		v := l.Balances[k]
		if v < 0 && !mayGoNegative(k) {
			return fmt.Errorf("ledger: %s is negative (%d)", k, v)
		}
		if (v > 0 && sum > math.MaxInt64-v) || (v < 0 && sum < math.MinInt64-v) {
			return ErrOverflow
		}
		sum += v
	}
	if want := l.CreditedMsat - l.PaidMsat; sum != want {
		return fmt.Errorf("ledger: conservation broken: sum of balances %d != credited %d - paid %d", sum, l.CreditedMsat, l.PaidMsat)
	}
	return nil
}

// Accounts returns every account with a non-zero balance, sorted.
func (l *Ledger) Accounts() []string {
	keys := make([]string, 0, len(l.Balances))
	for k := range l.Balances {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SumPrefix adds the balances of every account whose name starts with prefix.
func (l *Ledger) SumPrefix(prefix string) int64 {
	var sum int64
	for k, v := range l.Balances {
		if strings.HasPrefix(k, prefix) {
			sum += v
		}
	}
	return sum
}
