package suite

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

type lockOpts = atomicredis.LockOptions

func lockAcquireRelease(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	l, err := e.TryLock(ctx, "orders", lockOpts{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Token()) != 36 || l.Fence() < 1 {
		t.Errorf("token %q fence %d, want a uuid and a positive fence", l.Token(), l.Fence())
	}
	if got := s.Keys(t); !slices.Equal(got, []string{s.NS + "lock:{orders}"}) {
		t.Errorf("keys %q, want the lock's one key", got)
	}
	if locked, err := e.IsLocked(ctx, "orders"); err != nil || !locked {
		t.Errorf("IsLocked = %v, %v; want true", locked, err)
	}
	if _, err := e.TryLock(ctx, "orders", lockOpts{}); !errors.Is(err, atomicredis.ErrNotAcquired) {
		t.Errorf("second TryLock: %v, want ErrNotAcquired", err)
	}
	if held, err := l.Held(ctx); err != nil || !held {
		t.Errorf("Held = %v, %v", held, err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
		t.Errorf("TTL = %v, %v; want (4s, 5s]", ttl, err)
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 19*time.Second || ttl > 20*time.Second {
		t.Errorf("TTL after Extend(20s) = %v, %v", ttl, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if locked, err := e.IsLocked(ctx, "orders"); err != nil || locked {
		t.Errorf("IsLocked after Unlock = %v, %v", locked, err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("second Unlock: %v, want ErrNotHeld", err)
	}
	if held, err := l.Held(ctx); err != nil || held {
		t.Errorf("Held after Unlock = %v, %v", held, err)
	}
	if got := s.Keys(t); !slices.Equal(got, []string{s.NS + "lock:{orders}"}) {
		t.Errorf("keys after Unlock %q, want the lock's one key, free, its fence kept", got)
	}
	if _, err := l.TTL(ctx); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("TTL after Unlock: %v, want ErrNotHeld", err)
	}
	again, err := e.TryLock(ctx, "orders", lockOpts{})
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if again.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d", again.Fence(), l.Fence())
	}
}

// A holder whose lease ran out, and whose lock another took, must not be
// able to touch the new holder's lock.
func lockStaleHolder(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	stale, err := e.TryLock(ctx, "job", lockOpts{TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Advance(80 * time.Millisecond)
	fresh, err := e.TryLock(ctx, "job", lockOpts{TTL: time.Minute})
	if err != nil {
		t.Fatalf("lock not free after its lease: %v", err)
	}
	if fresh.Fence() <= stale.Fence() {
		t.Errorf("fences %d then %d, want growth", stale.Fence(), fresh.Fence())
	}
	if err := stale.Unlock(ctx); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("stale Unlock: %v", err)
	}
	if err := stale.Extend(ctx, time.Hour); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("stale Extend: %v", err)
	}
	if _, err := stale.TTL(ctx); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("stale TTL: %v", err)
	}
	if held, err := stale.Held(ctx); held || err != nil {
		t.Errorf("stale Held = %v, %v", held, err)
	}
	if held, err := fresh.Held(ctx); !held || err != nil {
		t.Errorf("the new holder's Held = %v, %v after the stale holder's calls", held, err)
	}
	if v, err := testserver.LockHolder(s.Do("HGET", s.NS+"lock:{job}", "v")); v != fresh.Token() {
		t.Errorf("lock holds token %q (%v), want the new holder's", v, err)
	}
	if ttl, err := fresh.TTL(ctx); err != nil || ttl < 50*time.Second || ttl > time.Minute {
		t.Errorf("new holder's TTL %v, %v: the stale Extend must not touch it", ttl, err)
	}
}

func lockFenceGrowsAcrossEngines(t *testing.T, s *testserver.Server) {
	ctx := ctxT(t)
	engines := []*atomicredis.Engine{engine(s), engine(s), engine(s)}
	last := int64(0)
	for i := 0; i < 30; i++ {
		l, err := engines[i%3].TryLock(ctx, "f", lockOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("acquisition %d: fence %d after %d", i, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func lockWaitsForRelease(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	a, err := e.TryLock(ctx, "w", lockOpts{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		released <- time.Now()
		a.Unlock(ctx)
	}()
	b, err := e.Lock(ctx, "w", lockOpts{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	lag := time.Since(<-released)
	t.Logf("waiter took the lock %v after the release began", lag)
	if lag > 2*time.Second {
		t.Errorf("waiter needed %v after the release (pauses should be ms)", lag)
	}
	if b.Fence() <= a.Fence() {
		t.Errorf("fences %d, %d", a.Fence(), b.Fence())
	}
	if held, err := b.Held(ctx); !held || err != nil {
		t.Errorf("waiter's Held = %v, %v", held, err)
	}
}

func lockWaitRunsOut(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	if _, err := e.TryLock(ctx, "busy", lockOpts{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := e.Lock(ctx, "busy", lockOpts{Wait: 60 * time.Millisecond})
	if !errors.Is(err, atomicredis.ErrNotAcquired) {
		t.Fatalf("Lock: %v, want ErrNotAcquired", err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("gave up after %v, before its 60ms wait", d)
	}
	if !strings.Contains(err.Error(), `lock "busy"`) {
		t.Errorf("error %q does not name the lock", err)
	}
}

func lockContext(t *testing.T, s *testserver.Server) {
	setup := engine(s)
	if _, err := setup.TryLock(ctxT(t), "c", lockOpts{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e := engine(s)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	if _, err := e.Lock(ctx, "c", lockOpts{Wait: time.Minute}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := e.Lock(ctx, "c", lockOpts{Wait: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline wait: %v", err)
	}
	settle(t, e)

	e = engine(s)
	before := s.Snapshot(t)
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := e.TryLock(done, "other", lockOpts{}); !errors.Is(err, context.Canceled) {
		t.Errorf("TryLock on a done ctx: %v", err)
	}
	settle(t, e)
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("a done ctx wrote: %q -> %q", before, after)
	}

	// Acquisitions cut off mid-flight (deadlines of 0 to 390 µs) may have
	// run on the server; none may leave the lock held by a caller that was
	// told it failed.
	e = engine(s)
	cut := 0
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%40)*10*time.Microsecond)
		l, err := e.TryLock(ctx, "cut", lockOpts{TTL: time.Minute})
		cancel()
		if err != nil {
			cut++
			continue
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 200 acquisitions cut off by their context", cut)
	settle(t, e)
	if locked, err := engine(s).IsLocked(context.Background(), "cut"); err != nil || locked {
		holder, _ := testserver.LockHolder(s.Do("HGET", s.NS+"lock:{cut}", "v"))
		fields, _ := redis.Strings(s.Do("HKEYS", s.NS+"lock:{cut}"))
		t.Errorf("after cut-off acquisitions IsLocked = %v, %v; holder %s, the lock's fields %q", locked, err, holder, fields[:min(6, len(fields))])
	}
}

// settle waits for what an engine still does in the background (the
// abandons of calls cut off by their context) when it offers Close(ctx) to
// wait for that; an engine without one abandons it before the call returns.
func settle(t testing.TB, e *atomicredis.Engine) {
	t.Helper()
	if c, ok := any(e).(interface{ Close(context.Context) error }); ok {
		if err := c.Close(ctxT(t)); err != nil {
			t.Errorf("Engine.Close: %v", err)
		}
	}
}

// The watchdog keeps a lock past several leases, and nothing extends it
// after Unlock: a new holder's lease is left alone.
func watchdogKeepsLock(t *testing.T, s *testserver.Server) {
	s.Realtime(t)
	ctx, e := ctxT(t), engine(s)
	l, err := e.TryLock(ctx, "wd", lockOpts{TTL: 300 * time.Millisecond, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // four leases
	if held, err := l.Held(ctx); err != nil || !held {
		t.Fatalf("after four leases Held = %v, %v", held, err)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed while the lock was held")
	default:
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := e.TryLock(ctx, "wd", lockOpts{TTL: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	if held, err := n.Held(ctx); held || err != nil {
		t.Errorf("the new holder's lock outlived its 200ms lease (Held %v, %v): something extended it", held, err)
	}
}

// 16 goroutines, each with its own Engine, take and give back one lock
// 200 times each (50 with -short): never two inside at once, every fence
// distinct.
func lockMutualExclusion(t *testing.T, s *testserver.Server) {
	ctx := ctxT(t)
	const workers = 16
	cycles := 200
	if testing.Short() {
		cycles = 50
	}
	var inside, overlaps, acquired atomic.Int64
	var fences sync.Map
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		e := engine(s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < cycles; i++ {
				l, err := e.Lock(ctx, "mutex", lockOpts{TTL: 10 * time.Second, Wait: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				acquired.Add(1)
				if _, dup := fences.LoadOrStore(l.Fence(), true); dup {
					t.Errorf("fence %d granted twice", l.Fence())
				}
				runtime.Gosched()
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d overlaps", acquired.Load(), overlaps.Load())
	if overlaps.Load() != 0 || acquired.Load() != int64(workers*cycles) {
		t.Errorf("%d overlaps in %d acquisitions, want 0 in %d", overlaps.Load(), acquired.Load(), workers*cycles)
	}
}
