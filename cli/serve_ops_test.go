package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeChecksItsOperationsFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown log format", []string{"--log-format", "xml"}, "--log-format"},
		{"backups too often", []string{"--backup-dir", t.TempDir(), "--backup-every", "10s"}, "--backup-every"},
		{"no backup kept", []string{"--backup-dir", t.TempDir(), "--backup-keep", "0"}, "--backup-keep"},
		{"a missing metrics token file", []string{"--metrics-token-file", filepath.Join(t.TempDir(), "none")}, "--metrics-token-file"},
	}
	world := filepath.Join(t.TempDir(), "world-readable")
	if err := os.WriteFile(world, []byte("tok"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		args []string
		want string
	}{"a world-readable metrics token", []string{"--metrics-token-file", world}, "chmod 600"})
	for _, tc := range cases {
		if err := serveWith(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	tok := filepath.Join(t.TempDir(), "metrics-token")
	if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serveWith(t, "--log-format", "json", "--metrics-token-file", tok, "--backup-dir", t.TempDir(),
		"--backup-every", "1m", "--backup-keep", "3"); err != nil {
		t.Fatalf("valid operations flags: %v", err)
	}
}
