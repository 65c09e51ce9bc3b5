package atomicredis

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// An error returned to the caller is the caller's to log: an Unlock that
// finds its lease run out returns ErrNotHeld, and the logger gets no second
// copy (the observer still hears of the loss).
func TestErrors_ReturnedAreNotLogged(t *testing.T) {
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
func TestErrors_ObjectsAndTryIgnoresWait(t *testing.T) {
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

// Errors name the package once and say what happened to which object.
func TestErrors_Messages(t *testing.T) {
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

// An error names its object once: a holding's calls after it ended say
// "atomicredis: lock "a": ..." and no second "atomicredis:".
func TestErrors_NameTheObjectOnce(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s)
		l, err := e.TryLock(ctx, "a", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.TryLockAll(ctx, []string{"m1", "m2"}, LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, release := range []func(context.Context) error{l.Unlock, p.Release, m.Unlock} {
			if err := release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		script := NewGuardedScript(0, "return 1")
		for _, c := range []struct {
			name string
			err  error
		}{
			{"Lock.Extend", l.Extend(ctx, time.Minute)},
			{"Lock.TTL", func() error { _, err := l.TTL(ctx); return err }()},
			{"Lock.SetOwner", l.SetOwner(ctx, "me")},
			{"Lock.Eval", func() error { _, err := l.Eval(ctx, script); return err }()},
			{"Permit.Extend", p.Extend(ctx, time.Minute)},
			{"Permit.TTL", func() error { _, err := p.TTL(ctx); return err }()},
			{"MultiLock.Extend", m.Extend(ctx, time.Minute)},
		} {
			if !errors.Is(c.err, ErrNotHeld) {
				t.Errorf("%s after the release: %v, want ErrNotHeld", c.name, c.err)
				continue
			}
			for _, line := range strings.Split(c.err.Error(), "\n") { // a MultiLock's: a line a lock
				if n := strings.Count(line, "atomicredis:"); n != 1 {
					t.Errorf("%s after the release: %q names its object %d times", c.name, line, n)
				}
			}
		}
	})
}

// An error quotes a long name cut at a rune's start, never inside one: a
// name whose 64th byte is in the middle of "é" is quoted up to the rune
// before it, and the text stays valid UTF-8.
func TestErrors_QuoteCutsAtARune(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		name := strings.Repeat("a", 63) + "é" + strings.Repeat("b", 100) + "{x}" // é is bytes 64 and 65
		_, err := e.TryLock(ctx, name, LockOptions{})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("a name with braces: %v, want ErrInvalid", err)
		}
		want := `lock "` + strings.Repeat("a", 63) + `"...: `
		if msg := err.Error(); !utf8.ValidString(msg) || strings.Contains(msg, `\x`) || !strings.Contains(msg, want) {
			t.Errorf("error %q; want the name quoted as %q, cut before the é", msg, want)
		}
	})
}

// An error quotes a name of exactly 64 bytes whole.
func TestErrors_QuoteTakesA64ByteNameWhole(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		name := strings.Repeat("c", 62) + "{}" // 64 bytes
		_, err := e.TryLock(ctx, name, LockOptions{})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("a name with braces: %v, want ErrInvalid", err)
		}
		if want := `lock "` + name + `": `; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want the 64-byte name quoted whole, %q", err, want)
		}
	})
}

// A holding the watchdog found lost names its object once in the errors
// of the calls after it, as a released one does.
func TestErrors_LostHoldingNamesItsObjectOnce(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		l, err := e.TryLock(ctx, "once", LockOptions{TTL: 900 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "DEL", object{kind: kindLock, name: "once", ns: s.NS}.key(""))
		select {
		case <-l.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("the lock whose key was deleted was not lost in 10 s")
		}
		err = l.Extend(ctx, 0)
		if !errors.Is(err, ErrNotHeld) || strings.Count(err.Error(), `lock "once"`) != 1 {
			t.Errorf("Extend after the loss: %v; want ErrNotHeld, naming lock \"once\" once", err)
		}
	})
}
