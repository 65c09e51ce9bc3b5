// Command atomicredis runs a command while it holds a lock, a semaphore's
// permit or an election's leadership on Redis, as flock(1), consul lock
// and etcdctl lock / elect do, for shell scripts and cron jobs; and it
// reads and changes those objects for an operator.
//
//	atomicredis lock [flags] NAME -- CMD [ARGS]
//	atomicredis semaphore -limit N [flags] NAME -- CMD [ARGS]
//	atomicredis elect [flags] NAME -- CMD [ARGS]
//	atomicredis leader [-watch] [-json] NAME
//	atomicredis info [-json] NAME
//	atomicredis unlock -force NAME
//	atomicredis limit NAME N
//
// CMD runs while the holding lasts, with the lease extended every third of
// -ttl. The command forwards SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1 and
// SIGUSR2 to CMD and exits with CMD's status (128+n when signal n ended
// it). If the holding is lost while CMD runs (found at the next extension,
// a third of -ttl), CMD gets SIGTERM, and SIGKILL after -grace; the
// command then exits 79. Run atomicredis -help for every flag and exit
// code.
//
// Install it with
//
//	go install github.com/atomicredis/atomicredis/cmd/atomicredis@latest
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// The exit codes of the command's own (sysexits.h's where one fits); any
// other status is CMD's.
const (
	exitNoLeader    = 1   // leader: the election has no leader
	exitUsage       = 64  // EX_USAGE: bad flags or arguments
	exitUnavailable = 69  // EX_UNAVAILABLE: Redis unreachable, or it refused a call
	exitTempFail    = 75  // EX_TEMPFAIL: not acquired within -wait (at once with -n)
	exitLost        = 79  // the holding was lost while CMD ran
	exitCannotRun   = 126 // CMD was found but could not be started
	exitNotFound    = 127 // CMD was not found
)

// ownCodes are the codes a CMD may exit with that the command also
// exits with for a reason of its own: when CMD's status is one of them,
// the command says on stderr that it was CMD's.
var ownCodes = map[int]string{
	exitUsage:       "bad usage",
	exitUnavailable: "Redis unavailable",
	exitTempFail:    "not acquired",
	exitLost:        "holding lost",
	exitCannotRun:   "CMD could not be started",
	exitNotFound:    "CMD not found",
}

const usageText = `atomicredis runs a command while it holds a lock, a semaphore's permit or
an election's leadership on Redis, and reads and changes those objects.

Usage:

  atomicredis lock [flags] NAME -- CMD [ARGS]
	Run CMD while holding the lock NAME: at most one holder at a time.
  atomicredis semaphore -limit N [flags] NAME -- CMD [ARGS]
	Run CMD while holding a permit of the semaphore NAME: at most N at once
	(-weight W takes W of them).
  atomicredis elect [flags] NAME -- CMD [ARGS]
	Campaign in the election NAME with -value (default host:pid) and run
	CMD once elected, while leader; CMD's end resigns.
  atomicredis leader [-watch] [-json] NAME
	Print the election's leader on a line: value, term and remaining
	lease, separated by tabs; or "no leader" (exit 1). -watch prints the
	state, then every change, until a signal ends it.
  atomicredis info [-json] NAME
	Print the lock NAME and the semaphore NAME: holders, owners, fences,
	leases, waiters, the semaphore's limit.
  atomicredis unlock -force NAME
	Free the lock NAME whoever holds it (a stuck holder); its command is
	stopped at its next extension.
  atomicredis limit NAME N
	Store N as the semaphore NAME's limit, also while permits are held.

Run atomicredis COMMAND -help for a command's flags.

Without -wait, lock, semaphore and elect wait until they hold, as flock
does; -wait D gives up after D (exit 75); -n tries once (lock, semaphore).
While CMD runs, the lease (-ttl, default 10s) is extended every third of
it. SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1 and SIGUSR2 are forwarded
to CMD, which runs in a process group of its own (given the terminal
when atomicredis has it; Ctrl-Z then stops CMD alone, which keeps the
holding: resume it with kill -CONT). If the holding is lost while CMD runs
(another took it, unlock -force, Redis unreachable until the lease ran
out), it is found at the next extension: CMD's process group gets SIGTERM,
and SIGKILL after -grace (default 10s). When CMD ends, the holding is
released. CMD gets ATOMICREDIS_FENCE (the holding's fence; for elect, the
term) and ATOMICREDIS_TOKEN in its environment: pass them to what it
writes, so that a store can refuse a holder that lost its lock.

At most one holder at a time: a cron job on many hosts runs once per
firing only if each host's run holds the lock for the job's whole length
(a firing on another host after the lock was released runs it again).

Common flags:

  -addr host:port   Redis (default $REDIS_ADDR, else localhost:6379; a path
                    starting with / is a Unix socket)
  -user name        the ACL user; the password is read from $REDIS_PASSWORD
                    only, never from a flag
  -namespace ns     the key prefix the applications use (atomicredis.WithNamespace)

Exit status:

  CMD's status         CMD ran and ended, the holding kept; 128+n when
                       signal n ended CMD, or ended atomicredis while it
                       waited (CMD not run)
  0                    an admin command succeeded
  1                    leader: the election has no leader
  64  EX_USAGE         bad flags or arguments (a bad name, -weight above
                       the semaphore's limit)
  69  EX_UNAVAILABLE   Redis unreachable, or it refused a call (auth, ACL)
  75  EX_TEMPFAIL      not acquired within -wait (at once with -n); CMD
                       not run
  79                   the holding was lost while CMD ran (or found lost
                       when released after CMD ended): CMD was stopped, or
                       ran unguarded at its end
  126, 127             CMD could not be started, or was not found

When CMD itself exits 64, 69, 75, 79, 126 or 127, atomicredis says so on
stderr.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// A command is one subcommand: its name and what runs it.
type command struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"lock", runLock},
	{"semaphore", runSemaphore},
	{"elect", runElect},
	{"leader", runLeader},
	{"info", runInfo},
	{"unlock", runUnlock},
	{"limit", runLimit},
}

// run runs the subcommand args names and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "atomicredis: flags go after the command (atomicredis COMMAND [flags] ...), found %s first\n", args[0])
	} else {
		fmt.Fprintf(stderr, "atomicredis: unknown command %q (run atomicredis -help)\n", args[0])
	}
	return exitUsage
}

// usageError is an error in the command line: exit 64.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

// usagef is an error in the command line.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}
