package cli

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

func init() { wirings = append(wirings, wireRail) }

// PayInvoicePath is the admin route behind `perpd admin rail pay-invoice`.
const PayInvoicePath = "/admin/rail/pay-invoice"

// wireRail connects the payment rail: the leader's payout driver and, on
// deployments whose profile pays (testnet, local, bench), the operator's
// simulated payer. The payer runs on the leader (a follower relays the
// admin request): a settlement is a leader-only command that no follower
// may forward.
func wireRail(p *Parts) error {
	p.Node.AddLeaderDriver(node.RailDriver(p.Rail))
	if profiles[p.Node.Config().Deployment].payer {
		p.Admin.HandleLeader("POST "+PayInvoicePath, payInvoice(p.Node, p.Rail))
	}
	return nil
}

// PayInvoiceRequest is the body of POST /admin/rail/pay-invoice.
type PayInvoiceRequest struct {
	Invoice string `json:"invoice"`
	// AmountMsat is what the payer sends: required for an any-amount
	// invoice, else omitted or exactly the invoice's amount.
	AmountMsat *wire.Int `json:"amountMsat,omitempty"`
}

// payInvoice plays the external payer of a deposit invoice on the simulated
// rail. The rail recognises the cluster's invoices by signature, and the
// settlement goes through the log, where the state machine credits it
// once, to the invoice's account.
func payInvoice(n *node.Node, sim rail.Simulator) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req PayInvoiceRequest
		if !cluster.DecodeJSON(w, r, &req) {
			return
		}
		var amount int64
		if req.AmountMsat != nil {
			amount = int64(*req.AmountMsat)
		}
		res, err := n.SettleInvoice(r.Context(), sim, req.Invoice, amount)
		switch {
		case rail.IsValidation(err):
			cluster.WriteJSON(w, http.StatusBadRequest, wire.ErrorBody{Error: err.Error(), Code: wire.CodeValidation})
			return
		case errors.Is(err, node.ErrUnavailable):
			cluster.WriteJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: err.Error(), Code: wire.CodeUnavailable})
			return
		case err != nil:
			cluster.WriteJSON(w, http.StatusInternalServerError, wire.ErrorBody{Error: err.Error(), Code: wire.CodeUnavailable})
			return
		}
		cluster.WriteJSON(w, res.Status, json.RawMessage(res.Body))
	}
}
