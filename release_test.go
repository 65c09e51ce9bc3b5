package atomicredis

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// defer l.Unlock(ctx) on a request context that was cancelled meanwhile
// must still release the lock (docs/locks.md, "Locks": Unlock always tries).
func TestRelease_UnlockOnDoneContext(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e := engine(s)
		ctx, cancel := context.WithCancel(context.Background())
		l, err := e.TryLock(ctx, "done", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.TryAcquireSemaphore(ctx, "done", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock on a cancelled ctx: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Errorf("Release on a cancelled ctx: %v", err)
		}
		if locked, err := e.IsLocked(context.Background(), "done"); err != nil || locked {
			t.Errorf("IsLocked after Unlock on a cancelled ctx = %v, %v", locked, err)
		}
		if n, err := e.SemaphoreHolders(context.Background(), "done"); err != nil || n != 0 {
			t.Errorf("holders after Release on a cancelled ctx = %d, %v", n, err)
		}
		waitWatchdogs(t, 0)
	})
}

// An Unlock that Redis never answers names why (the last attempt's
// failure), and matches context.DeadlineExceeded only when the caller's
// context ended.
func TestRelease_UnlockNamesItsCause(t *testing.T) {
	t.Parallel() // a server of its own; it waits out a ReleaseTimeout or a held-back reply
	s := testserver.Mini(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close() // nothing listens there now
	var down atomic.Bool
	pool := &redis.Pool{Dial: func() (redis.Conn, error) {
		if down.Load() {
			return redis.Dial("tcp", refused)
		}
		return redis.Dial("tcp", s.Mini.Addr())
	}}
	t.Cleanup(func() { pool.Close() })
	e := New(pool, WithNamespace(s.NS))
	t.Cleanup(func() { down.Store(false); e.Close(context.Background()) })
	ctx := ctxT(t)
	var ls []*Lock
	for i := 0; i < 2; i++ {
		l, err := e.TryLock(ctx, "cause"+string(rune('a'+i)), LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	down.Store(true)
	err = ls[0].Unlock(context.Background())
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Unlock with Redis down and no deadline of the caller's: %v; want the refused connection named, not DeadlineExceeded", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	<-cctx.Done()
	if err := ls[1].Unlock(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Unlock with Redis down and the caller's ctx past its deadline: %v; want DeadlineExceeded", err)
	}
}

// A Close that could not release a holding leaves its caller's Unlock to
// try: Unlock releases it on the server (before, Close marked it released
// by Close, and Unlock returned nil having sent nothing, the lock held for
// the rest of its lease).
func TestRelease_UnlockAfterAFailedClose(t *testing.T) {
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

// How a holding ended is the release's to say while its script is on its
// way: an Extend that finds the lock gone meanwhile (the release ran, its
// reply is late) leaves it to the release, whose Unlock returns nil and
// reports EventReleased. And a release whose reply was lost, found gone on
// its retry, reports EventLost with the error Unlock returns. (Before, the
// first reported EventLost after a clean Unlock, and the second ended the
// holding with no event.)
func TestRelease_SaysHowAHoldingEnded(t *testing.T) {
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
func TestRelease_UnansweredSaysHowLong(t *testing.T) {
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
func TestRelease_UnlockWaitsForAnExtensionOnItsWay(t *testing.T) {
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

// An Unlock stops the watchdog before it tries the server, so nothing
// extends the lock any more: if the release goes unanswered, the lock's
// Context ends, and Lost closes, when its span (the lease less a tenth)
// runs out after the last extension, while Unlock still tries and after it
// failed, before another can take the name; an election's leadership
// likewise, before the next candidate leads. (Before, they stayed live
// forever.)
func TestRelease_FailedUnlockEndsTheHolding(t *testing.T) {
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
					return e.Election("lapse", ElectionOptions{TTL: lease}).Campaign(ctx, value)
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

// Unlock with a nil context returns ErrInvalid and writes nothing, and
// stops the watchdog, so that the lease ends at its TTL.
func TestRelease_NilContextStopsTheWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		const ttl = 600 * time.Millisecond
		l, err := engine(s).TryLock(ctx, "nil", LockOptions{TTL: ttl, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		var nilCtx context.Context
		if err := l.Unlock(nilCtx); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Unlock(nil): %v, want ErrInvalid", err)
		}
		if locked, err := engine(s).IsLocked(ctx, "nil"); err != nil || !locked {
			t.Fatalf("right after Unlock(nil): locked %v, %v; want still locked (nothing written)", locked, err)
		}
		time.Sleep(3 * ttl)
		if locked, err := engine(s).IsLocked(ctx, "nil"); err != nil || locked {
			t.Errorf("%v after Unlock(nil) of a %v lease: locked %v, %v; want its lease ended (the watchdog stopped)", 3*ttl, ttl, locked, err)
		}
	})
}

// A late attempt of a lock's acquisition, one sent whose answer was lost
// and which lands only after the lock was granted and released, takes
// nothing and queues nowhere: the release, knowing an attempt went
// unanswered, voided the token. (A plain release left the token free to
// queue again, to be handed the lock with nobody to use it: a linearizable
// history check of elections found a leader read back after it resigned.)
func TestRelease_VoidsALateAttempt(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		// The acquire script loaded, so that the cut call runs it (a
		// NOSCRIPT would be sent again as EVAL).
		if l, err := engine(s).Lock(ctx, "warm", LockOptions{TTL: time.Minute, Wait: time.Second}); err != nil || l.Unlock(ctx) != nil {
			t.Fatal("warming up:", err)
		}
		proxy := startProxy(t, s.Addr, faults{cutOn: []byte(scriptLockAcquire.Hash()), cutTimes: 1, cutAfter: true})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
		defer e.Close(ctx)
		l, err := e.Lock(ctx, "late", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if proxy.cuts.Load() != 1 || !l.late {
			t.Fatalf("%d cuts, late %v: want the first attempt's answer lost, and the holding to know", proxy.cuts.Load(), l.late)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		k := func(suffix string) any { return s.NS + "lock:{late}" + suffix }
		reply, err := scriptLockAcquire.Do(s.Pool.Get(), k(""),
			l.token, time.Minute.Milliseconds(), 1, time.Minute.Milliseconds(), "nobody")
		if err != nil {
			t.Fatal(err)
		}
		if at, err := decodeAttempt(reply); err != nil || !at.abandoned {
			t.Errorf("a late attempt after the release: %v (%+v, %v), want it refused as abandoned", reply, at, err)
		}
		if holder, _ := testserver.LockHolder(s.Do("HGET", k(""), "v")); holder != "" || len(lockQueue(s, t, "late")) != 0 {
			t.Errorf("after the late attempt the lock is held by %q, queue %+v: it took or queued", holder, lockQueue(s, t, "late"))
		}
	})
}

// A release script's reply: n alone, or n and its engine's own wake-ups.
func TestRelease_DecodeReply(t *testing.T) {
	for _, c := range []struct {
		reply any
		want  releaseReply
	}{
		{int64(1), releaseReply{released: true}},
		{int64(0), releaseReply{}},
		{[]any{int64(1), []byte("t 5 2"), []byte("u 6 3")}, releaseReply{released: true, wakeups: []string{"t 5 2", "u 6 3"}}},
	} {
		got, err := decodeRelease(c.reply)
		if err != nil || got.released != c.want.released || !slices.Equal(got.wakeups, c.want.wakeups) {
			t.Errorf("decodeRelease(%v) = %+v, %v; want %+v", c.reply, got, err, c.want)
		}
	}
	for _, bad := range []any{nil, []byte("x"), []any{}, []any{[]byte("x")}, []any{int64(1), int64(2)}} {
		if got, err := decodeRelease(bad); err == nil {
			t.Errorf("decodeRelease(%v) = %+v, want an error", bad, got)
		}
	}
}
