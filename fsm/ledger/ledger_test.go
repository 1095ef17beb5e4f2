package ledger

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestTransferMovesExactlyAndConserves(t *testing.T) {
	l := New()
	if err := l.Credit(Free("a"), 1000); err != nil {
		t.Fatal(err)
	}
	if err := l.Transfer(Free("a"), Reserved("a"), 400); err != nil {
		t.Fatal(err)
	}
	if l.Balance(Free("a")) != 600 || l.Balance(Reserved("a")) != 400 {
		t.Fatalf("balances %v", l.Balances)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRefusalsChangeNothing(t *testing.T) {
	l := New()
	_ = l.Credit(Free("a"), 10)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"zero", l.Transfer(Free("a"), Free("b"), 0), ErrNonPositive},
		{"negative", l.Transfer(Free("a"), Free("b"), -1), ErrNonPositive},
		{"more than held", l.Transfer(Free("a"), Free("b"), 11), ErrInsufficient},
		{"same account", l.Transfer(Free("a"), Free("a"), 1), ErrSameAccount},
		{"debit too much", l.Debit(Free("a"), 11), ErrInsufficient},
		{"credit zero", l.Credit(Free("a"), 0), ErrNonPositive},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v want %v", c.name, c.err, c.want)
		}
	}
	if l.Balance(Free("a")) != 10 || l.Balance(Free("b")) != 0 || l.CreditedMsat != 10 || l.PaidMsat != 0 {
		t.Fatalf("refusal changed state: %+v", l)
	}
}

func TestExactBalanceBoundary(t *testing.T) {
	l := New()
	_ = l.Credit(Free("a"), 5)
	if err := l.Transfer(Free("a"), FeeRevenue, 5); err != nil {
		t.Fatalf("moving the exact balance must succeed: %v", err)
	}
	if _, ok := l.Balances[Free("a")]; ok {
		t.Fatal("zero balances must be dropped from the state")
	}
}

func TestHouseMayGoNegativeOthersMayNot(t *testing.T) {
	l := New()
	if err := l.Transfer(House, Free("a"), 100); err != nil {
		t.Fatalf("house pays before it earns: %v", err)
	}
	if err := l.Transfer(Insurance, Free("a"), 1); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("insurance must not go negative: %v", err)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestOverflowRefused(t *testing.T) {
	l := New()
	_ = l.Credit(Free("a"), math.MaxInt64)
	if err := l.Credit(Free("b"), 1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("credited counter overflow: %v", err)
	}
	if err := l.Transfer(House, Free("a"), 1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("balance overflow: %v", err)
	}
}

func TestCheckDetectsBrokenConservation(t *testing.T) {
	l := New()
	_ = l.Credit(Free("a"), 10)
	l.Balances[Free("a")] = 11 // a bug that mints money
	if l.Check() == nil {
		t.Fatal("check must catch minted money")
	}
	l.Balances[Free("a")] = -1
	l.CreditedMsat = -1
	if l.Check() == nil {
		t.Fatal("check must catch a negative trader balance")
	}
}

// TestConservationProperty drives random credits, transfers and debits
// (including ones that must be refused) and checks the invariant after each.
func TestConservationProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	accounts := []string{Free("a"), Free("b"), Reserved("a"), Margin("b", "BTC-PERP"), House, FeeRevenue, Insurance, PendingWithdrawals}
	l := New()
	for step := 0; step < 20000; step++ {
		amt := r.Int64N(1_000_000) - 1000
		from, to := accounts[r.IntN(len(accounts))], accounts[r.IntN(len(accounts))]
		before := *l
		beforeBal := l.Balance(from)
		var err error
		switch r.IntN(4) {
		case 0:
			err = l.Credit(to, amt)
		case 1:
			err = l.Debit(from, amt)
		default:
			err = l.Transfer(from, to, amt)
		}
		if err != nil && (l.CreditedMsat != before.CreditedMsat || l.PaidMsat != before.PaidMsat || l.Balance(from) != beforeBal) {
			t.Fatalf("step %d: refused operation changed state", step)
		}
		if cerr := l.Check(); cerr != nil {
			t.Fatalf("step %d: %v", step, cerr)
		}
	}
}
