// Package testdisk gives tests a small filesystem they can fill, to see
// what a node does when its disk is full.
package testdisk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (mount(8) syntax, e.g. "16m") on dir
// for the rest of the test. It needs root: elsewhere the test is skipped,
// except in CI, which runs as root (.ci/run installs with apt-get).
func MountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount a tmpfs on %s: %v", dir, err)
		}
		t.Skipf("mount a tmpfs (needs root): %v", err)
	}
	// A lazy unmount: whatever still holds files there (a node not yet
	// stopped) keeps them until it closes them.
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// Fill writes a file in dir until its filesystem refuses a byte more, and
// returns the file's path (remove it to give the room back).
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}
