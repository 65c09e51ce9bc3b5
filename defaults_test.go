package atomicredis

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// What a new user meets first: bounded calls, an exhausted pool waited
// out, "Redis is down" told apart from "someone else has it", and the same
// defaults for locks and semaphores.

// A server that stops answering (SIGSTOP) holds no call past its bounds:
// TryLock returns after the call timeout, a waiting Lock when its Wait
// runs out, neither saying ErrNotAcquired (the server never answered), and
// what they may have left on the server is abandoned once it answers again.
func TestHungServer(t *testing.T) {
	s := privateServer(t, "private redis")
	pid := info(s, t, "process_id")
	ctx := context.Background() // the bounds must come from the engine
	const callTimeout = 300 * time.Millisecond
	e := engine(s, WithCallTimeout(callTimeout))
	holder, err := engine(s).TryLock(ctxT(t), "hung", LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(int(pid), syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	start := time.Now()
	_, err = e.TryLock(ctx, "hung", LockOptions{})
	took := time.Since(start)
	t.Logf("TryLock on a stopped server: %v after %v", err, took)
	if err == nil || errors.Is(err, ErrNotAcquired) || took > callTimeout+time.Second {
		t.Errorf("TryLock on a stopped server: %v after %v; want a timeout (not ErrNotAcquired) within the call timeout %v", err, took, callTimeout)
	}
	start = time.Now()
	_, err = e.Lock(ctx, "hung", LockOptions{Wait: 500 * time.Millisecond})
	took = time.Since(start)
	t.Logf("Lock (Wait 500ms) on a stopped server: %v after %v", err, took)
	if err == nil || errors.Is(err, ErrNotAcquired) || took > 500*time.Millisecond+time.Second {
		t.Errorf("Lock (Wait 500ms) on a stopped server: %v after %v; want the last attempt's failure by the end of its wait", err, took)
	}
	resume()
	if err := e.Close(ctxT(t)); err != nil { // the abandons of the cut-off attempts run
		t.Fatal(err)
	}
	if err := holder.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, k := range s.Keys(t) { // void marks expire after a lease: a late arrival takes nothing
		if k != s.NS+"lock:{hung}:fence" && !strings.HasPrefix(k, s.NS+"lock:{hung}:void:") {
			t.Errorf("left after the abandons: %s", k)
		}
	}
}

// A pool without Wait answers ErrPoolExhausted at once when all its
// connections are out; a wait rides that out, and Unlock retries it, so
// that 16 goroutines on a pool of 3 all get their locks and free them.
func TestPoolExhaustedWaitedOut(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		pool := &redis.Pool{MaxActive: 3, MaxIdle: 3, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", s.Addr) }}
		t.Cleanup(func() { pool.Close() })
		e := New(pool, WithNamespace(s.NS))
		ctx := ctxT(t)
		var failed, done atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					l, err := e.Lock(ctx, "pe"+strconv.Itoa(g%4), LockOptions{TTL: 30 * time.Second, Wait: 10 * time.Second})
					if err != nil {
						failed.Add(1)
						t.Errorf("Lock: %v", err)
						continue
					}
					time.Sleep(time.Millisecond)
					if err := l.Unlock(ctx); err != nil {
						failed.Add(1)
						t.Errorf("Unlock: %v", err)
						continue
					}
					done.Add(1)
				}
			}(g)
		}
		wg.Wait()
		t.Logf("%s: 160 cycles through a pool of 3 without Wait: %d done, %d failed", s.Name, done.Load(), failed.Load())
		for g := 0; g < 4; g++ {
			if locked, err := e.IsLocked(ctx, "pe"+strconv.Itoa(g)); err != nil || locked {
				t.Errorf("pe%d still locked (%v, %v): an Unlock gave up on the exhausted pool", g, locked, err)
			}
		}
		e.Close(ctx)
	})
}

// With Redis refusing connections, a wait and a one-try both fail with the
// connection's error, never with ErrNotAcquired.
func TestRedisDownIsNotNotAcquired(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	e := New(&redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", down) }})
	ctx := ctxT(t)
	for name, try := range map[string]func() error{
		"Lock": func() error {
			_, err := e.Lock(ctx, "down", LockOptions{Wait: 300 * time.Millisecond})
			return err
		},
		"TryLock": func() error { _, err := e.TryLock(ctx, "down", LockOptions{}); return err },
		"AcquireSemaphore": func() error {
			_, err := e.AcquireSemaphore(ctx, "down", SemaphoreOptions{Limit: 1, Wait: 300 * time.Millisecond})
			return err
		},
	} {
		err := try()
		if errors.Is(err, ErrNotAcquired) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s with Redis down: %v; want connection refused, not ErrNotAcquired", name, err)
		}
	}
}

// AcquireSemaphore's zero Wait waits, as Lock's does; TryAcquireSemaphore
// makes one attempt.
func TestZeroWaitMeansTheDefault(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		p, err := e.TryAcquireSemaphore(ctx, "zw", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "zw", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryAcquireSemaphore on a full semaphore: %v", err)
		}
		time.AfterFunc(100*time.Millisecond, func() { p.Release(ctx) })
		q, err := e.AcquireSemaphore(ctx, "zw", SemaphoreOptions{Limit: 1})
		if err != nil {
			t.Fatalf("AcquireSemaphore with the zero Wait behind a permit freed after 100ms: %v", err)
		}
		q.Release(ctx)
	})
}

// Errors name the package once and say what happened to which object.
func TestErrorMessages(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	var ps []*Permit
	for i := 0; i < 3; i++ {
		p, err := e.TryAcquireSemaphore(ctx, "jobs", SemaphoreOptions{Limit: 3, TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	l, err := e.TryLock(ctx, "cart:1", LockOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, semErr := e.TryAcquireSemaphore(ctx, "jobs", SemaphoreOptions{})
	_, lockErr := e.TryLock(ctx, "cart:1", LockOptions{})
	_, waitErr := e.Lock(ctx, "cart:1", LockOptions{Wait: 30 * time.Millisecond})
	_, badErr := e.Lock(ctx, "cart:1", LockOptions{Wait: -time.Second})
	l.Unlock(ctx)
	for _, c := range []struct {
		err  error
		is   error
		want string
	}{
		{semErr, ErrNotAcquired, `atomicredis: semaphore "jobs": 3 of 3 held, none free; the first permit times out in `},
		{lockErr, ErrNotAcquired, `atomicredis: lock "cart:1": held by another; its lease ends in `},
		{waitErr, ErrNotAcquired, `atomicredis: lock "cart:1": waited 30ms, 0 ahead in the queue: not acquired`},
		{badErr, ErrInvalid, `atomicredis: lock "cart:1": Wait -1s: must be 0 (default) or at least 1ms: invalid argument`},
		{l.Unlock(ctx), ErrNotHeld, `atomicredis: lock "cart:1": fence `},
		{(*Lock)(nil).Unlock(ctx), ErrNotHeld, `atomicredis: nil lock: not held`},
		{New(nil).AddRecent(ctx, "l", "x"), ErrInvalid, `atomicredis: nil pool: invalid argument`},
	} {
		if c.err == nil || !errors.Is(c.err, c.is) || !strings.HasPrefix(c.err.Error(), c.want) || strings.Count(c.err.Error(), "atomicredis") != 1 {
			t.Errorf("error %q (is %v: %v), want it to start %q and name the package once", c.err, c.is, errors.Is(c.err, c.is), c.want)
		}
		var e *Error
		if !errors.As(c.err, &e) {
			t.Errorf("%v is not an *Error", c.err)
		}
	}
	for _, p := range ps {
		p.Release(ctx)
	}
}
