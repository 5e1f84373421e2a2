package password

import "syscall"

// lowerThreadPriority sets the calling OS thread to nice 19. On Linux a
// thread id as "who" affects that thread alone. An error leaves the thread
// at normal priority: slower token checks under a flood, nothing worse.
func lowerThreadPriority() {
	syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}
