package atomicredis

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// An Unlock that Redis never answers names why (the last attempt's
// failure), and matches context.DeadlineExceeded only when the caller's
// context ended.
func TestUnlockNamesItsCause(t *testing.T) {
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

// A holding's context says why it ended: a loss is an *Error wrapping
// ErrNotHeld, a release says so.
func TestHoldingContextCause(t *testing.T) {
	s := testserver.Mini(t)
	s.Realtime(t)
	ctx, e := ctxT(t), engine(s)
	lost, err := e.TryLock(ctx, "lost", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := lost.Context(context.Background())
	defer cancel()
	if _, err := e.ForceUnlock(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a lost lock's context did not end within 5s")
	}
	var ae *Error
	if cause := context.Cause(lctx); !errors.Is(cause, ErrNotHeld) || !errors.As(cause, &ae) || ae.Object != ObjectLock {
		t.Errorf("a lost lock's context cause: %v, want an *Error about a lock wrapping ErrNotHeld", cause)
	}
	rel, err := e.TryLock(ctx, "released", LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := rel.Context(context.Background())
	defer cancel()
	if err := rel.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-rctx.Done()
	if cause := context.Cause(rctx); !errors.As(cause, &ae) || !strings.Contains(cause.Error(), "released") || errors.Is(cause, ErrNotHeld) {
		t.Errorf("a released lock's context cause: %v, want an *Error saying it was released", cause)
	}
}

// An error returned to the caller is the caller's to log: an Unlock that
// finds its lease run out returns ErrNotHeld, and the logger gets no second
// copy (the observer still hears of the loss).
func TestReturnedErrorsAreNotLogged(t *testing.T) {
	s := testserver.Mini(t)
	ctx := ctxT(t)
	rec, logs := &recorder{}, &logRecords{}
	e := engine(s, WithObserver(rec.observe), WithLogger(slog.New(logs)))
	l, err := e.TryLock(ctx, "gone", LockOptions{TTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Advance(time.Second)
	if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock after the lease ran out: %v, want ErrNotHeld", err)
	}
	rec.wait(t, EventLost, "gone")
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, r := range logs.records {
		t.Errorf("logged %q at %v for an error Unlock returned", r.Message, r.Level)
	}
}

// Error.Object takes the Object constants, and a Try form ignores Wait.
func TestObjectsAndTryIgnoresWait(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	for _, c := range []struct {
		object string
		err    error
	}{
		{ObjectLock, func() error { _, err := e.TryLock(ctx, "", LockOptions{}); return err }()},
		{ObjectReadWriteLock, func() error { _, err := e.TryRLock(ctx, "", LockOptions{}); return err }()},
		{ObjectSemaphore, func() error { _, err := e.TryAcquireSemaphore(ctx, "", SemaphoreOptions{}); return err }()},
		{ObjectRecentList, e.AddRecent(ctx, "", "x")},
		{ObjectMemberSet, e.AddMembers(ctx, "", "x")},
		{ObjectActivityGroup, e.MarkActive(ctx, "", "p", 1)},
	} {
		var ae *Error
		if !errors.As(c.err, &ae) || ae.Object != c.object {
			t.Errorf("%v: want an *Error whose Object is %q", c.err, c.object)
		}
	}
	l, err := e.TryLock(ctx, "try", LockOptions{Wait: -time.Second})
	if err != nil {
		t.Fatalf("TryLock with a Wait it does not use: %v", err)
	}
	l.Unlock(ctx)
	p, err := e.TryAcquireSemaphore(ctx, "try", SemaphoreOptions{Limit: 1, Wait: time.Microsecond})
	if err != nil {
		t.Fatalf("TryAcquireSemaphore with a Wait it does not use: %v", err)
	}
	p.Release(ctx)
}

// A nil *redis.Pool (a typed nil in the Pool interface) is a nil pool:
// every call returns ErrInvalid, and New does not panic.
func TestTypedNilPool(t *testing.T) {
	var p *redis.Pool
	e := New(p)
	if _, err := e.TryLock(ctxT(t), "x", LockOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("TryLock on an engine of a nil *redis.Pool: %v, want ErrInvalid", err)
	}
}
