package atomicredis

import (
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Tests that each pin one promise which other tests only brushed against,
// so that breaking it fails a test named for it.

// The fence counter and the semaphore counter never expire (the README and
// Fence promise it): a counter that lapsed would hand out fence 1 again.
func TestCountersNeverExpire(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		pttl := func(key string) int64 {
			t.Helper()
			v, err := redis.Int64(s.do("PTTL", key))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		fence, counter := s.ns+"lock:{f}:fence", s.ns+"sem:{f}:counter"
		l, err := e.TryLock(ctx, "f", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got := pttl(fence); got != -1 {
			t.Errorf("PTTL %s after TryLock = %d, want -1 (no expiry)", fence, got)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pttl(fence); got != -1 {
			t.Errorf("PTTL %s after Unlock = %d, want -1", fence, got)
		}
		p, err := e.AcquireSemaphore(ctx, "f", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got := pttl(counter); got != -1 {
			t.Errorf("PTTL %s after AcquireSemaphore = %d, want -1 (no expiry)", counter, got)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pttl(counter); got != -1 {
			t.Errorf("PTTL %s after Release = %d, want -1", counter, got)
		}
	})
}

// An acquire purges a permit at exactly its deadline, as SemaphoreHolders
// does: 1 ms before it the permit still fills the semaphore, at it the
// slot is free. No SemaphoreHolders call in between does the purge for it.
func TestSemaphoreAcquirePurgesAtDeadline(t *testing.T) {
	s := newMini(t)
	ctx, e := ctxT(t), s.engine()
	o := SemaphoreOptions{Limit: 1, TTL: time.Second}
	first, err := e.AcquireSemaphore(ctx, "edge", o)
	if err != nil {
		t.Fatal(err)
	}
	s.advance(999 * time.Millisecond)
	if _, err := e.AcquireSemaphore(ctx, "edge", o); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("1ms before the first permit's deadline: %v, want ErrNotAcquired", err)
	}
	s.advance(time.Millisecond)
	second, err := e.AcquireSemaphore(ctx, "edge", o)
	if err != nil {
		t.Fatalf("at the first permit's deadline: %v, want a permit", err)
	}
	if second.Fence() != first.Fence()+1 {
		t.Errorf("fences %d then %d", first.Fence(), second.Fence())
	}
	if err := first.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of the purged permit: %v, want ErrNotHeld", err)
	}
}

// Unlock stops the watchdog itself, before it returns: the goroutine is
// gone at once (not at its next wake-up, when a renewal would find the lock
// gone) and no renewal is sent afterwards.
func TestUnlockStopsWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		s.realtime(t)
		ctx := ctxT(t)
		pool := &countingPool{Pool: s.pool}
		e := New(pool, WithNamespace(s.ns))
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

		// A 300ms lease renews every 100ms: after Unlock, nothing is sent.
		short, err := e.TryLock(ctx, "short", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		taken := pool.gets.Load()
		time.Sleep(250 * time.Millisecond)
		if pool.gets.Load() == taken {
			t.Fatal("no renewal in 250ms: the watchdog is not running, the test is blind")
		}
		if err := short.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		unlocked := pool.gets.Load()
		time.Sleep(400 * time.Millisecond) // four renewal periods
		if n := pool.gets.Load() - unlocked; n != 0 {
			t.Errorf("%d calls sent after Unlock returned, want none", n)
		}
		waitWatchdogs(t, 0)

		// A new holder's short lease runs out on time: nothing renews it.
		next, err := e.TryLock(ctx, "short", LockOptions{TTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.advance(250 * time.Millisecond)
		if held, err := next.Held(ctx); held || err != nil {
			t.Errorf("the next holder's 200ms lease after 250ms: Held = %v, %v", held, err)
		}
	})
}
