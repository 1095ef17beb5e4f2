package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// findModule returns the directory of the perpd go.mod above the working
// directory.
func findModule() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the perpd module")
	}
	return filepath.Dir(mod), nil
}

// buildPerpd compiles perpd into dir and returns the binary's path.
func buildPerpd(ctx context.Context, moduleDir, dir, tags string) (string, error) {
	bin := filepath.Join(dir, "perpd")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build perpd: %v\n%s", err, out.String())
	}
	return bin, nil
}

// copyBin copies a prebuilt binary where the nodes' uids can run it.
func copyBin(src, dir string) (string, error) {
	dst := filepath.Join(dir, "perpd")
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return dst, out.Close()
}

// serveFlags reads `perpd serve --help` to learn which optional flags the
// build under test has (the harness runs against whatever is checked in).
// A help text without the --data flag every build has is no answer (the
// command failed or timed out on a loaded machine): it is tried again, and
// then an error, not an empty list that would quietly turn the clock
// nemesis and the funding boundary off.
func serveFlags(ctx context.Context, bin string) (string, error) {
	return readServeFlags(ctx, func(ctx context.Context) ([]byte, error) {
		return exec.CommandContext(ctx, bin, "serve", "--help").CombinedOutput()
	})
}

func readServeFlags(ctx context.Context, help func(context.Context) ([]byte, error)) (string, error) {
	var out []byte
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Second):
			}
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err = help(actx)
		cancel()
		if strings.Contains(string(out), "--data") {
			return string(out), nil
		}
	}
	return "", fmt.Errorf("perpd serve --help gave no flag list (%v): %.200q", err, out)
}
