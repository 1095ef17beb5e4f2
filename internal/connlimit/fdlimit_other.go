//go:build !unix

package connlimit

// OpenFileLimit is 0 (unknown) where the platform has no RLIMIT_NOFILE.
func OpenFileLimit() uint64 { return 0 }
