//go:build linux

package testserver

import "syscall"

// On Linux the redis-servers the tests start die with the test binary.
func init() {
	procAttr = func() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
}
