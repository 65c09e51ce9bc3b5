package atomicredis_test

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

func Example_lock() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	addr := mr.Addr()
	pool := &redis.Pool{
		MaxIdle:     16, // keep connections: with 0, redigo closes each after one call
		MaxActive:   64,
		Wait:        true, // wait for a free connection rather than fail at once
		IdleTimeout: 5 * time.Minute,
		Dial: func() (redis.Conn, error) {
			return redis.Dial("tcp", addr,
				redis.DialConnectTimeout(2*time.Second),
				redis.DialReadTimeout(10*time.Second), // longer than any blocking read of the engine's
				redis.DialWriteTimeout(2*time.Second))
		},
		TestOnBorrow: func(c redis.Conn, idleSince time.Time) error {
			if time.Since(idleSince) < 30*time.Second {
				return nil // a PING only for a connection idle a while, not one per call
			}
			_, err := c.Do("PING")
			return err
		},
	}
	ctx := context.Background()

	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(context.Background()) // stops watchdogs, waits for clean-ups

	l, err := e.Lock(ctx, "cart:42", atomicredis.LockOptions{TTL: 5 * time.Second, Watchdog: true})
	if errors.Is(err, atomicredis.ErrNotAcquired) {
		fmt.Println("busy: another request holds cart 42")
		return
	}
	if err != nil {
		fmt.Println("no lock:", err) // Redis unreachable, or ctx ended: not "busy"
		return
	}
	defer l.Unlock(ctx)           // runs even if ctx is done by then
	ctx, cancel := l.Context(ctx) // ends if the lock is lost
	defer cancel()
	// Hand Fence and Token to the guarded store with the write (see
	// docs/locks.md): a name's first fence is the server's clock in microseconds,
	// each later one the last plus one.
	fmt.Println("fence of 16 digits:", len(fmt.Sprint(l.Fence())) == 16, ctx.Err() == nil)
	// Output: fence of 16 digits: true true
}

func Example_autocomplete() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()
	e := atomicredis.New(pool)

	// Recent contacts (the book's list): exact matches, then prefixes, then
	// the rest that contain the query; ASCII case ignored; newest first in each.
	for _, c := range []string{"alice", "Bob", "Albert"} {
		e.AddRecent(ctx, "user:7", c)
	}
	recent, _ := e.SuggestRecent(ctx, "user:7", "al", 10)
	fmt.Println(recent)

	// A guild's members (the book's sorted set): exact bytes, byte order.
	e.AddMembers(ctx, "guild:9", "abc", "abb{", "ab{", "abd", "b")
	names, _ := e.Suggest(ctx, "guild:9", "ab", 10)
	fmt.Printf("%q\n", names)
	// Output:
	// [Albert alice]
	// ["abb{" "abc" "abd" "ab{"]
}

func Example_activity() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()
	e := atomicredis.New(pool)

	e.MarkActive(ctx, "logins", "2026-11-20", 42)
	e.MarkActive(ctx, "logins", "2026-11-21", 42)
	e.MarkActive(ctx, "logins", "2026-11-21", 7)
	today, _ := e.IsActive(ctx, "logins", "2026-11-21", 7)
	either, _ := e.CountActive(ctx, "logins", "2026-11-20", "2026-11-21")
	both, _ := e.CountActiveAll(ctx, "logins", "2026-11-20", "2026-11-21")
	fmt.Println(today, either, both)
	// Output: true 2 1
}

// waitBuckets are the upper bounds of the wait-time histogram.
var waitBuckets = []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second}

// Example_metrics turns the engine's events into expvar counters (by
// object and event) and a histogram of how long acquisitions waited, with
// the standard library only; /debug/vars serves them.
func Example_metrics() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 16, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()

	events := expvar.NewMap("atomicredis_events")       // "lock acquired" -> count
	waited := expvar.NewMap("atomicredis_wait_seconds") // "le_0.01" -> count, cumulative
	e := atomicredis.New(pool, atomicredis.WithObserver(func(ev atomicredis.Event) {
		events.Add(ev.Object+" "+ev.Type.String(), 1) // quick: no I/O, no locks held long
		if ev.Type == atomicredis.EventAcquired {
			for _, b := range waitBuckets {
				if ev.Wait <= b {
					waited.Add(fmt.Sprintf("le_%g", b.Seconds()), 1)
				}
			}
			waited.Add("count", 1)
		}
	}))
	defer e.Close(ctx)

	l, _ := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{})
	e.TryLock(ctx, "invoice:42", atomicredis.LockOptions{}) // refused while held: counted as "lock not acquired"
	l.Unlock(ctx)
	fmt.Println(events.Get("lock acquired"), events.Get("lock not acquired"), events.Get("lock released"), waited.Get("count"))
	// Output: 1 1 1 1
}

// slowCalls is a Hook that logs each call slower than a limit, with the
// request's id from its context: what a tracer does with spans.
type slowCalls struct{ limit time.Duration }

type requestID struct{}

func (h slowCalls) Start(ctx context.Context, op atomicredis.Operation) context.Context {
	return ctx // a tracer returns the context of the span it starts
}

func (h slowCalls) End(ctx context.Context, op atomicredis.Operation, ev atomicredis.Event) {
	if ev.Wait >= h.limit {
		fmt.Printf("request %v: %s %q took %v or more: %v\n", ctx.Value(requestID{}), op.Method, op.Name, h.limit, ev.Type)
	}
}

// ExampleWithHook: a Hook sees each call with the caller's context, as a
// tracer needs (the module atomicredisotel is one).
func ExampleWithHook() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 16, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	e := atomicredis.New(pool, atomicredis.WithHook(slowCalls{limit: 50 * time.Millisecond}))
	defer e.Close(context.Background())

	ctx := context.WithValue(context.Background(), requestID{}, "r-7")
	l, _ := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{})
	_, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{Wait: 100 * time.Millisecond}) // waits, then gives up
	fmt.Println(errors.Is(err, atomicredis.ErrNotAcquired))
	l.Unlock(ctx)
	// Output:
	// request r-7: Lock "invoice:42" took 50ms or more: not acquired
	// true
}

// Ping at startup: a rejected option, an unreachable server, a script the
// user may not load or a wake channel it may not publish on shows here,
// not in the first request.
func ExampleEngine_Ping() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 4, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()

	bad := atomicredis.New(pool, atomicredis.WithReplicaAck(1, 10*time.Second)) // not shorter than the 5 s call timeout
	fmt.Println(errors.Is(bad.Ping(ctx), atomicredis.ErrInvalid))

	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(ctx)
	if err := e.Ping(ctx); err != nil {
		fmt.Println("not ready:", err)
		return
	}
	fmt.Println("ready")
	// Output:
	// true
	// ready
}
