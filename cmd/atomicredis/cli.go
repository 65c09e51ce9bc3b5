package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

// Bounds of the command's own calls: reaching Redis at the start, and
// closing the engine at the end (the release of a holding is bounded by
// the library's ReleaseTimeout).
const (
	dialTimeout  = 5 * time.Second
	closeTimeout = 2 * time.Second
	observeEvery = 5 * time.Second // observe's pace
)

// cli is one run of a subcommand: its flags, the ones every subcommand
// takes among them, and where it writes.
type cli struct {
	name     string // "lock"
	synopsis string // "atomicredis lock [flags] NAME -- CMD [ARGS]"
	fs       *flag.FlagSet
	stdout   io.Writer
	stderr   io.Writer // safe for the engine's observer, which writes from its own goroutines

	addr, user, namespace string

	closing atomic.Bool // the engine's Close began

	toldMu sync.Mutex
	told   map[atomicredis.EventType]time.Time // when observe last printed an event of each type
}

func newCLI(name, synopsis string, stdout, stderr io.Writer) *cli {
	c := &cli{name: name, synopsis: synopsis, stdout: stdout, stderr: &lockedWriter{w: stderr},
		fs: flag.NewFlagSet("atomicredis "+name, flag.ContinueOnError)}
	c.fs.SetOutput(io.Discard) // parse's errors are printed by parse, the usage by usage
	c.fs.StringVar(&c.addr, "addr", cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379"),
		"Redis at `host:port`, or a Unix socket's path ($REDIS_ADDR if set)")
	c.fs.StringVar(&c.user, "user", "", "the ACL `user` (the password is read from $REDIS_PASSWORD only)")
	c.fs.StringVar(&c.namespace, "namespace", "", "the key `prefix` of the applications' engines (atomicredis.WithNamespace)")
	return c
}

// parse parses args. ok false: the run ends with code (0 after -help, 64
// after bad flags).
func (c *cli) parse(args []string) (code int, ok bool) {
	err := c.fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.usage(c.stdout)
		return 0, false
	case err != nil:
		fmt.Fprintf(c.stderr, "atomicredis %s: %v\nusage: %s (atomicredis %s -help for more)\n", c.name, err, c.synopsis, c.name)
		return exitUsage, false
	}
	return 0, true
}

// usage prints the subcommand's synopsis and flags.
func (c *cli) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\nFlags:\n", c.synopsis)
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
	fmt.Fprintf(w, "\nExit status and the rest: atomicredis -help\n")
}

// fail prints err and returns the exit status it calls for.
func (c *cli) fail(err error) int {
	var u *usageError
	if errors.As(err, &u) {
		fmt.Fprintf(c.stderr, "atomicredis %s: %v\nusage: %s\n", c.name, err, c.synopsis)
		return exitUsage
	}
	fmt.Fprintln(c.stderr, err)
	return exitCode(err)
}

// exitCode is the exit status an error calls for.
func exitCode(err error) int {
	switch {
	case errors.As(err, new(*usageError)), errors.Is(err, atomicredis.ErrInvalid):
		return exitUsage
	case errors.Is(err, atomicredis.ErrNotAcquired):
		return exitTempFail
	case errors.Is(err, atomicredis.ErrNoLeader):
		return exitNoLeader
	}
	return exitUnavailable
}

// engine reaches Redis (one PING, so that an unreachable server is told
// at once, not after a wait) and returns an engine on it, and what closes
// both.
func (c *cli) engine(ctx context.Context) (*atomicredis.Engine, func(), error) {
	network := "tcp"
	if strings.HasPrefix(c.addr, "/") {
		network = "unix"
	}
	opts := []redis.DialOption{
		redis.DialConnectTimeout(dialTimeout),
		redis.DialReadTimeout(10 * time.Second), // longer than any blocking read of the engine's
		redis.DialWriteTimeout(dialTimeout),
	}
	if c.user != "" {
		opts = append(opts, redis.DialUsername(c.user))
	}
	if pw := os.Getenv("REDIS_PASSWORD"); pw != "" {
		opts = append(opts, redis.DialPassword(pw))
	}
	addr := c.addr
	pool := &redis.Pool{MaxIdle: 4, MaxActive: 8, Wait: true, IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, network, addr, opts...)
		}}
	if err := ping(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("atomicredis: Redis at %s: %w", c.addr, err)
	}
	eopts := []atomicredis.Option{atomicredis.WithObserver(c.observe)}
	if c.namespace != "" {
		eopts = append(eopts, atomicredis.WithNamespace(c.namespace))
	}
	e := atomicredis.New(pool, eopts...)
	return e, func() {
		c.closing.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			fmt.Fprintln(c.stderr, err)
		}
		pool.Close()
	}, nil
}

// ping checks that Redis answers, within dialTimeout.
func ping(ctx context.Context, pool *redis.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = redis.DoWithTimeout(conn, dialTimeout, "PING")
	return err
}

// observe prints what the engine did in the background that an operator
// should see: a failed extension (the lease may still hold) and a failed
// abandon or wake-up. A loss is told by the run itself.
// What the engine's Close stops is no news: nothing is told once it
// began. While Redis is unreachable the engine retries every few hundred
// ms: one line of each kind every observeEvery is enough.
func (c *cli) observe(ev atomicredis.Event) {
	if c.closing.Load() || ev.Type != atomicredis.EventExtendFailed && ev.Type != atomicredis.EventBackgroundError {
		return
	}
	c.toldMu.Lock()
	last, now := c.told[ev.Type], time.Now()
	if now.Sub(last) < observeEvery {
		c.toldMu.Unlock()
		return
	}
	if c.told == nil {
		c.told = map[atomicredis.EventType]time.Time{}
	}
	c.told[ev.Type] = now
	c.toldMu.Unlock()
	switch ev.Type {
	case atomicredis.EventExtendFailed:
		fmt.Fprintf(c.stderr, "atomicredis %s: an extension failed, the lease may still hold: %v\n", c.name, ev.Err)
	case atomicredis.EventBackgroundError:
		fmt.Fprintf(c.stderr, "atomicredis %s: %v\n", c.name, ev.Err)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
