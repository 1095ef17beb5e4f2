package cli

import (
	"net/http"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// The venue's books on the admin surface: the house book, the insurance
// fund and the other venue accounts, what traders hold, and the result of
// the ledger's conservation check, all read from one node's state at one
// applied index (compare nodes with the index).

func init() {
	wirings = append(wirings, func(p *Parts) error {
		p.Admin.Handle("GET /admin/ledger", func(w http.ResponseWriter, r *http.Request) {
			cluster.WriteJSON(w, http.StatusOK, ledgerView(p.Node.Machine()))
		})
		return nil
	})
	adminExtras = append(adminExtras, func(f *adminFlags) *cobra.Command {
		return &cobra.Command{
			Use:   "ledger",
			Short: "The house book, the insurance fund, traders' total and the conservation check, at one applied index",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				return adminCall(cmd, f, http.MethodGet, "/admin/ledger", nil)
			},
		}
	})
}

// AdminLedgerView is GET /admin/ledger. Conservation: the sum of every
// balance equals credited - paid, and no account but the house is
// negative (ledger.Check); error says what broke when ok is false. The
// figures listed are every account of the ledger, so they add up to
// credited - paid themselves (checked in TestAdminUSDxAndTheTokenRail).
type AdminLedgerView struct {
	AppliedIndex           wire.Int `json:"appliedIndex"`
	HouseMsat              wire.Int `json:"houseMsat"`
	InsuranceMsat          wire.Int `json:"insuranceMsat"`
	FeeRevenueMsat         wire.Int `json:"feeRevenueMsat"`
	PendingWithdrawalsMsat wire.Int `json:"pendingWithdrawalsMsat"`
	FaucetMsat             wire.Int `json:"faucetMsat"`
	// Referral and promoter rewards accrued and not yet claimed or
	// forfeited (fsm/growth).
	ReferralPayableMsat wire.Int `json:"referralPayableMsat"`
	PromoterPayableMsat wire.Int `json:"promoterPayableMsat"`
	// USDx (fsm/usdx): the reserve that backs it, the yield escrow, and
	// the hedge account's free balance and margin (the venue's own, so not
	// in tradersMsat).
	USDxReserveMsat wire.Int `json:"usdxReserveMsat"`
	USDxYieldMsat   wire.Int `json:"usdxYieldMsat"`
	USDxHedgeMsat   wire.Int `json:"usdxHedgeMsat"`
	// TradersMsat is every trader's balances: free, reserved and margin.
	TradersMsat  wire.Int `json:"tradersMsat"`
	CreditedMsat wire.Int `json:"creditedMsat"`
	PaidMsat     wire.Int `json:"paidMsat"`
	Conservation struct {
		OK    bool    `json:"ok"`
		Error *string `json:"error"`
	} `json:"conservation"`
}

func ledgerView(m *fsm.Machine) AdminLedgerView {
	var v AdminLedgerView
	m.Read(func(st *fsm.State, index uint64) {
		l := st.Ledger
		v.AppliedIndex = wire.Int(index)
		v.HouseMsat, v.InsuranceMsat = wire.Int(l.Balance(ledger.House)), wire.Int(l.Balance(ledger.Insurance))
		v.FeeRevenueMsat, v.PendingWithdrawalsMsat = wire.Int(l.Balance(ledger.FeeRevenue)), wire.Int(l.Balance(ledger.PendingWithdrawals))
		hedge := l.SumPrefix("acct:" + usdx.HedgeAccount + ":")
		v.FaucetMsat, v.TradersMsat = wire.Int(l.Balance(ledger.Faucet)), wire.Int(l.SumPrefix("acct:")-hedge)
		v.USDxReserveMsat, v.USDxYieldMsat = wire.Int(l.Balance(usdx.Reserve)), wire.Int(l.Balance(usdx.YieldEscrow))
		v.USDxHedgeMsat = wire.Int(hedge)
		v.ReferralPayableMsat = wire.Int(l.Balance(growth.ReferralPayable))
		v.PromoterPayableMsat = wire.Int(l.Balance(growth.PromoterPayable))
		v.CreditedMsat, v.PaidMsat = wire.Int(l.CreditedMsat), wire.Int(l.PaidMsat)
		if err := l.Check(); err != nil {
			msg := err.Error()
			v.Conservation.Error = &msg
		} else {
			v.Conservation.OK = true
		}
	})
	return v
}
