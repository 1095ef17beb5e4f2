package httpapi

import (
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/internal/porverify"
	"github.com/perpd/perpd/node"
)

// TestPorProofsVerifyIndependentlyOverHTTP: every account's proof, as GET
// /v1/por/proof serves it, verifies with internal/porverify (no code
// shared with fsm/por) against what GET /por publishes, holds exactly the
// account's balance, and has SPEC's fields with SPEC's JSON types; the
// balances add up to the published total, zero balances included. A key
// without the read scope is refused.
func TestPorProofsVerifyIndependentlyOverHTTP(t *testing.T) {
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	keys := map[string]string{}
	for i := 0; i < 9; i++ {
		k, acct := a.signup()
		keys[acct] = k
		if i%3 != 0 {
			if r := a.do(req{method: "POST", path: "/v1/faucet", key: k, idem: nextIdem(), body: "{}"}); r.status != 201 {
				t.Fatalf("faucet: %d %s", r.status, r.body)
			}
		}
	}
	snap := a.settledPor(clk)
	liab := snap["liability"].(map[string]any)
	for field, want := range map[string]string{"rootHash": "string", "totalMsat": "string", "leafCount": "number", "rootSaltHex": "string", "tsMs": "string"} {
		if got := jsonKind(liab[field]); got != want {
			t.Fatalf("liability.%s is a JSON %s, SPEC says %s", field, got, want)
		}
	}
	total, _ := strconv.ParseInt(liab["totalMsat"].(string), 10, 64)
	ts, _ := strconv.ParseInt(liab["tsMs"].(string), 10, 64)
	pub := porverify.Published{RootHash: liab["rootHash"].(string), TotalMsat: total, LeafCount: int(liab["leafCount"].(float64)),
		RootSaltHex: liab["rootSaltHex"].(string), TsMs: ts}
	if pub.LeafCount != len(keys) {
		t.Fatalf("%d leaves for %d accounts", pub.LeafCount, len(keys))
	}
	var sum int64
	zero := 0
	for acct, k := range keys {
		r := a.do(req{method: "GET", path: "/v1/por/proof", key: k})
		if r.status != 200 {
			t.Fatalf("proof: %d %s", r.status, r.body)
		}
		bal, err := porverify.Check(r.body, pub, k, acct)
		if err != nil {
			t.Fatalf("%s: %v\n%s", acct, err, r.body)
		}
		acc := a.do(req{method: "GET", path: "/v1/account", key: k}).json(t)
		free, _ := strconv.ParseInt(acc["freeMsat"].(string), 10, 64)
		res, _ := strconv.ParseInt(acc["reservedMsat"].(string), 10, 64)
		if bal != free+res {
			t.Fatalf("%s: leaf %d, account %d", acct, bal, free+res)
		}
		if bal == 0 {
			zero++
		}
		sum += bal
		// SPEC's fields (plus asset), with SPEC's JSON types.
		m := r.json(t)
		wantKeys(t, m, "asset", "rootHash", "totalMsat", "rootSaltHex", "treeTsMs", "leaf", "path")
		leaf := m["leaf"].(map[string]any)
		// Plus tagKeyId: the signup key's id, as GET /v1/sessions lists it.
		wantKeys(t, leaf, "accountTag", "balanceMsat", "index", "tagKeyId")
		if sess := a.do(req{method: "GET", path: "/v1/sessions", key: k}).json(t)["sessions"].([]any); leaf["tagKeyId"] != sess[0].(map[string]any)["keyId"] {
			t.Fatalf("tagKeyId %v, the signup key is %v", leaf["tagKeyId"], sess[0])
		}
		if jsonKind(m["treeTsMs"]) != "string" || jsonKind(leaf["balanceMsat"]) != "string" || jsonKind(leaf["index"]) != "number" || m["asset"] != "msat" {
			t.Fatalf("proof types: %s", r.body)
		}
		for _, s := range m["path"].([]any) {
			step := s.(map[string]any)
			wantKeys(t, step, "siblingHash", "siblingSumMsat", "siblingOnLeft")
			if jsonKind(step["siblingSumMsat"]) != "string" || jsonKind(step["siblingOnLeft"]) != "bool" {
				t.Fatalf("path step types: %v", step)
			}
		}
	}
	if sum != total || zero != 3 {
		t.Fatalf("proofs add to %d (%d zero), published total %d", sum, zero, total)
	}
	var master string
	for _, k := range keys {
		master = k
		break
	}
	tradeOnly, _ := a.mint(master, "trade")
	wantCode(t, a.do(req{method: "GET", path: "/v1/por/proof", key: tradeOnly}), 403, "insufficient_scope")
	readOnly, _ := a.mint(master, "read")
	if r := a.do(req{method: "GET", path: "/v1/por/proof", key: readOnly}); r.status != 200 {
		t.Fatalf("a read key: %d %s", r.status, r.body)
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return "other"
}

func wantKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(keys)
	if len(got) != len(keys) {
		t.Fatalf("fields %v, want %v", got, keys)
	}
	for i := range got {
		if got[i] != keys[i] {
			t.Fatalf("fields %v, want %v", got, keys)
		}
	}
}

// TestPorProofDescriptionStatesTheAlgorithm: SPEC gives the proof's
// fields but not how to check them, and the served description said
// nothing more, so a client had only the dashboard's script or perpd's
// own verifier to learn the leaf preimage, the sums' encoding, the side
// rule and the tag. Now /openapi.json states each on the fields they
// concern (what internal/porverify was written from).
func TestPorProofDescriptionStatesTheAlgorithm(t *testing.T) {
	props := schemaProperties(t)
	desc := func(schema, field string) string {
		p := props[schema][field]
		if p == nil {
			t.Fatalf("no %s.%s in the description", schema, field)
		}
		s, _ := p["description"].(string)
		return s
	}
	path, tag := desc("ProofDoc", "path"), desc("LeafDoc", "accountTag")
	for _, want := range []string{"SHA-256(rootSalt || accountTag)", "8 bytes big-endian", "bit k of leaf.index",
		"left.hash || left.sum || right.hash || right.sum", "GET /por publishes for treeTsMs"} {
		if !strings.Contains(path, want) {
			t.Errorf("ProofDoc.path does not say %q: %q", want, path)
		}
	}
	for _, want := range []string{"HMAC-SHA256", "SHA-256(api key)", `"perpd/por/tag/v1" 0x00 asset 0x00 accountId 0x00 treeTsMs`, "oldest API key"} {
		if !strings.Contains(tag, want) {
			t.Errorf("LeafDoc.accountTag does not say %q: %q", want, tag)
		}
	}
}
