package main

import (
	"os/signal"
	"syscall"
	"unsafe"
)

// setDeathSignal makes CMD get SIGKILL if the command dies first (killed
// with SIGKILL itself): its holding would run out with nobody to stop CMD.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// foregroundTTY reports whether stdin is a terminal whose foreground
// process group is the command's, and its descriptor.
func foregroundTTY() (int, bool) {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp)))
	return 0, errno == 0 && int(pgrp) == syscall.Getpgrp()
}

// takeTerminal makes the command's process group the foreground group of
// the terminal fd again. A process of a background group may do so only
// while it ignores SIGTTOU.
func takeTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}
