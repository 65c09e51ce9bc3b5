package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/atomicredis/atomicredis"
)

// releaseWait bounds the release after CMD: the library's Unlock and
// Release bound their own attempt by ReleaseTimeout; this is the ctx's.
const releaseWait = 5 * time.Second

// runHeld runs argv while h is held, and releases h when it ends. It
// forwards sigs to CMD's process group; when h is lost, it sends the group
// SIGTERM, and SIGKILL after grace. It returns CMD's status (128+n when
// signal n ended it), or exitLost when h was lost while CMD ran.
func (c *cli) runHeld(h *held, argv []string, grace time.Duration, sigs <-chan os.Signal) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"ATOMICREDIS_FENCE="+strconv.FormatInt(h.fence, 10),
		"ATOMICREDIS_TOKEN="+h.token)
	g := newGroup(cmd)
	// Linux sends CMD SIGKILL when the thread that started it ends (the
	// parent-death signal, should this process be killed): keep it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		g.ended() // a child that failed to exec may have taken the terminal
		c.release(h)
		fmt.Fprintf(c.stderr, "atomicredis %s: %v\n", c.name, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	lost, killed := c.supervise(h, g, grace, sigs, done)
	g.ended()
	var relErr error
	if lost { // nothing to release, and Redis may be unreachable
		h.stop()
	} else {
		relErr = c.release(h)
	}
	if cmd.ProcessState == nil { // Wait failed before CMD ended: no status to give
		fmt.Fprintf(c.stderr, "atomicredis %s: waiting for CMD: %v\n", c.name, waitErr)
		return exitCannotRun
	}
	status := exitStatus(cmd.ProcessState)
	switch {
	case lost:
		fmt.Fprintf(c.stderr, "atomicredis %s: %s was lost while CMD ran; CMD ended (%v)%s\n", c.name, h.what, cmd.ProcessState, killed)
		return exitLost
	case errors.Is(relErr, atomicredis.ErrNotHeld):
		fmt.Fprintf(c.stderr, "atomicredis %s: %s was found lost when released after CMD ended (%v): CMD may have run unguarded at its end\n", c.name, h.what, cmd.ProcessState)
		return exitLost
	}
	if what, ok := ownCodes[status]; ok {
		fmt.Fprintf(c.stderr, "atomicredis %s: CMD exited %d: its own status, not atomicredis's %q\n", c.name, status, what)
	}
	return status
}

// supervise waits for CMD's end (done), forwarding signals, and stops CMD
// when h is lost. It reports whether h was lost, and, if CMD had to be
// killed, a note saying so.
func (c *cli) supervise(h *held, g *group, grace time.Duration, sigs <-chan os.Signal, done <-chan struct{}) (lost bool, note string) {
	lostCh := h.ctx.Done()
	kill := time.NewTimer(grace)
	kill.Stop()
	defer kill.Stop()
	var killC <-chan time.Time // kill.C once the holding is lost
	for {
		select {
		case <-done:
			return lost, note
		case s := <-sigs:
			if err := g.signal(s); err != nil {
				fmt.Fprintf(c.stderr, "atomicredis %s: forwarding %v to CMD: %v\n", c.name, s, err)
			}
		case <-lostCh:
			lostCh, lost = nil, true
			fmt.Fprintf(c.stderr, "atomicredis %s: %s lost while CMD runs (%v): SIGTERM to CMD, SIGKILL in %v\n",
				c.name, h.what, context.Cause(h.ctx), grace)
			g.signal(syscall.SIGTERM)
			kill.Reset(grace)
			killC = kill.C
		case <-killC:
			killC, note = nil, fmt.Sprintf(", killed after %v", grace)
			fmt.Fprintf(c.stderr, "atomicredis %s: CMD still runs %v after SIGTERM: SIGKILL\n", c.name, grace)
			g.signal(syscall.SIGKILL)
		}
	}
}

// release releases h within releaseWait, says on stderr why not, and
// returns the error.
func (c *cli) release(h *held) error {
	defer h.stop()
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	err := h.release(ctx)
	if err != nil && !errors.Is(err, atomicredis.ErrNotHeld) {
		fmt.Fprintf(c.stderr, "atomicredis %s: releasing the %s: %v (its lease runs out by itself)\n", c.name, h.what, err)
	}
	return err
}

// exitStatus is a process's exit status as a shell gives it: 128+n when
// signal n ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalStatus is the exit status of a process ended by s: 128+n.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 128 + 2
}
