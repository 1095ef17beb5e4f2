//go:build unix

package connlimit

import "syscall"

// OpenFileLimit is the process's soft limit on open file descriptors (the
// Go runtime raises it to the hard limit at start), 0 when unknown.
func OpenFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
