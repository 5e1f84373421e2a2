//go:build !linux

package connlimit

// nofileLimit reports that there is no soft RLIMIT_NOFILE to read here.
func nofileLimit() (uint64, bool) { return 0, false }
