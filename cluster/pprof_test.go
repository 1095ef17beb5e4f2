package cluster_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/cluster/clustertest"
)

// Profiles are on the admin listener, behind the admin token.
func TestProfilesNeedTheAdminToken(t *testing.T) {
	c := clustertest.Start(t, 1)
	m := c.Leader()
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.AdminAddr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if st, _ := get(path, ""); st != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, st)
		}
		if st, _ := get(path, "wrong"); st != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d", path, st)
		}
	}
	if st, body := get("/debug/pprof/", c.Token); st != http.StatusOK || !strings.Contains(body, "allocs") {
		t.Fatalf("index: %d %.200s", st, body)
	}
	if st, body := get("/debug/pprof/profile?seconds=1", c.Token); st != http.StatusOK || len(body) == 0 {
		t.Fatalf("cpu profile: %d, %d bytes", st, len(body))
	}
}
