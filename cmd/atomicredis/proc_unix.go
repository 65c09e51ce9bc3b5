//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// forwarded are the signals passed on to CMD: those that would end the
// command, which catches them instead.
var forwarded = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2}

// group is CMD's process group. CMD leads a group of its own, so that a
// signal, and the SIGTERM and SIGKILL of a lost holding, reach every
// process it started, not only the first (a shell script's running
// command). When the command has the terminal (stdin is a terminal whose
// foreground group is the command's), the group is given it, so that CMD
// reads it and the terminal's Ctrl-C reaches CMD, once; the command takes
// it back when CMD ends.
type group struct {
	cmd *exec.Cmd
	tty int // the terminal given to CMD's group; -1: none
}

// newGroup sets cmd, not started yet, to start in a group of its own.
func newGroup(cmd *exec.Cmd) *group {
	g := &group{cmd: cmd, tty: -1}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if fd, ok := foregroundTTY(); ok {
		attr.Foreground, attr.Ctty, g.tty = true, fd, fd
	}
	setDeathSignal(attr)
	cmd.SysProcAttr = attr
	return g
}

// signal sends s to every process of CMD's group; a group already gone
// is no error.
func (g *group) signal(s os.Signal) error {
	n, ok := s.(syscall.Signal)
	if !ok {
		return g.cmd.Process.Signal(s)
	}
	if err := syscall.Kill(-g.cmd.Process.Pid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// ended takes the terminal back, if CMD's group was given it.
func (g *group) ended() {
	if g.tty >= 0 {
		takeTerminal(g.tty)
	}
}
