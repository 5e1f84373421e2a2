package connlimit

import "syscall"

// nofileLimit returns the soft RLIMIT_NOFILE and reports whether it could be
// read.
func nofileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return lim.Cur, true
}
