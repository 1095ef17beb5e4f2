package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/node"
)

// serveFromEnv runs `perpd serve` as Execute does (the root's hook applies
// PERPD_* variables), with the listeners and data of serveWith, and a
// context that is already cancelled.
func serveFromEnv(t *testing.T, args ...string) error {
	t.Helper()
	root := &cobra.Command{Use: "perpd", SilenceUsage: true, SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error { return applyEnv(cmd) }}
	root.AddCommand(serveCmd())
	return executeServe(t, root, []string{"serve"}, args)
}

// TestServeRefusesBackupVariablesWithoutABackupDir: the deployment's env
// files set PERPD_BACKUP_EVERY and PERPD_BACKUP_KEEP beside
// PERPD_BACKUP_DIR. Given as variables without the directory (a line
// commented out, a typo in its name) they were ignored, since only a flag
// on the command line counted as given: the node started, took no backup
// and said nothing, where the same flags on argv are refused.
func TestServeRefusesBackupVariablesWithoutABackupDir(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"PERPD_BACKUP_EVERY", "1h", "--backup-every needs --backup-dir"},
		{"PERPD_BACKUP_KEEP", "48", "--backup-keep needs --backup-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			if err := serveFromEnv(t); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s=%s without PERPD_BACKUP_DIR: %v, want an error naming %q", tc.name, tc.value, err, tc.want)
			}
		})
	}
	// With the directory the variables are what the env files set.
	t.Setenv("PERPD_BACKUP_EVERY", "1h")
	t.Setenv("PERPD_BACKUP_KEEP", "48")
	t.Setenv("PERPD_BACKUP_DIR", t.TempDir())
	if err := serveFromEnv(t); err != nil {
		t.Fatalf("the env files' backup variables: %v", err)
	}
}

// TestServeAcceptsTheAdminTokenVariable: PERPD_ADMIN_TOKEN fills the
// hidden --admin-token flag; only that flag on argv is refused.
func TestServeAcceptsTheAdminTokenVariable(t *testing.T) {
	t.Setenv("PERPD_ADMIN_TOKEN", strings.Repeat("a", 48))
	if err := serveFromEnv(t); err != nil {
		t.Fatalf("PERPD_ADMIN_TOKEN: %v", err)
	}
	if err := serveFromEnv(t, "--admin-token", strings.Repeat("b", 48)); err == nil || !strings.Contains(err.Error(), "--admin-token-file") {
		t.Fatalf("--admin-token on argv: %v", err)
	}
}

// TestServeRefusesAWeakClusterSecret: serve took any non-empty cluster
// secret file ("hunter2"). Every key of the cluster is derived from it,
// and two of those derivations are handed out: the fingerprint (in every
// raft TLS handshake's application protocol, in clear, and in a refusal's
// text) and the MAC of every withdrawal confirm token a trader is given.
// Each lets anyone test guesses of a short or human secret offline, and
// the secret yields the peer bearer that opens /internal/propose. A secret
// is refused below node.MinClusterSecretLen characters, naming how to make
// one.
func TestServeRefusesAWeakClusterSecret(t *testing.T) {
	for _, weak := range []string{"hunter2", strings.Repeat("ab", node.MinClusterSecretLen/2-1)} {
		p := filepath.Join(t.TempDir(), "cluster-secret")
		if err := node.WriteSecretFile(p, weak); err != nil {
			t.Fatal(err)
		}
		err := serveWith(t, "--cluster-secret-file", p)
		if err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Fatalf("a %d-character cluster secret: %v, want a refusal saying how to make one", len(weak), err)
		}
	}
	p := filepath.Join(t.TempDir(), "cluster-secret")
	if err := node.WriteSecretFile(p, node.NewClusterSecret()); err != nil {
		t.Fatal(err)
	}
	if err := serveWith(t, "--cluster-secret-file", p); err != nil {
		t.Fatalf("a generated cluster secret: %v", err)
	}
	// One of the minimum length passes.
	if err := os.WriteFile(p, []byte(strings.Repeat("ab", node.MinClusterSecretLen/2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serveWith(t, "--cluster-secret-file", p); err != nil {
		t.Fatalf("a cluster secret of the minimum length: %v", err)
	}
}
