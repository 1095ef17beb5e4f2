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
	"syscall"
	"time"
)

// lockPath serializes runs on one machine: they share the loopback
// addresses, the ports and the firewall chains.
const lockPath = "/tmp/perpd-jepsen.lock"

// lockWait bounds how long a run waits for another to finish.
const lockWait = 20 * time.Minute

// acquireLock takes the machine-wide run lock, waiting for a running
// harness to finish. The lock dies with the process.
func acquireLock(ctx context.Context, log func(string, ...any)) (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	warned := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !warned {
			log("another jepsen run holds %s; waiting (up to %v)", lockPath, lockWait)
			warned = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = f.Close()
			return nil, fmt.Errorf("another jepsen run still holds %s", lockPath)
		}
		time.Sleep(time.Second)
	}
}

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
func serveFlags(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "serve", "--help").CombinedOutput()
	return string(out)
}
