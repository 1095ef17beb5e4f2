package iptables

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockPath serializes runs on one machine: they share the loopback
// addresses, the ports and the firewall chains.
const lockPath = "/tmp/perpd-jepsen.lock"

// lockWait bounds how long a run waits for another to finish.
const lockWait = 20 * time.Minute

// Lock takes the machine-wide run lock, waiting for a running harness to
// finish, and returns its release. Every user of the chains (and of the
// nodes' addresses and ports) takes it first. The lock dies with the
// process.
func Lock(ctx context.Context, log func(string, ...any)) (func(), error) {
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
