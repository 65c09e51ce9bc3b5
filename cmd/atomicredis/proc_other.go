//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// forwarded are the signals passed on to CMD.
var forwarded = []os.Signal{os.Interrupt}

// group is CMD, outside Unix: it has no process group of its own.
type group struct{ cmd *exec.Cmd }

func newGroup(cmd *exec.Cmd) *group { return &group{cmd: cmd} }

// signal sends s to CMD; a termination that cannot be sent kills it.
func (g *group) signal(s os.Signal) error {
	if err := g.cmd.Process.Signal(s); err != nil && s != os.Interrupt {
		return g.cmd.Process.Kill()
	}
	return nil
}

func (g *group) ended() {}
