package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var envLine = regexp.MustCompile(`^#?\s*(PERPD_[A-Z0-9_]+)(=.*)?`)

// TestDeployEnvFilesNameEveryServeFlag: each deploy/env/nodeN.env names
// every `perpd serve` flag as its PERPD_ variable (set, or commented out
// with its default), sets only variables serve knows, and sets a value
// serve accepts; node1 bootstraps and the others join it.
func TestDeployEnvFilesNameEveryServeFlag(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "deploy", "env", "node*.env"))
	if err != nil || len(files) < 3 {
		t.Fatalf("deploy/env: %v %v", files, err)
	}
	flags := map[string]*pflag.Flag{}
	serveCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden { // --admin-token: a value, refused on argv; never in a file
			flags["PERPD_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))] = f
		}
	})
	for _, file := range files {
		fh, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		named, set := map[string]bool{}, map[string]string{}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			m := envLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
			if m == nil {
				continue
			}
			named[m[1]] = true
			if !strings.HasPrefix(strings.TrimSpace(sc.Text()), "#") {
				if m[2] == "" {
					t.Errorf("%s: %s has no =", file, m[1])
				}
				set[m[1]] = strings.TrimPrefix(m[2], "=")
			}
		}
		fh.Close()
		for name := range flags {
			if !named[name] {
				t.Errorf("%s does not name %s", filepath.Base(file), name)
			}
		}
		for name, v := range set {
			f, ok := flags[name]
			if !ok {
				t.Errorf("%s sets %s, which is no serve flag", filepath.Base(file), name)
				continue
			}
			// The value parses as the flag's type (a fresh flag set).
			fs := serveCmd().Flags()
			if err := fs.Set(f.Name, v); err != nil {
				t.Errorf("%s: %s=%s: %v", filepath.Base(file), name, v, err)
			}
		}
		id := strings.TrimSuffix(filepath.Base(file), ".env")
		if set["PERPD_ID"] != id {
			t.Errorf("%s: PERPD_ID=%q", file, set["PERPD_ID"])
		}
		_, boot := set["PERPD_BOOTSTRAP"]
		_, join := set["PERPD_JOIN"]
		if boot == join || boot != (id == "node1") {
			t.Errorf("%s: bootstrap %v, join %v", file, boot, join)
		}
		for _, k := range []string{"PERPD_TLS_CERT", "PERPD_TLS_KEY", "PERPD_TLS_CA", "PERPD_METRICS_TOKEN_FILE", "PERPD_BACKUP_DIR"} {
			if set[k] == "" {
				t.Errorf("%s: %s unset: the deployment runs TLS, metrics and backups", file, k)
			}
		}
	}
}

// TestDeployPrometheusFilesCheck runs promtool on the shipped scrape
// configuration and alerting rules, and the rules' unit tests
// (deploy/alerts_test.yml; skipped without promtool).
func TestDeployPrometheusFilesCheck(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed; .ci/run installs the Debian package prometheus")
		}
		t.Skip("promtool not found (Debian package prometheus)")
	}
	alerts := filepath.Join("..", "deploy", "alerts.yml")
	if out, err := exec.Command(promtool, "check", "rules", alerts).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The rules' unit tests: each alert fires on what it is for.
	if out, err := exec.Command(promtool, "test", "rules", filepath.Join("..", "deploy", "alerts_test.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// The scrape configuration names files on the Prometheus host: point
	// them at stand-ins here.
	conf, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := string(conf)
	for _, p := range regexp.MustCompile(`/etc/prometheus/[A-Za-z0-9_./-]+`).FindAllString(s, -1) {
		local := filepath.Join(dir, filepath.Base(p))
		src := []byte("stand-in\n")
		if strings.HasSuffix(p, "alerts.yml") {
			src, _ = os.ReadFile(alerts)
		}
		if err := os.WriteFile(local, src, 0o600); err != nil {
			t.Fatal(err)
		}
		s = strings.ReplaceAll(s, p, local)
	}
	cf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cf, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", "--syntax-only", cf).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}
