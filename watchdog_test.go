package atomicredis

// The watchdog's end: Unlock stops it before it returns. Its extensions are
// tested with the locks (engine_test.go).

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// Unlock stops the watchdog itself, before it returns: the goroutine is
// gone at once (not at its next wake-up, when an extension would find the lock
// gone) and no extension is sent afterwards.
func TestUnlockStopsWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		pool := &countingPool{Pool: s.Pool}
		e := New(pool, WithNamespace(s.NS))
		waitWatchdogs(t, 0)
		if t.Failed() {
			t.Fatal("another test left a watchdog running")
		}

		// A 30s lease: the watchdog next wakes after 10s, so only Unlock can
		// end it within waitWatchdogs' two seconds.
		long, err := e.TryLock(ctx, "long", LockOptions{TTL: 30 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		waitWatchdogs(t, 1)
		if err := long.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		waitWatchdogs(t, 0)

		// A 300ms lease extends every 100ms: after Unlock, nothing is sent.
		short, err := e.TryLock(ctx, "short", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		taken := pool.gets.Load()
		for deadline := time.Now().Add(2 * time.Second); pool.gets.Load() == taken; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no extension in 2s (one is due every 100ms): the watchdog is not running, the test is blind")
			}
		}
		if err := short.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		unlocked := pool.gets.Load()
		time.Sleep(400 * time.Millisecond) // four extension periods
		if n := pool.gets.Load() - unlocked; n != 0 {
			t.Errorf("%d calls sent after Unlock returned, want none", n)
		}
		waitWatchdogs(t, 0)

		// A new holder's short lease runs out on time: nothing extends it.
		next, err := e.TryLock(ctx, "short", LockOptions{TTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Advance(250 * time.Millisecond)
		if held, err := next.Held(ctx); held || err != nil {
			t.Errorf("the next holder's 200ms lease after 250ms: Held = %v, %v", held, err)
		}
	})
}

// gatedPool holds back the first connection asked for once armed, until
// the gate opens, and counts the connections it gives after it opened.
type gatedPool struct {
	*redis.Pool
	armed   atomic.Bool
	held    chan struct{} // closed when a Get is held at the gate
	gate    chan struct{} // closed to let it through
	through atomic.Int64  // Gets returned since the gate opened
}

func (p *gatedPool) GetContext(ctx context.Context) (redis.Conn, error) {
	if p.armed.CompareAndSwap(true, false) {
		close(p.held)
		<-p.gate
	}
	select {
	case <-p.gate:
		p.through.Add(1)
	default:
	}
	return p.Pool.GetContext(ctx)
}

// An extension the renewer has taken up but not yet sent when Unlock
// runs is either not sent, or sent and answered before Unlock returns:
// never sent after it. The gate holds the renewer's connection back while
// Unlock runs (a slow pool, a busy machine).
func TestUnlockWaitsForAnExtensionOnItsWay(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		pool := &gatedPool{Pool: s.Pool, held: make(chan struct{}), gate: make(chan struct{})}
		e := New(pool, WithNamespace(s.NS))
		defer e.Close(ctx)
		l, err := e.TryLock(ctx, "gated", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		pool.armed.Store(true) // the renewer's next extension, due in 100ms
		select {
		case <-pool.held:
		case <-time.After(2 * time.Second):
			t.Fatal("no extension in 2s (one is due every 100ms): the test is blind")
		}
		unlocked := make(chan int64, 1)
		go func() {
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
			unlocked <- pool.through.Load()
		}()
		time.Sleep(50 * time.Millisecond) // Unlock runs while the extension waits
		close(pool.gate)
		at := <-unlocked
		time.Sleep(100 * time.Millisecond)
		if n := pool.through.Load() - at; n != 0 {
			t.Errorf("%d connections taken after Unlock returned (the held extension sent after it), want none", n)
		}
	})
}

// Without a watchdog, Context ends a tenth of the lease before the lease
// would end by the client's clock, counted from when the granting call
// (or the Extend) was sent: that tenth is the margin for the client's
// clock, so the guarded work stops before the next holder can start.
// Permits likewise.
func TestContextEndsATenthBeforeTheLease(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		check := func(what string, lease time.Duration, before, after time.Time, c context.Context) {
			t.Helper()
			dl, ok := c.Deadline()
			if want := lease - lease/10; !ok || dl.Before(before.Add(want)) || dl.After(after.Add(want)) {
				t.Errorf("%s: Context ends %v after the call was sent (within %v), want %v: the lease less a tenth", what, dl.Sub(before), after.Sub(before), want)
			}
		}
		const lease = time.Minute
		before := time.Now()
		l, err := e.TryLock(ctx, "ctx", LockOptions{TTL: lease})
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := l.Context(context.Background())
		check("a lock", lease, before, after, c)
		cancel()

		before = time.Now()
		err = l.Extend(ctx, 2*lease)
		after = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		c, cancel = l.Context(context.Background())
		check("a lock after Extend", 2*lease, before, after, c)
		cancel()

		before = time.Now()
		p, err := e.TryAcquireSemaphore(ctx, "ctx", SemaphoreOptions{Limit: 1, TTL: lease})
		after = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		c, cancel = p.Context(context.Background())
		check("a permit", lease, before, after, c)
		cancel()
	})
}

// An Unlock stops the watchdog before it tries the server, so nothing
// extends the lock any more: if the release goes unanswered, the lock's
// Context ends, and Lost closes, when its span (the lease less a tenth)
// runs out after the last extension, while Unlock still tries and after it
// failed, before another can take the name; an election's leadership
// likewise, before the next candidate leads. (Before, they stayed live
// forever.)
func TestFailedUnlockEndsTheHolding(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("needs the fault proxy in front of one server")
		}
		s.Realtime(t)
		ctx := ctxT(t)
		const lease = 600 * time.Millisecond
		for _, kind := range []string{"watchdog lock", "election"} {
			proxy := startProxy(t, s.Addr, faults{})
			a := New(newPool(t, proxy.addr()), WithNamespace(s.NS), WithCallTimeout(200*time.Millisecond))
			b := engine(s)
			take := func(e *Engine, value string) (*Lock, error) {
				if kind == "election" {
					return e.Election("lapse", LockOptions{TTL: lease}).Campaign(ctx, value)
				}
				return e.Lock(ctx, "lapse", LockOptions{TTL: lease, Watchdog: true, Wait: 5 * time.Second})
			}
			l, err := take(a, "a")
			if err != nil {
				t.Fatal(kind, err)
			}
			work, cancel := l.Context(ctx)
			sent := time.Now() // the span counts from when the extension was sent, not answered
			if err := l.Extend(ctx, lease); err != nil {
				t.Fatal(kind, err)
			}
			proxy.refuse.Store(true)
			proxy.cutAll()
			unlocked := make(chan error, 1)
			go func() { unlocked <- l.Unlock(context.Background()) }() // it tries for ReleaseTimeout, past the span
			select {
			case <-work.Done():
				if took, span := time.Since(sent), lease-lease/10; took < span-50*time.Millisecond {
					t.Errorf("%s: Context ended %v after the last extension, before its span %v", kind, took, span)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: Context still live 5 s after a failed Unlock (lease %v)", kind, lease)
			}
			if !errors.Is(context.Cause(work), ErrNotHeld) {
				t.Errorf("%s: cause %v, want ErrNotHeld", kind, context.Cause(work))
			}
			select {
			case <-l.Lost():
			default:
				t.Errorf("%s: Lost still open after the Context ended", kind)
			}
			if err := <-unlocked; err == nil {
				t.Errorf("%s: Unlock through a refusing proxy succeeded", kind)
			}
			lb, err := take(b, "b")
			if err != nil {
				t.Fatal(kind, err)
			}
			if lb.Fence() <= l.Fence() {
				t.Errorf("%s: the next holder's fence %d is not above %d", kind, lb.Fence(), l.Fence())
			}
			lb.Unlock(ctx)
			cancel()
			a.Close(ctx)
			b.Close(ctx)
		}
	})
}

// A watchdog whose extensions keep failing declares the lock lost when its
// span runs out after the last extension (the lease less a tenth, counted
// from when that extension was sent), not at a retry past it: refused
// connections fail each try at once; a server that answers too late fails
// each at the call's timeout.
func TestWatchdogLosesAtItsSpan(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("needs the fault proxy in front of one server")
		}
		s.Realtime(t)
		ctx := ctxT(t)
		const lease = 3 * time.Second // retries a tenth of the lease apart went up to a tenth past the span
		for _, slow := range []bool{false, true} {
			t.Run(fmt.Sprint("slow=", slow), func(t *testing.T) {
				testserver.Parallel(t) // both wait out a span; each has its proxy, engine and name
				proxy := startProxy(t, s.Addr, faults{})
				opts := []Option{WithNamespace(s.NS)}
				if slow {
					opts = append(opts, WithCallTimeout(700*time.Millisecond))
				}
				e := New(newPool(t, proxy.addr()), opts...)
				t.Cleanup(func() { e.Close(context.Background()) }) // after a Fatal too
				l, err := e.TryLock(ctx, fmt.Sprint("span-", slow), LockOptions{TTL: lease, Watchdog: true})
				if err != nil {
					t.Fatal(err)
				}
				work, cancel := l.Context(ctx)
				sent := time.Now()
				if err := l.Extend(ctx, lease); err != nil {
					t.Fatal(err)
				}
				if slow {
					proxy.lag.Store(int64(2 * time.Second)) // past every call's timeout
				} else {
					proxy.refuse.Store(true)
					proxy.cutAll()
				}
				<-work.Done()
				if took, span := time.Since(sent), lease-lease/10; took > span+60*time.Millisecond {
					t.Errorf("slow %v: lost %v after the last extension was sent, past its span %v (lease %v)", slow, took.Round(time.Millisecond), span, lease)
				}
				cancel()
				proxy.lag.Store(0)
				proxy.refuse.Store(false)
			})
		}
	})
}
