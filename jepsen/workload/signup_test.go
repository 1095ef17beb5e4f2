package workload

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The venue meters signups per client address (30 at once), so a setup
// that needs more accounts sends every further SignupsPerAddress from
// another loopback address; a run of 45 minutes (24 traders, 12 register
// accounts, 4 withdrawers) failed its setup on the budget before.
func TestSignupsMoveToAnotherAddressEverySignupsPerAddress(t *testing.T) {
	var mu sync.Mutex
	from := map[string]int{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		from[host]++
		n++
		id := n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"apiKey":"k%d","accountId":"a%d","railAddress":"r%d"}`, id, id, id)
	}))
	defer srv.Close()
	node := strings.TrimPrefix(srv.URL, "http://")
	e := faucetEnv(t, []string{node})
	total := 2*SignupsPerAddress + 3
	for i := range total {
		if a, _, why := Signup(context.Background(), e, i, node, fmt.Sprintf("k%d", i)); a == nil {
			t.Fatalf("signup %d: %s", i, why)
		}
	}
	want := map[string]int{"127.0.0.1": SignupsPerAddress, "127.0.1.1": SignupsPerAddress, "127.0.1.2": 3}
	if fmt.Sprint(from) != fmt.Sprint(want) {
		t.Fatalf("signups by client address %v, want %v", from, want)
	}
}
