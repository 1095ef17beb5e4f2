package cli

import (
	"net/http"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
)

func init() {
	adminExtras = append(adminExtras, adminPromoterCmd)
	wirings = append(wirings, wirePromoterAdmin)
}

// PromoterReviewPath is the admin route of an operator's decision on a
// promoter application (perpd admin promoter approve|refuse|revoke).
const PromoterReviewPath = "/admin/promoter/review"

// PromoterReviewRequest is the body of POST /admin/promoter/review.
type PromoterReviewRequest struct {
	AccountID string `json:"accountId"`
	Decision  string `json:"decision"`
}

// wirePromoterAdmin serves the review on every node (a follower forwards
// it to the leader, as the other operator commands).
func wirePromoterAdmin(p *Parts) error {
	a := &marketAdmin{n: p.Node}
	p.Admin.Handle("POST "+PromoterReviewPath, func(w http.ResponseWriter, r *http.Request) {
		var req PromoterReviewRequest
		if decodeStrict(w, r, &req) {
			a.propose(w, r, fsm.CmdPromoterReview, fsm.PromoterReviewPayload{AccountID: req.AccountID, Decision: req.Decision})
		}
	})
	return nil
}

func adminPromoterCmd(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "promoter", Short: "Decide promoter applications (prod leaves them pending; testnet approves at once) and revoke promoters"}
	for _, d := range []struct{ decision, short string }{
		{growth.ReviewApprove, "Approve a pending application: the promoter may then create codes"},
		{growth.ReviewRefuse, "Refuse a pending application for good"},
		{growth.ReviewRevoke, "Revoke an approved promoter for good: its codes are disabled, rewards still in holdback are forfeited"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   d.decision + " ACCOUNT_ID",
			Short: d.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return adminCall(cmd, f, http.MethodPost, PromoterReviewPath, PromoterReviewRequest{AccountID: args[0], Decision: d.decision})
			},
		})
	}
	return cmd
}
