// Package bench holds what the bench commands share.
package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatus returns a memory field of /proc/PID/status (VmRSS, VmHWM)
// in bytes.
func ProcStatus(pid int, key string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}
