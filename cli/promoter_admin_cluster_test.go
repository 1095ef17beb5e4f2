package cli_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
)

// The operator's review of a promoter application goes through any node's
// admin listener (a follower forwards it) and answers with the state
// machine's decision. Testnet approves an application at once, so here
// the review finds it decided (409); an unknown account is 404, a decision
// other than approve, refuse or revoke 400, an unknown field 400, and none
// of them changes the application (the approval itself: fsm's
// TestOperatorReviewsAPendingApplication). Revoking the approved promoter
// through the follower reaches every node; a second revocation is 409.
func TestPromoterReviewThroughAFollower(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	f := c.Followers()[0].ID
	base := c.HTTP(f)
	st, r := railCall(t, base, "POST", "/v1/signup", "", "review-signup", map[string]any{})
	if st != 201 {
		t.Fatalf("signup: %d %v", st, r)
	}
	key, acct := r["apiKey"].(string), r["accountId"].(string)
	app := map[string]any{"displayName": "Review Weekly", "plan": "a column", "jurisdictions": []string{"PT"},
		"acceptedTermsVersion": growth.PromoterTermsVersion,
		"channels":             []map[string]string{{"kind": "newsletter", "url": "https://review.example", "audience": "1k"}}}
	if st, r := railCall(t, base, "POST", "/v1/promoter/apply", key, "review-apply", app); st != 201 || r["status"] != growth.PromoterApproved {
		t.Fatalf("apply on testnet: %d %v", st, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"accountId": acct, "decision": "refuse"}, "409: the application"},
		{map[string]any{"accountId": "acc_unknown", "decision": "approve"}, "404: account acc_unknown has not applied"},
		{map[string]any{"accountId": acct, "decision": "later"}, "400: decision must be approve, refuse or revoke"},
		{map[string]any{"accountId": acct, "decision": "approve", "note": "x"}, "400"},
	} {
		err := c.Admin(f).Do(ctx, http.MethodPost, cli.PromoterReviewPath, tc.body, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("review %v: %v, want %q", tc.body, err, tc.want)
		}
	}
	statuses := func() map[string]string {
		t.Helper()
		if err := c.WaitConverged(15 * time.Second); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range c.Live() {
			m.Node.Machine().Read(func(st *fsm.State, _ uint64) { out[m.ID] = st.Growth.Promoters[acct].Status })
		}
		return out
	}
	for id, status := range statuses() {
		if status != growth.PromoterApproved {
			t.Fatalf("%s: the application is %q after refused reviews", id, status)
		}
	}
	var out growth.ReviewResult
	if err := c.Admin(f).Do(ctx, http.MethodPost, cli.PromoterReviewPath, map[string]any{"accountId": acct, "decision": "revoke"}, &out); err != nil ||
		out.Status != growth.PromoterRevoked {
		t.Fatalf("revoke through a follower: %v %+v", err, out)
	}
	for id, status := range statuses() {
		if status != growth.PromoterRevoked {
			t.Fatalf("%s: the promoter is %q after its revocation", id, status)
		}
	}
	err := c.Admin(f).Do(ctx, http.MethodPost, cli.PromoterReviewPath, map[string]any{"accountId": acct, "decision": "revoke"}, nil)
	if err == nil || !strings.Contains(err.Error(), "409: the application") {
		t.Fatalf("a second revocation: %v", err)
	}
}
