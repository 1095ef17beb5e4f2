package tokenrail

import (
	"context"
	"testing"
)

func TestSimAddressesAreStablePerAccountAndDistinct(t *testing.T) {
	s, other := NewSim(), NewSim()
	a1, _ := s.DepositAddress(context.Background(), "acc_1")
	a1b, _ := other.DepositAddress(context.Background(), "acc_1")
	a2, _ := s.DepositAddress(context.Background(), "acc_2")
	if a1 != a1b {
		t.Fatal("two nodes must allocate the same address for an account")
	}
	if a1.Address == a2.Address || len(a1.Address) != 45 || a1.AccountNumber <= 0 {
		t.Fatalf("%+v %+v", a1, a2)
	}
}

func TestSimTransferIsIdempotentByID(t *testing.T) {
	s, restarted := NewSim(), NewSim()
	r1, _ := s.Transfer(context.Background(), "w1", 5, "sprt1x")
	r2, _ := restarted.Transfer(context.Background(), "w1", 5, "sprt1x")
	r3, _ := s.Transfer(context.Background(), "w2", 5, "sprt1x")
	if r1 != r2 || r1 == r3 {
		t.Fatalf("%s %s %s", r1, r2, r3)
	}
}
