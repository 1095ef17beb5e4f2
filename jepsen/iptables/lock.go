package iptables

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockPath serializes the runs that share the default loopback addresses
// (127.0.0.11-19) and the firewall chains: every harness takes it for the
// chains, and a run on the default addresses for them too.
const lockPath = "/tmp/perpd-jepsen.lock"

// defaultIPBase mirrors db.DefaultIPBase: the nodes at 127.0.0.11-19.
const defaultIPBase = 10

// lockWait bounds how long a run waits for another to finish.
const lockWait = 20 * time.Minute

// Lock takes the machine-wide lock of the default addresses and the
// firewall chains, waiting for a running harness to finish, and returns
// its release. The lock dies with the process.
func Lock(ctx context.Context, log func(string, ...any)) (func(), error) {
	return lockFile(ctx, lockPath, log)
}

// LockRun takes what a run whose nodes are at 127.0.0.(ipBase+1).. needs
// before it starts them: the addresses (and so their ports), and the
// firewall chains when it partitions. The default range's lock is also the
// chains' (older harnesses take it for both); another range has its own
// lock, so runs on different ranges without partitions go at once, while
// every run that partitions still waits for the chains.
func LockRun(ctx context.Context, ipBase int, firewall bool, log func(string, ...any)) (func(), error) {
	if ipBase == defaultIPBase {
		return Lock(ctx, log)
	}
	unlockRange, err := lockFile(ctx, fmt.Sprintf("/tmp/perpd-jepsen-127.0.0.%d.lock", ipBase), log)
	if err != nil || !firewall {
		return unlockRange, err
	}
	// Always the range first, then the chains: no two runs wait on each
	// other in opposite orders.
	unlockChains, err := Lock(ctx, log)
	if err != nil {
		unlockRange()
		return nil, err
	}
	return func() { unlockChains(); unlockRange() }, nil
}

// lockFile takes an exclusive flock on path. Two opens of one path in a
// process are two locks, so runs in one test binary exclude each other too.
func lockFile(ctx context.Context, path string, log func(string, ...any)) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
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
			log("another jepsen run holds %s; waiting (up to %v)", path, lockWait)
			warned = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = f.Close()
			return nil, fmt.Errorf("another jepsen run still holds %s", path)
		}
		time.Sleep(time.Second)
	}
}
