package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func TestLease_WatchdogExtendChangesLease(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "wx", LockOptions{TTL: 30 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		if err := l.Extend(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(900 * time.Millisecond)
		ttl, err := l.TTL(ctx)
		if err != nil || ttl > 300*time.Millisecond {
			t.Errorf("TTL %v, %v: the watchdog should extend with the new 300ms lease", ttl, err)
		}
	})
}

// Extend must win against a watchdog extension sent before it, however late
// that extension lands: the proxy holds back every command carrying the old
// 600 ms lease for 160 ms, so an extension (sent 200 ms after the acquire was)
// is in flight when Extend(1h) is sent, and lands after it. The server
// must keep the hour.
func TestLease_ExtendBeatsLateExtension(t *testing.T) {
	testserver.Parallel(t) // on miniredis alone: waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		proxy := startProxy(t, s.Addr, faults{holdOn: []byte("\r\n600\r\n"), holdFor: 160 * time.Millisecond})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
		ctx := ctxT(t)
		// The scripts loaded straight, so that no NOSCRIPT doubles a hold.
		warm, err := engine(s).TryLock(ctx, "warm", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		warm.Extend(ctx, time.Minute)
		warm.Unlock(ctx)
		for i := 0; i < 5; i++ {
			l, err := e.TryLock(ctx, "ext", LockOptions{TTL: 600 * time.Millisecond, Watchdog: true})
			if err != nil {
				t.Fatal(err)
			}
			// The TryLock was held back 160 ms; the first extension goes 200 ms
			// after it was sent, and is held back until 360 ms.
			time.Sleep(time.Duration(80+16*i) * time.Millisecond) // an extension is on its way
			if err := l.Extend(ctx, time.Hour); err != nil {
				t.Fatalf("round %d: Extend: %v", i, err)
			}
			time.Sleep(300 * time.Millisecond) // every held extension has landed
			pttl, _ := redis.Int64(s.Do("PTTL", s.NS+"lock:{ext}"))
			if pttl < int64(50*time.Minute/time.Millisecond) {
				t.Fatalf("round %d: PTTL %d ms after Extend(1h) returned: an older extension shortened the lease", i, pttl)
			}
			select {
			case <-l.Lost():
				t.Fatalf("round %d: Lost closed", i)
			default:
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// An extension numbered as the last one applied (a repeat, or a late
// watchdog extension an Extend's number has overtaken) changes nothing: the
// script says it is stale (2) and the lease the applied one set stands.
func TestLease_ExtensionNumberedAsAppliedChangesNothing(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "seq", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Extend(ctx, time.Hour); err != nil { // extension number 1
			t.Fatal(err)
		}
		c := s.Pool.Get()
		defer c.Close()
		v, err := redis.Int64(scriptLockExtend.Do(c, s.NS+"lock:{seq}", l.Token(), time.Second.Milliseconds(), 1))
		if err != nil {
			t.Fatal(err)
		}
		if pttl := s.PTTL(t, s.NS+"lock:{seq}"); v != 2 || pttl < 59*time.Minute {
			t.Errorf("extension 1 with 1s again after Extend(1h) was extension 1: reply %d, lease %v left; want 2 (stale) and the hour", v, pttl)
		}
	})
}

// An Extend that fails (here its ctx is done before it is sent) is not
// counted on: the holding's lease stays the one the server granted, so a
// plain lock's Context ends with it, and a watchdog keeps extending on
// its rhythm. (Before, the new lease became the holding's whatever the
// call's outcome: a plain lock's Context ran 27 s past the server's lease,
// and the watchdog waited 10 s to extend a 1 s lease, which another
// engine then took, while the first holder's Context was still live.)
func TestLease_FailedExtendIsNotCounted(t *testing.T) {
	testserver.Parallel(t) // waits out a lease
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e, other := ctxT(t), engine(s), engine(s)
		for _, watchdog := range []bool{false, true} {
			name := fmt.Sprint("fx-", watchdog)
			start := time.Now()
			l, err := e.TryLock(ctx, name, LockOptions{TTL: time.Second, Watchdog: watchdog})
			if err != nil {
				t.Fatal(err)
			}
			done, cancel := context.WithCancel(ctx)
			cancel()
			if err := l.Extend(done, 30*time.Second); err == nil {
				t.Fatalf("watchdog %v: Extend with a done ctx succeeded", watchdog)
			}
			work, stop := l.Context(ctx)
			if dl, ok := work.Deadline(); !watchdog && (!ok || dl.After(start.Add(time.Second))) {
				t.Errorf("a plain lock's Context ends %v after it was taken, past its 1 s lease", dl.Sub(start).Round(time.Millisecond))
			}
			time.Sleep(1200 * time.Millisecond)
			o, err := other.TryLock(ctx, name, LockOptions{TTL: time.Second})
			if err == nil && work.Err() == nil {
				t.Errorf("watchdog %v: another engine took the lock while the first holder's Context was live", watchdog)
			}
			if watchdog && err == nil {
				t.Errorf("the watchdog let its 1 s lease run out after a failed Extend of 30 s")
			}
			if o != nil {
				o.Unlock(ctx)
			}
			stop()
			l.Unlock(ctx)
		}
	})
}

// Without a watchdog, an Extend that shortens the lease ends the Contexts
// made before it with the new lease (less a tenth). (Before, they kept the
// deadline of the longer lease: 25.8 s after another engine took the
// lock.)
func TestLease_ShorterExtendEndsEarlierContexts(t *testing.T) {
	testserver.Parallel(t) // waits out a lease
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e, other := ctxT(t), engine(s), engine(s)
		l, err := e.TryLock(ctx, "sh", LockOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		work, stop := l.Context(ctx)
		defer stop()
		if err := l.Extend(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1200 * time.Millisecond)
		o, err := other.TryLock(ctx, "sh", LockOptions{TTL: 10 * time.Second})
		if err != nil {
			t.Fatalf("the 1 s lease did not run out: %v", err)
		}
		defer o.Unlock(ctx)
		if work.Err() == nil {
			t.Errorf("another engine holds the lock while the Context made before a shorter Extend is live")
		} else if !errors.Is(context.Cause(work), ErrNotHeld) {
			t.Errorf("the Context's cause %v, want ErrNotHeld", context.Cause(work))
		}
	})
}

// At maxmemory with noeviction, Redis fails a script's first write that
// may grow memory and lets the later ones run: a permit's extension, by
// Extend and by the watchdog's batched renewal, writes PEXPIRE first, as a
// lock's does, so that permits are kept where locks are. (Before, both
// began with ZADD: Extend failed with OOM, and a watchdog's permit was
// lost at its first lease's end.)
func TestLease_ExtendAtMaxmemory(t *testing.T) {
	r := testserver.PrivateRedis(t)
	testserver.Parallel(t)
	ctx := ctxT(t)
	e := New(newPool(t, r.Addr()))
	defer e.Close(ctx)
	lock, err := e.TryLock(ctx, "l", LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 2, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 2, TTL: 600 * time.Millisecond, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("CONFIG", "SET", "maxmemory", 1); err != nil {
		t.Fatal(err)
	}
	defer r.Do("CONFIG", "SET", "maxmemory", 0)
	if _, err := r.Do("SET", "x", "y"); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET at maxmemory 1: %v, want OOM", err)
	}
	if err := lock.Extend(ctx, time.Minute); err != nil {
		t.Errorf("a lock's Extend at maxmemory: %v", err)
	}
	if err := permit.Extend(ctx, time.Minute); err != nil {
		t.Errorf("a permit's Extend at maxmemory: %v", err)
	}
	select {
	case <-kept.Lost():
		t.Errorf("a watchdog's permit lost at maxmemory: %v", kept.Extend(ctx, time.Minute))
	case <-time.After(1500 * time.Millisecond): // 2.5 leases
	}
}

// At maxmemory with noeviction, a flagged lock (here by abandon marks,
// nobody queued, so that nothing is deleted before the lock's HSET) is
// still extended and released by its holder, and another mark written:
// when Redis refuses the HSET, the script first deletes the field it is
// about to write again, a write Redis allows there, and then every write
// after it runs. A waiter's join, which grows the hash, is refused.
func TestLock_FlaggedAtMaxmemory(t *testing.T) {
	r := testserver.PrivateRedis(t)
	testserver.Parallel(t)
	ctx := ctxT(t)
	ns := testNamespace()
	pool := newPool(t, r.Addr())
	e := New(pool, WithNamespace(ns))
	defer e.Close(ctx)
	l, err := e.TryLock(ctx, "full", LockOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := ns + "lock:{full}"
	c := pool.Get()
	defer c.Close()
	if _, err := scriptLockAbandon.Do(c, key, "gone1", time.Minute.Milliseconds(), ns+"wake:"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("CONFIG", "SET", "maxmemory", 1); err != nil {
		t.Fatal(err)
	}
	defer r.Do("CONFIG", "SET", "maxmemory", 0)
	if _, err := r.Do("SET", "x", "y"); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET at maxmemory 1: %v, want OOM", err)
	}
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		t.Errorf("Extend of a flagged lock at maxmemory: %v", err)
	}
	if _, err := scriptLockAbandon.Do(c, key, "gone2", time.Minute.Milliseconds(), ns+"wake:"); err != nil {
		t.Errorf("an abandon mark at maxmemory: %v", err)
	}
	if w, err := e.Lock(ctx, "full", LockOptions{Wait: 200 * time.Millisecond}); err == nil {
		t.Errorf("a waiter joined at maxmemory: %v", w)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock of a flagged lock at maxmemory: %v", err)
	}
	if held, err := l.Held(ctx); held || err != nil {
		t.Errorf("after Unlock at maxmemory: held %v, %v", held, err)
	}
}

// A watchdog whose extensions keep failing declares the lock lost when its
// span runs out after the last extension (the lease less a tenth, counted
// from when that extension was sent), not at a retry past it: refused
// connections fail each try at once; a server that answers too late fails
// each at the call's timeout.
func TestLease_WatchdogLosesAtItsSpan(t *testing.T) {
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

// An extend script's codes: held when extended or stale, not when gone;
// anything else is an error.
func TestLease_DecodeExtends(t *testing.T) {
	codes, err := decodeExtends([]any{int64(1), int64(2), int64(0)}, true, 3)
	if err != nil || len(codes) != 3 || !codes[0].held() || !codes[1].held() || codes[2].held() {
		t.Errorf("decodeExtends = %v, %v; want held, held, gone", codes, err)
	}
	if codes, err := decodeExtends(int64(2), false, 1); err != nil || codes[0] != extendStale {
		t.Errorf("decodeExtends(2) = %v, %v", codes, err)
	}
	for _, bad := range []any{nil, int64(3), int64(-1), []any{int64(1)}} {
		if codes, err := decodeExtends(bad, false, 1); err == nil {
			t.Errorf("decodeExtends(%v) = %v, want an error", bad, codes)
		}
	}
	if codes, err := decodeExtends([]any{int64(1)}, true, 2); err == nil {
		t.Errorf("decodeExtends of a short array = %v, want an error", codes)
	}
}
