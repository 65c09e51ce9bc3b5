//go:build linux

package atomicredis

import "syscall"

// On Linux a private cluster's redis-servers die with the test binary, even
// when a timeout panic skips t.Cleanup.
func init() {
	childAttr = func() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
}
