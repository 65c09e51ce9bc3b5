package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// An Extend that fails (here its ctx is done before it is sent) is not
// counted on: the holding's lease stays the one the server granted, so a
// plain lock's Context ends with it, and a watchdog keeps extending on
// its rhythm. (Before, the new lease became the holding's whatever the
// call's outcome: a plain lock's Context ran 27 s past the server's lease,
// and the watchdog waited 10 s to extend a 1 s lease, which another
// engine then took, while the first holder's Context was still live.)
func TestFailedExtendIsNotCounted(t *testing.T) {
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

// A holding that has ended, released or given up as lost, sends nothing
// more: Held after Unlock says false and leaves Lost open; Extend of a
// watchdog lock whose renewals failed until it was declared lost returns
// ErrNotHeld and does not extend it on the server (before, it did, and
// Close, which no longer knew it, left it held for the new lease).
func TestEndedHoldingSendsNothing(t *testing.T) {
	testserver.Parallel(t) // waits out a span
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("needs the fault proxy in front of one server")
		}
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		l, err := e.TryLock(ctx, "ended", LockOptions{TTL: 5 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if held, err := l.Held(ctx); held || err != nil {
			t.Errorf("Held after Unlock: %v, %v; want false, nil", held, err)
		}
		select {
		case <-l.Lost():
			t.Errorf("Lost closed by Held after a clean Unlock")
		default:
		}

		proxy := startProxy(t, s.Addr, faults{})
		p := New(newPool(t, proxy.addr()), WithNamespace(s.NS), WithCallTimeout(200*time.Millisecond))
		defer p.Close(ctx)
		l, err = p.TryLock(ctx, "lost", LockOptions{TTL: 600 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		proxy.refuse.Store(true)
		proxy.cutAll()
		select {
		case <-l.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("Lost still open 5 s after every renewal failed")
		}
		proxy.refuse.Store(false)
		if err := l.Extend(ctx, time.Hour); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Extend of a lock given up as lost: %v, want ErrNotHeld", err)
		}
		if ms, err := redis.Int64(s.Do("PTTL", s.NS+"lock:{lost}")); err != nil || ms > 600 {
			t.Errorf("the lost lock's PTTL on the server is %d ms (%v): extended after it was given up", ms, err)
		}
	})
}

// A Close that could not release a holding leaves its caller's Unlock to
// try: Unlock releases it on the server (before, Close marked it released
// by Close, and Unlock returned nil having sent nothing, the lock held for
// the rest of its lease).
func TestUnlockAfterAFailedClose(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("needs the fault proxy in front of one server")
		}
		ctx := ctxT(t)
		proxy := startProxy(t, s.Addr, faults{})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS), WithCallTimeout(200*time.Millisecond))
		l, err := e.TryLock(ctx, "fc", LockOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		proxy.refuse.Store(true)
		proxy.cutAll()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := e.Close(short); err == nil {
			t.Fatal("Close through a refusing proxy released the lock")
		}
		proxy.refuse.Store(false)
		err = l.Unlock(ctx)
		info, ierr := engine(s).LockInfo(ctx, "fc")
		if ierr != nil {
			t.Fatal(ierr)
		}
		if info.Held {
			t.Errorf("after a failed Close and Unlock (%v), the lock is held for %v", err, info.TTL)
		}
	})
}

// Without a watchdog, an Extend that shortens the lease ends the Contexts
// made before it with the new lease (less a tenth). (Before, they kept the
// deadline of the longer lease: 25.8 s after another engine took the
// lock.)
func TestShorterExtendEndsEarlierContexts(t *testing.T) {
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

// stallPool's connections wait stallFor before each Receive (the
// renewer's pipelined batch) while stall is set.
type stallPool struct {
	p        Pool
	stall    atomic.Bool
	stallFor time.Duration
	slowHash atomic.Value // a script's hash whose reply Do holds back slowFor
	slowFor  time.Duration
}

func (p *stallPool) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := p.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, p: p}, nil
}

type stallConn struct {
	redis.Conn
	p *stallPool
}

func (c *stallConn) Do(cmd string, args ...any) (any, error) {
	v, err := c.Conn.Do(cmd, args...)
	if h, _ := c.p.slowHash.Load().(string); h != "" && cmd == "EVALSHA" && len(args) > 0 && args[0] == h {
		time.Sleep(c.p.slowFor)
	}
	return v, err
}

func (c *stallConn) Receive() (any, error) {
	if c.p.stall.Load() {
		time.Sleep(c.p.stallFor)
	}
	return c.Conn.Receive()
}

// A watchdog holding is lost when its span runs out after its last
// extension even while the renewer waits on another batch's reply (here
// 1.5 s late, within the call's timeout): its Context ends before another
// engine can take it. (Before, only the renewer ended it, once the slow
// batch returned: another engine held b while b's Context was live.)
func TestStalledBatchHidesNoLoss(t *testing.T) {
	testserver.Parallel(t) // waits out a lease
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("a plain pool in front of one server")
		}
		s.Realtime(t)
		ctx := ctxT(t)
		sp := &stallPool{p: s.Pool, stallFor: 1500 * time.Millisecond}
		e := New(sp, WithNamespace(s.NS))
		defer e.Close(ctx)
		other := engine(s)
		a, err := e.TryLock(ctx, "a", LockOptions{TTL: 3 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Unlock(ctx)
		time.Sleep(500 * time.Millisecond)
		sp.stall.Store(true) // a's next batch, at about 1 s, gets its reply 1.5 s late
		time.Sleep(700 * time.Millisecond)
		sp.stall.Store(false)
		b, err := e.TryLock(ctx, "b", LockOptions{TTL: time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		work, stop := b.Context(ctx)
		defer stop()
		time.Sleep(1150 * time.Millisecond)
		o, err := other.TryLock(ctx, "b", LockOptions{TTL: 10 * time.Second})
		if err == nil && work.Err() == nil {
			t.Errorf("another engine holds b while b's Context is live")
		}
		if o != nil {
			o.Unlock(ctx)
		}
	})
}

// How a holding ended is the release's to say while its script is on its
// way: an Extend that finds the lock gone meanwhile (the release ran, its
// reply is late) leaves it to the release, whose Unlock returns nil and
// reports EventReleased. And a release whose reply was lost, found gone on
// its retry, reports EventLost with the error Unlock returns. (Before, the
// first reported EventLost after a clean Unlock, and the second ended the
// holding with no event.)
func TestReleaseSaysHowAHoldingEnded(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("a plain pool, and the fault proxy, in front of one server")
		}
		ctx := ctxT(t)
		var mu sync.Mutex
		var events []string
		observe := WithObserver(func(ev Event) {
			mu.Lock()
			events = append(events, ev.Type.String())
			mu.Unlock()
		})
		seen := func() string {
			mu.Lock()
			defer mu.Unlock()
			got := strings.Join(events, ",")
			events = nil
			return got
		}
		sp := &stallPool{p: s.Pool, slowFor: 300 * time.Millisecond}
		e := New(sp, WithNamespace(s.NS), observe)
		defer e.Close(ctx)
		l, err := e.TryLock(ctx, "u", LockOptions{TTL: 5 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		sp.slowHash.Store(scriptLockRelease.Hash())
		unlocked := make(chan error, 1)
		go func() { unlocked <- l.Unlock(ctx) }()
		time.Sleep(100 * time.Millisecond)                                      // the release has run; its reply is late
		if err := l.Extend(ctx, 0); err != nil && !errors.Is(err, ErrNotHeld) { // nil if it ran first
			t.Errorf("Extend during the release: %v, want ErrNotHeld", err)
		}
		if err := <-unlocked; err != nil {
			t.Errorf("Unlock: %v", err)
		}
		if got := seen(); got != "acquired,released" {
			t.Errorf("events %s, want acquired,released", got)
		}

		proxy := startProxy(t, s.Addr, faults{cutOn: []byte(scriptLockRelease.Hash()), cutTimes: 1, cutAfter: true})
		c := New(newPool(t, proxy.addr()), WithNamespace(s.NS), observe)
		defer c.Close(ctx)
		l, err = c.TryLock(ctx, "cut", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err == nil {
			t.Errorf("Unlock whose reply was cut and whose retry found the lock gone returned nil")
		}
		if got := seen(); got != "acquired,lost" {
			t.Errorf("events %s after a release whose reply was cut, want acquired,lost", got)
		}
		select {
		case <-l.Lost():
		default:
			t.Errorf("a watchdog lock's Lost open after its release went unanswered and found it gone")
		}
	})
}

// A zero Lock or Permit (not nil; no engine returned it) answers every call
// with an error wrapping ErrNotHeld. (Before, they panicked.)
func TestZeroHoldings(t *testing.T) {
	ctx := context.Background()
	var l Lock
	var p Permit
	for name, f := range map[string]func() error{
		"Lock.Unlock":      func() error { return l.Unlock(ctx) },
		"Lock.Extend":      func() error { return l.Extend(ctx, 0) },
		"Lock.Held":        func() error { _, err := l.Held(ctx); return err },
		"Lock.TTL":         func() error { _, err := l.TTL(ctx); return err },
		"Lock.SetOwner":    func() error { return l.SetOwner(ctx, "x") },
		"Permit.Release":   func() error { return p.Release(ctx) },
		"Permit.Extend":    func() error { return p.Extend(ctx, 0) },
		"Permit.TTL":       func() error { _, err := p.TTL(ctx); return err },
		"Permit.SetOwner":  func() error { return p.SetOwner(ctx, "x") },
		"Permit.Held":      func() error { _, err := p.Held(ctx); return err },
		"Lock.Eval":        func() error { _, err := l.Eval(ctx, NewGuardedScript(0, "return 1")); return err },
		"Lock.Held (nil)":  func() error { _, err := (*Lock)(nil).Held(ctx); return err },
		"Permit.TTL (nil)": func() error { _, err := (*Permit)(nil).TTL(ctx); return err },
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on a zero value panicked: %v", name, r)
				}
			}()
			if err := f(); !errors.Is(err, ErrNotHeld) && !(name == "Lock.Held" || name == "Permit.Held" || name == "Lock.Held (nil)") {
				t.Errorf("%s on a zero value: %v, want ErrNotHeld", name, err)
			}
		}()
	}
}

// deadlineOnly is a context whose deadline is dl but which is never done:
// a caller's context whose timer has not fired yet when its deadline has
// passed (the moment a release's last attempt times out).
type deadlineOnly struct {
	context.Context
	dl time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.dl, true }

// A release that goes unanswered until the caller's deadline, later than
// ReleaseTimeout, says how long it tried: the deadline's distance from the
// release's start. (Before, it measured that distance at the end: "unanswered
// within 0s".)
func TestUnansweredReleaseSaysHowLong(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("the fault proxy, in front of one server")
		}
		testserver.Parallel(t) // it waits out a held-back release
		ctx := ctxT(t)
		proxy := startProxy(t, s.Addr, faults{holdOn: []byte(scriptLockRelease.Hash()), holdFor: 2 * time.Second})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
		defer e.Close(ctx)
		l, err := e.TryLock(ctx, "slow", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		err = l.Unlock(deadlineOnly{context.Background(), time.Now().Add(1500 * time.Millisecond)})
		if err == nil || !strings.Contains(err.Error(), "unanswered within 1.5s") {
			t.Errorf("Unlock = %v, want an error saying it went unanswered within 1.5s", err)
		}
	})
}

// At maxmemory with noeviction, Redis fails a script's first write that
// may grow memory and lets the later ones run: a permit's extension, by
// Extend and by the watchdog's batched renewal, writes PEXPIRE first, as a
// lock's does, so that permits are kept where locks are. (Before, both
// began with ZADD: Extend failed with OOM, and a watchdog's permit was
// lost at its first lease's end.)
func TestExtendAtMaxmemory(t *testing.T) {
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
