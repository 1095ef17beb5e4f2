package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
)

func call(t *testing.T, base, method, path, key, idem, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	r, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	if key != "" {
		r.Header.Set("x-api-key", key)
	}
	if idem != "" {
		r.Header.Set("idempotency-key", idem)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// TestIdempotentRetryOnFollowerAndAcrossLeaderChange: a faucet grant sent
// to a follower, retried on another node, and retried again after the
// leader is killed, gets the original answer each time and credits once.
func TestIdempotentRetryOnFollowerAndAcrossLeaderChange(t *testing.T) {
	c := clustertest.Start(t, 3)
	f := c.Followers()
	if len(f) < 2 {
		t.Fatal("need two followers")
	}
	st, _, body := call(t, c.HTTP(f[0].ID), "POST", "/v1/signup", "", "signup-1", "{}")
	if st != 201 {
		t.Fatalf("signup through a follower: %d %s", st, body)
	}
	var su struct{ APIKey string }
	_ = json.Unmarshal(body, &su)

	st1, h1, b1 := call(t, c.HTTP(f[0].ID), "POST", "/v1/faucet", su.APIKey, "grant-1", "{}")
	if st1 != 201 {
		t.Fatalf("faucet through a follower: %d %s", st1, b1)
	}
	// Another node is asked to be at least as far as the grant's write
	// (read-your-writes across nodes).
	st2, h2, b2 := call(t, c.HTTP(f[1].ID), "POST", "/v1/faucet", su.APIKey, "grant-1", "{}", "X-Min-Index", h1.Get("X-Raft-Index"))
	if st2 != st1 || string(b2) != string(b1) || h2.Get("Idempotent-Replayed") != "true" || h2.Get("X-Raft-Index") != h1.Get("X-Raft-Index") {
		t.Fatalf("retry on another node: %d %s (replayed %q)", st2, b2, h2.Get("Idempotent-Replayed"))
	}

	old := c.Leader()
	c.Kill(old.ID)
	if _, err := c.WaitLeader(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	var survivor string
	for _, m := range c.Live() {
		survivor = m.ID
	}
	st3, _, b3 := call(t, c.HTTP(survivor), "POST", "/v1/faucet", su.APIKey, "grant-1", "{}")
	if st3 != st1 || string(b3) != string(b1) {
		t.Fatalf("retry after a leader change: %d %s", st3, b3)
	}
	// A different body under the same key is refused on any node.
	if st, _, b := call(t, c.HTTP(survivor), "POST", "/v1/sessions", su.APIKey, "grant-1", `{"label":"x"}`); st != 409 || !strings.Contains(string(b), "idempotency_key_reused") {
		t.Fatalf("reuse: %d %s", st, b)
	}
	_, _, deps := call(t, c.HTTP(survivor), "GET", "/v1/deposits", su.APIKey, "", "")
	if n := strings.Count(string(deps), `"railRef"`); n != 1 {
		t.Fatalf("the grant was credited %d times: %s", n, deps)
	}
}

// TestConcurrentRetriesOnEveryNodeApplyOnce: the same faucet grant sent at
// once, 12 times over all three nodes (group commit puts several in one
// entry, the rest in entries racing behind it): every caller gets the
// same answer, and the grant is credited once.
func TestConcurrentRetriesOnEveryNodeApplyOnce(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	st, _, body := call(t, c.HTTP(leader.ID), "POST", "/v1/signup", "", "signup-race", "{}")
	if st != 201 {
		t.Fatalf("signup: %d %s", st, body)
	}
	var su struct{ APIKey string }
	_ = json.Unmarshal(body, &su)
	// Every node knows the key before the race.
	_, h, _ := call(t, c.HTTP(leader.ID), "GET", "/v1/account", su.APIKey, "", "")
	type answer struct {
		status int
		body   string
	}
	nodes := c.Live()
	answers := make(chan answer, 12)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func(base string) {
			defer wg.Done()
			st, _, b := call(t, base, "POST", "/v1/faucet", su.APIKey, "grant-race", "{}", "X-Min-Index", h.Get("X-Raft-Index"))
			answers <- answer{st, string(b)}
		}(c.HTTP(nodes[i%len(nodes)].ID))
	}
	wg.Wait()
	close(answers)
	var first *answer
	for a := range answers {
		if first == nil {
			first = &a
		}
		if a.status != 201 || a != *first {
			t.Errorf("an answer %d %s, the first %d %s", a.status, a.body, first.status, first.body)
		}
	}
	_, _, deps := call(t, c.HTTP(leader.ID), "GET", "/v1/deposits", su.APIKey, "", "")
	if n := strings.Count(string(deps), `"railRef"`); n != 1 {
		t.Fatalf("the grant was credited %d times: %s", n, deps)
	}
}
