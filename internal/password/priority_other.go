//go:build !linux

package password

// lowerThreadPriority is a no-op where threads have no priority of their own.
func lowerThreadPriority() {}
