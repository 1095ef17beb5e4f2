package httpapi

import "testing"

// TestIdemKeyCannotEnterTheRedemptionNamespace: a keyed redemption keeps
// its answer under "acct:<account>:usdx-redeem:<key>" (its namespace from
// before optional keys were checked in general), and every other keyed
// route under "acct:<account>:<key>". A client key "usdx-redeem:X" on
// another route was that same stored key: after a redemption keyed X it
// was refused 409 idempotency_key_reused with nothing applied, and sent
// first it took the key a redemption keyed X would then be refused with.
// Such a key is refused 400 validation where it could collide, in both
// orders, and applies nothing; the redemption keyed X works either way.
// Where the key cannot collide (a cancel keeps "cancel:"-prefixed keys, a
// redemption its own) it is taken as any other key.
func TestIdemKeyCannotEnterTheRedemptionNamespace(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgetScale(10)})
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	a.mintUSDx(key, "10")
	holdings := func() (free, usdx, susdx any) {
		m := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t)
		return m["freeMsat"], m["usdx"], m["susdx"]
	}
	redeem := func(idem string) resp {
		return a.do(req{method: "POST", path: "/v1/usdx/redemptions", key: key, idem: idem, body: map[string]any{"usdx": "1"}})
	}

	if r := redeem("X1"); r.status != 201 {
		t.Fatalf("redeem X1: %d %s", r.status, r.body)
	}
	f0, u0, s0 := holdings()

	t.Run("redemption first", func(t *testing.T) {
		wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/stake", key: key, idem: "usdx-redeem:X1", body: map[string]any{"usdx": "1"}}), 400, "validation")
		wantCode(t, a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: "usdx-redeem:X1", body: "{}"}), 400, "validation")
		if f, u, s := holdings(); f != f0 || u != u0 || s != s0 {
			t.Fatalf("a refused request changed the account: %v %v %v, was %v %v %v", f, u, s, f0, u0, s0)
		}
		// The retry of the redemption still finds its answer.
		if r := redeem("X1"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("redeem X1 retried: %d %s", r.status, r.body)
		}
	})

	t.Run("other route first", func(t *testing.T) {
		wantCode(t, a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: "usdx-redeem:X2", body: "{}"}), 400, "validation")
		wantCode(t, a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "usdx-redeem:X2",
			body: orderBody("BTC-PERP", "buy", "market", "1", nil)}), 400, "validation")
		if f, u, s := holdings(); f != f0 || u != u0 || s != s0 {
			t.Fatalf("a refused request changed the account: %v %v %v, was %v %v %v", f, u, s, f0, u0, s0)
		}
		if r := redeem("X2"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("redeem X2 after the refusals: %d %s", r.status, r.body)
		}
	})

	// No collision possible: a redemption's own key, a cancel's, a key
	// that only contains the prefix.
	if r := redeem("usdx-redeem:X3"); r.status != 201 {
		t.Fatalf("redeem usdx-redeem:X3: %d %s", r.status, r.body)
	}
	wantCode(t, a.do(req{method: "DELETE", path: "/v1/orders/no-such-order", key: key, idem: "usdx-redeem:X1"}), 404, "not_found")
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: "x-usdx-redeem:X1", body: "{}"}); r.status != 201 {
		t.Fatalf("faucet keyed x-usdx-redeem:X1: %d %s", r.status, r.body)
	}
}
