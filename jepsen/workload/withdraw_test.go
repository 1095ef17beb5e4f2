package workload

import (
	"testing"
	"time"

	"github.com/perpd/perpd/node/rail"
)

// The invoices a Lightning withdrawal goes to are what the venue takes: a
// Lightning destination on its network with the amount asked for, valid
// for a day, each with its own payment hash, and not signed by the
// venue's node key.
func TestPayeeSignsFreshInvoicesTheVenueTakes(t *testing.T) {
	venueKey, err := rail.NewNodeKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	venue, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: venueKey, Book: rail.NewSimBook()})
	if err != nil {
		t.Fatal(err)
	}
	payee, err := NewPayee(venue.AccountAddress(make([]byte, rail.SeedBytes)), 33)
	if err != nil {
		t.Fatal(err)
	}
	if payee.Network != rail.Testnet {
		t.Fatalf("payee on %s, the venue serves testnet", payee.Network)
	}
	now := time.Unix(1_795_000_000, 0)
	const amount = 12_345_678 // msat: not whole sats
	refs := map[string]bool{}
	for range 3 {
		inv, err := payee.Invoice(amount, now)
		if err != nil {
			t.Fatal(err)
		}
		d, err := venue.ParseDestination(inv)
		if err != nil {
			t.Fatalf("the venue refuses %s: %v", inv, err)
		}
		if d.Path != rail.PathLightning || d.AmountMsat != amount || d.ExpiresAtMs != now.UnixMilli()+InvoiceExpirySeconds*1000 {
			t.Fatalf("destination %+v", d)
		}
		if refs[d.PaymentRef] {
			t.Fatalf("payment hash %s drawn twice", d.PaymentRef)
		}
		refs[d.PaymentRef] = true
		dec, err := rail.DecodeInvoice(inv)
		if err != nil {
			t.Fatal(err)
		}
		if string(dec.PayeePubKey) == string(venue.NodePubKey()) {
			t.Fatal("the invoice is signed by the venue's node key")
		}
	}
}
