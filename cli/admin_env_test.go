package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestAdminOperandsDoNotComeFromTheEnvironment: every flag of every
// command used to be filled from its PERPD_<NAME> variable, so a shell with
// a node's env file sourced (deploy.md's admin commands take their token
// file and certificates from PERPD_ variables, and a node's env file has
// both) ran `perpd admin remove` without --id as a removal of PERPD_ID, its
// own node, instead of refusing; PERPD_FORCE made every join and removal
// skip the quorum check, and PERPD_UNVERIFIED made restore install a file
// with no manifest. Only the connection settings (address, token, TLS,
// data directory, timeout, output) come from the environment; what a
// command acts on and its overrides are given on its command line.
func TestAdminOperandsDoNotComeFromTheEnvironment(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"members":[]}`))
	}))
	defer srv.Close()
	t.Setenv("PERPD_ADDR", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("PERPD_ADMIN_TOKEN_FILE", tokenFile(t, "tok"))
	t.Setenv("PERPD_ID", "node1")
	t.Setenv("PERPD_RAFT", "192.0.2.1:7080")
	t.Setenv("PERPD_FORCE", "true")
	t.Setenv("PERPD_REPLACE", "true")
	t.Setenv("PERPD_UNVERIFIED", "true")

	if _, err := runAdmin(t, "remove"); err == nil || !strings.Contains(err.Error(), "--id is required") {
		t.Errorf("remove without --id, PERPD_ID set: %v, want --id is required", err)
	}
	if _, err := runAdmin(t, "join"); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("join without --id and --raft, PERPD_ID and PERPD_RAFT set: %v, want a refusal", err)
	}
	snap := filepath.Join(t.TempDir(), "x.snap")
	if err := os.WriteFile(snap, []byte("perpd-snapshot v1\n{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runAdmin(t, "restore", "--in", snap); err == nil || !strings.Contains(err.Error(), "no manifest") {
		t.Errorf("restore of a file without a manifest, PERPD_UNVERIFIED set: %v, want the manifest refusal", err)
	}
	// A mistyped path is said to be missing, not to lack a manifest.
	if _, err := runAdmin(t, "restore", "--in", snap+"x"); err == nil || !strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "manifest") {
		t.Errorf("restore of a missing file: %v, want the file named missing", err)
	}
	mu.Lock()
	if len(bodies) != 0 {
		t.Errorf("refused commands reached the node: %q", bodies)
	}
	bodies = nil
	mu.Unlock()

	// The connection settings still come from the environment, and the
	// overrides only from the command line.
	if _, err := runAdmin(t, "remove", "--id", "node3"); err != nil {
		t.Fatalf("remove --id node3 with the connection settings in the environment: %v", err)
	}
	if _, err := runAdmin(t, "join", "--id", "node4", "--raft", "192.0.2.4:7080"); err != nil {
		t.Fatalf("join: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("calls: %q", bodies)
	}
	for _, b := range bodies {
		var req map[string]any
		if err := json.Unmarshal([]byte(b[strings.IndexByte(b, ' ')+1:]), &req); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if req["force"] == true || req["replace"] == true {
			t.Errorf("%s: an override taken from the environment", b)
		}
	}
}
