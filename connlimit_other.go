//go:build !linux

package main

// nofileLimit reports that there is no soft RLIMIT_NOFILE to read here.
func nofileLimit() (uint64, bool) { return 0, false }
