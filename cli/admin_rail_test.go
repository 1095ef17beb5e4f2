package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/node"
)

// runAdmin runs `perpd admin ARGS...` in process and returns its output.
func runAdmin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := adminCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// tokenFile writes token to a 0600 file and returns its path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := node.WriteSecretFile(p, token); err != nil {
		t.Fatal(err)
	}
	return p
}

func postJSON(t *testing.T, url, key, idem, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("idempotency-key", idem)
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != 201 {
		t.Fatalf("POST %s: %d %v %v", url, res.StatusCode, m, err)
	}
	return m
}

func TestAdminRailPayInvoice(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Assemble(Assemble))
	base, admin := c.HTTP("node1"), c.Member("node1").AdminAddr
	acct := postJSON(t, base+"/v1/signup", "", "s", `{}`)
	key := acct["apiKey"].(string)
	fixed := postJSON(t, base+"/v1/deposit-invoices", key, "i1", `{"amountMsat":"21000"}`)
	anyAmount := postJSON(t, base+"/v1/deposit-invoices", key, "i2", `{}`)
	flags := []string{"--addr", admin, "--admin-token-file", tokenFile(t, c.Token)}

	if _, err := runAdmin(t, append([]string{"rail", "pay-invoice", fixed["invoice"].(string), "--amount-msat", "20000"}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "does not match") {
		t.Fatalf("wrong amount: %v", err)
	}
	out, err := runAdmin(t, append([]string{"rail", "pay-invoice", fixed["invoice"].(string)}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	var dep map[string]any
	if err := json.Unmarshal([]byte(out), &dep); err != nil || dep["railRef"] != fixed["paymentRef"] || dep["amountMsat"] != "21000" || dep["accountId"] != acct["accountId"] {
		t.Fatalf("printed %q (%v)", out, err)
	}
	if _, err := runAdmin(t, append([]string{"rail", "pay-invoice", fixed["invoice"].(string)}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "already credited") {
		t.Fatalf("second payment: %v", err)
	}
	if _, err := runAdmin(t, append([]string{"rail", "pay-invoice", anyAmount["invoice"].(string)}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "give the amount") {
		t.Fatalf("any-amount invoice without an amount: %v", err)
	}
	out, err = runAdmin(t, append([]string{"rail", "pay-invoice", anyAmount["invoice"].(string), "--amount-msat", "7000"}, flags...)...)
	if err != nil || !strings.Contains(out, `"amountMsat": "7000"`) {
		t.Fatalf("any-amount invoice: %q %v", out, err)
	}
	if _, err := runAdmin(t, append([]string{"rail", "pay-invoice", "lntb1garbage"}, flags...)...); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := runAdmin(t, "rail", "pay-invoice", anyAmount["invoice"].(string), "--addr", admin, "--admin-token-file", tokenFile(t, "wrong")); err == nil ||
		!strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong admin token: %v", err)
	}
}

// A settlement is a leader-only command that no follower may forward, so
// pay-invoice sent to a follower is relayed, over the cluster's mutual TLS,
// to the leader's admin listener.
func TestAdminRailPayInvoiceOnAFollower(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Assemble(Assemble), clustertest.TLS())
	f := c.Followers()[0]
	acct := postJSON(t, c.HTTP(f.ID)+"/v1/signup", "", "s", `{}`)
	inv := postJSON(t, c.HTTP(f.ID)+"/v1/deposit-invoices", acct["apiKey"].(string), "i1", `{"amountMsat":"21000"}`)
	dir := t.TempDir()
	files, err := c.CA.WriteFiles(dir, "operator", false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runAdmin(t, append([]string{"rail", "pay-invoice", inv["invoice"].(string), "--addr", f.AdminAddr,
		"--admin-token-file", tokenFile(t, c.Token)}, files.Args()...)...)
	if err != nil || !strings.Contains(out, `"amountMsat": "21000"`) {
		t.Fatalf("pay-invoice on follower %s: %q %v", f.ID, out, err)
	}
}
