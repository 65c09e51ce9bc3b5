//go:build unix

package bench

import "syscall"

// processCPU is this process's CPU time so far, user and system, in
// seconds: the clients' side of a round, the benchmark's own small share
// included.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
