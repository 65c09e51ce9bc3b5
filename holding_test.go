package atomicredis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// A holding that has ended, released or given up as lost, sends nothing
// more: Held after Unlock says false and leaves Lost open; Extend of a
// watchdog lock whose renewals failed until it was declared lost returns
// ErrNotHeld and does not extend it on the server (before, it did, and
// Close, which no longer knew it, left it held for the new lease).
func TestHolding_EndedSendsNothing(t *testing.T) {
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

// A zero Lock or Permit (not nil; no engine returned it) answers every call
// with an error wrapping ErrNotHeld. (Before, they panicked.)
func TestHolding_Zero(t *testing.T) {
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

func TestHolding_LostNeverClosesWithoutWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		l, err := engine(s).TryLock(ctx, "nw", LockOptions{TTL: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Advance(20 * time.Millisecond)
		if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Extend: %v", err)
		}
		select {
		case <-l.Lost():
			t.Error("Lost closed without a watchdog")
		case <-time.After(20 * time.Millisecond):
		}
	})
}

// No method of a nil holding panics (docs/locks.md, "Locks").
func TestHolding_Nil(t *testing.T) {
	ctx := ctxT(t)
	var l *Lock
	var p *Permit
	for name, err := range map[string]error{
		"Lock.Unlock":    l.Unlock(ctx),
		"Lock.Extend":    l.Extend(ctx, time.Second),
		"Permit.Release": p.Release(ctx),
		"Permit.Extend":  p.Extend(ctx, 0),
	} {
		if !errors.Is(err, ErrNotHeld) {
			t.Errorf("%s on nil: %v, want ErrNotHeld", name, err)
		}
	}
	if _, err := l.TTL(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Lock.TTL on nil: %v", err)
	}
	if _, err := p.TTL(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Permit.TTL on nil: %v", err)
	}
	if held, err := l.Held(ctx); held || err != nil {
		t.Errorf("Lock.Held on nil = %v, %v", held, err)
	}
	if held, err := p.Held(ctx); held || err != nil {
		t.Errorf("Permit.Held on nil = %v, %v", held, err)
	}
	select {
	case <-l.Lost():
	default:
		t.Error("Lost of a nil lock is not closed")
	}
	if l.Token() != "" || l.Fence() != 0 || p.Token() != "" || p.Fence() != 0 {
		t.Error("nil holdings: Token/Fence not zero")
	}
}

// A holding's context says why it ended: a loss is an *Error wrapping
// ErrNotHeld, a release says so.
func TestHolding_ContextCause(t *testing.T) {
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

// Without a watchdog, Context ends a tenth of the lease before the lease
// would end by the client's clock, counted from when the granting call
// (or the Extend) was sent: that tenth is the margin for the client's
// clock, so the guarded work stops before the next holder can start.
// Permits likewise.
func TestHolding_ContextEndsATenthBeforeTheLease(t *testing.T) {
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
