package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/atomicredis/atomicredis"
)

// forever is the wait of a lock or semaphore run without -wait: as
// flock(1), it waits until it holds or a signal ends it.
const forever = 100 * 365 * 24 * time.Hour

// holdFlags are the flags of the subcommands that run CMD while holding.
type holdFlags struct {
	ttl, grace time.Duration
	wait       waitFlag
	once       bool   // -n
	owner      string // -owner, or elect's -value
	quiet      bool
	campaign   bool // elect: no -n, and -wait must be above 0
}

// register adds the flags to c's; once: the holding can be tried once
// (-n), as a lock or a permit can and a campaign cannot.
func (h *holdFlags) register(c *cli, once bool, ownerFlag, ownerText string) {
	c.fs.DurationVar(&h.ttl, "ttl", atomicredis.DefaultTTL, "the lease `D`, extended every third of it while CMD runs: a loss is found within a third")
	waitText := "wait at most `D` to acquire, then exit 75 (default: no limit; 0: try once, as -n)"
	if !once {
		waitText = "wait at most `D` to lead, then exit 75 (default: no limit)"
	}
	c.fs.Var(&h.wait, "wait", waitText)
	c.fs.DurationVar(&h.grace, "grace", 10*time.Second, "after a loss, how long `D` CMD has from SIGTERM to SIGKILL")
	c.fs.BoolVar(&h.quiet, "q", false, "say nothing when not acquired (exit 75 all the same)")
	h.campaign = !once
	if once {
		c.fs.BoolVar(&h.once, "n", false, "try once: exit 75 at once if another holds it (as flock -n)")
	}
	c.fs.StringVar(&h.owner, ownerFlag, "", ownerText+" (default host:pid)")
}

// check refuses what the flags cannot mean, and fills in the owner
// (host:pid) when none was given.
func (h *holdFlags) check() error {
	if h.owner == "" {
		h.owner = hostPID()
	}
	if h.grace < 0 {
		return usagef("-grace %v: must not be negative", h.grace)
	}
	if h.campaign && h.wait.set && h.wait.d == 0 {
		return usagef("-wait 0: a campaign cannot try once; give it a time to wait")
	}
	if h.once && h.wait.set && h.wait.d > 0 {
		return usagef("-n and -wait %v: -n tries once, -wait waits", h.wait.d)
	}
	return nil
}

// tryOnce reports whether the acquisition makes one attempt.
func (h *holdFlags) tryOnce() bool { return h.once || h.wait.set && h.wait.d == 0 }

// waitFor is how long an acquisition that waits may wait.
func (h *holdFlags) waitFor() time.Duration {
	if h.wait.set {
		return h.wait.d
	}
	return forever
}

// waitFlag is -wait: a duration, and whether it was given.
type waitFlag struct {
	d   time.Duration
	set bool
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return ""
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	w.d, w.set = d, true
	return nil
}

// hostPID is the default owner and candidate value: host:pid.
func hostPID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// nameAndCommand splits NAME -- CMD [ARGS].
func nameAndCommand(args []string) (string, []string, error) {
	switch {
	case len(args) == 0:
		return "", nil, usagef("no NAME")
	case len(args) > 1 && args[1] != "--" && strings.HasPrefix(args[1], "-"):
		return "", nil, usagef("%s after NAME: flags go before NAME", args[1])
	case len(args) < 2 || args[1] != "--":
		return "", nil, usagef("want NAME -- CMD [ARGS]: no -- after NAME")
	case len(args) == 2:
		return "", nil, usagef("no CMD after --")
	}
	return args[0], args[2:], nil
}

// held is a holding CMD runs under: a lock, a permit or a leadership.
type held struct {
	what    string // `lock "x"`, for messages
	fence   int64
	token   string
	ctx     context.Context // the holding's Context: done when it is lost (or released), context.Cause says why
	stop    context.CancelFunc
	release func(ctx context.Context) error
}

func lockHeld(what string, l *atomicredis.Lock) *held {
	ctx, stop := l.Context(context.Background())
	return &held{what: what, fence: l.Fence(), token: l.Token(), ctx: ctx, stop: stop, release: l.Unlock}
}

func runLock(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("lock", "atomicredis lock [flags] NAME -- CMD [ARGS]", stdout, stderr)
	var h holdFlags
	h.register(c, true, "owner", "the `owner` stored with the lock, for info to show")
	return c.holdRun(ctx, &h, args, func(ctx context.Context, e *atomicredis.Engine, name string) (*held, error) {
		o := atomicredis.LockOptions{TTL: h.ttl, Wait: h.waitFor(), Watchdog: true, Owner: h.owner}
		acquire := e.Lock
		if h.tryOnce() {
			acquire = e.TryLock
		}
		l, err := acquire(ctx, name, o)
		if errors.Is(err, atomicredis.ErrNotAcquired) && ctx.Err() == nil {
			return nil, withHolder(ctx, e, name, err)
		}
		if err != nil {
			return nil, err
		}
		return lockHeld(fmt.Sprintf("lock %q", name), l), nil
	})
}

// withHolder adds to a lock's not-acquired error who holds it, if a
// LockInfo says so in time.
func withHolder(ctx context.Context, e *atomicredis.Engine, name string, err error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, ierr := e.LockInfo(ctx, name)
	if ierr != nil || !info.Held {
		return err
	}
	return fmt.Errorf("%w: held by %q, fence %d", err, info.Owner, info.Fence)
}

func runSemaphore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("semaphore", "atomicredis semaphore -limit N [flags] NAME -- CMD [ARGS]", stdout, stderr)
	var h holdFlags
	h.register(c, true, "owner", "the `owner` stored with the permit, for info to show")
	limit := c.fs.Int("limit", 0, "the semaphore's limit `N`; a stored limit rules (0: the stored one)")
	weight := c.fs.Int("weight", 1, "how much of the limit the permit takes")
	return c.holdRun(ctx, &h, args, func(ctx context.Context, e *atomicredis.Engine, name string) (*held, error) {
		o := atomicredis.SemaphoreOptions{Limit: *limit, TTL: h.ttl, Wait: h.waitFor(), Watchdog: true, Owner: h.owner, Weight: *weight}
		acquire := e.AcquireSemaphore
		if h.tryOnce() {
			acquire = e.TryAcquireSemaphore
		}
		p, err := acquire(ctx, name, o)
		if err != nil {
			return nil, err
		}
		ctx, stop := p.Context(context.Background())
		return &held{what: fmt.Sprintf("permit of semaphore %q", name), fence: p.Fence(), token: p.Token(),
			ctx: ctx, stop: stop, release: p.Release}, nil
	})
}

func runElect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("elect", "atomicredis elect [flags] NAME -- CMD [ARGS]", stdout, stderr)
	var h holdFlags
	h.register(c, false, "value", "the leader's `value` while this candidate leads (leader prints it)")
	return c.holdRun(ctx, &h, args, func(ctx context.Context, e *atomicredis.Engine, name string) (*held, error) {
		if h.wait.set {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, h.wait.d)
			defer cancel()
		}
		l, err := e.Election(name, atomicredis.ElectionOptions{TTL: h.ttl}).Campaign(ctx, h.owner)
		if err != nil {
			return nil, err
		}
		return lockHeld(fmt.Sprintf("leadership of election %q", name), l), nil
	})
}

// holdRun parses a holding subcommand's arguments, takes the holding,
// runs CMD under it and returns the exit status.
func (c *cli) holdRun(ctx context.Context, h *holdFlags, args []string, acquire func(context.Context, *atomicredis.Engine, string) (*held, error)) int {
	if code, ok := c.parse(args); !ok {
		return code
	}
	name, argv, err := nameAndCommand(c.fs.Args())
	if err == nil {
		err = h.check()
	}
	if err != nil {
		return c.fail(err)
	}
	// Signals are caught from here on: one that comes while the command
	// waits ends the wait, and CMD never runs.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	code, sig, err := c.underHolding(ctx, sigs,
		func(ctx context.Context, e *atomicredis.Engine) (*held, error) { return acquire(ctx, e, name) },
		func(got *held) int { return c.runHeld(got, argv, h.grace, sigs) })
	switch {
	case sig != nil:
		if !h.quiet {
			fmt.Fprintf(c.stderr, "atomicredis %s: %v before CMD ran\n", c.name, sig)
		}
		return signalStatus(sig)
	case err != nil && exitCode(err) == exitTempFail && h.quiet:
		return exitTempFail
	case err != nil:
		return c.fail(err)
	}
	return code
}

// underHolding reaches Redis, takes the holding with take and runs CMD
// under it with run, which returns the exit status. A signal that comes
// before CMD starts ends the wait (sig: which), and CMD does not run.
func (c *cli) underHolding(ctx context.Context, sigs <-chan os.Signal,
	take func(context.Context, *atomicredis.Engine) (*held, error), run func(*held) int) (code int, sig os.Signal, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case sig = <-sigs:
			cancel()
		case <-stop:
		}
	}()
	e, closeEngine, err := c.engine(ctx)
	var h *held
	if err == nil {
		defer closeEngine()
		h, err = take(ctx, e)
	}
	close(stop)
	<-stopped
	if sig == nil {
		select { // a signal between the grant and now: CMD does not start
		case sig = <-sigs:
		default:
		}
	}
	switch {
	case sig != nil:
		if h != nil {
			c.release(h)
		}
		return 0, sig, nil
	case err != nil:
		return 0, nil, err
	}
	return run(h), nil, nil
}
