package atomicredis

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// Close ends waits at once with ErrClosed, releases every lock and permit
// the engine still holds (watchdog or not) with a cause wrapping ErrClosed,
// closes their Lost channels, tells the observer EventReleased and logs no
// error; an Unlock afterwards returns nil, the holdings' other calls
// ErrClosed, and nothing waited for is granted afterwards.
func TestCloseEndsWaitsAndReleasesHoldings(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		rec, logs := &recorder{}, &logRecords{}
		e := engine(s, WithObserver(rec.observe), WithLogger(slog.New(logs)))
		other := engine(s)
		plain, err := e.TryLock(ctx, "plain", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		watched, err := e.TryLock(ctx, "watched", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		permit, err := e.TryAcquireSemaphore(ctx, "slots", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := plain.Context(context.Background())
		defer cancel()
		busy, err := other.TryLock(ctx, "busy", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() {
			_, err := e.Lock(ctx, "busy", LockOptions{Wait: time.Minute})
			waited <- err
		}()
		waitQueued(s, t, s.NS+"lock:{busy}:queue", 1)

		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-waited:
			if !errors.Is(err, ErrClosed) || errors.Is(err, ErrNotAcquired) {
				t.Errorf("a wait under way when Close ran: %v, want ErrClosed (and not ErrNotAcquired)", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a wait under way did not end within 5s of Close")
		}
		for _, name := range []string{"plain", "watched"} {
			if locked, err := other.IsLocked(ctx, name); err != nil || locked {
				t.Errorf("lock %q after Close: locked %v, %v; want released", name, locked, err)
			}
		}
		if n, err := other.SemaphoreHolders(ctx, "slots"); err != nil || n != 0 {
			t.Errorf("permit after Close: %d holders, %v; want released", n, err)
		}
		for name, lost := range map[string]<-chan struct{}{"plain": plain.Lost(), "watched": watched.Lost(), "permit": permit.Lost()} {
			select {
			case <-lost:
			default:
				t.Errorf("%s: Lost open after Close released it", name)
			}
		}
		if cause := context.Cause(pctx); !errors.Is(cause, ErrClosed) {
			t.Errorf("a released holding's context ended with %v, want a cause wrapping ErrClosed", cause)
		}
		for _, name := range []string{"plain", "watched", "slots"} {
			rec.wait(t, EventReleased, name)
		}
		for _, r := range logs.records {
			if r.Level >= slog.LevelError {
				t.Errorf("Close logged %q at %v", r.Message, r.Level)
			}
		}
		if err := plain.Unlock(ctx); err != nil {
			t.Errorf("Unlock after Close released the lock: %v, want nil", err)
		}
		if err := permit.Release(ctx); err != nil {
			t.Errorf("Release after Close released the permit: %v, want nil", err)
		}
		if err := watched.Extend(ctx, 0); !errors.Is(err, ErrClosed) {
			t.Errorf("Extend after Close: %v, want ErrClosed", err)
		}
		if _, err := permit.TTL(ctx); !errors.Is(err, ErrClosed) {
			t.Errorf("TTL after Close: %v, want ErrClosed", err)
		}
		// The closed engine's waiter left nothing behind: the next holder of
		// "busy" is whoever asks next.
		if err := busy.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if l, err := other.TryLock(ctx, "busy", LockOptions{}); err != nil {
			t.Errorf("after the holder released, the closed engine's waiter still stood in line: %v", err)
		} else {
			l.Unlock(ctx)
		}
	})
}

// An Unlock in flight when Close runs returns its own result, and Close
// does not release the holding a second time.
func TestUnlockBesideClose(t *testing.T) {
	s := testserver.Mini(t)
	ctx := ctxT(t)
	rec := &recorder{}
	e := engine(s, WithObserver(rec.observe))
	for i := 0; i < 20; i++ {
		l, err := e.TryLock(ctx, "both", LockOptions{TTL: time.Minute, Watchdog: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		unlocked := make(chan error, 1)
		go func() { unlocked <- l.Unlock(ctx) }()
		if i == 19 {
			if err := e.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-unlocked; err != nil {
			t.Fatalf("round %d: Unlock beside Close: %v, want nil", i, err)
		}
	}
	released := 0
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.Type == EventReleased {
			released++
		}
	}
	rec.mu.Unlock()
	if released != 20 {
		t.Errorf("%d EventReleased for 20 holdings, want one each", released)
	}
}

// A grant that reaches a call after Close ran is passed on: the call
// returns ErrClosed and the lock is free.
func TestGrantAfterCloseIsPassedOn(t *testing.T) {
	t.Parallel() // a server of its own; it waits out a ReleaseTimeout or a held-back reply
	s := testserver.Mini(t)
	s.Realtime(t)
	ctx := ctxT(t)
	proxy := startProxy(t, s.Addr, faults{holdOn: []byte("{late}"), holdFor: 300 * time.Millisecond})
	e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
	got := make(chan error, 1)
	go func() {
		_, err := e.TryLock(ctx, "late", LockOptions{TTL: time.Minute})
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the TryLock is held back in the proxy
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("a TryLock granted after Close: %v, want ErrClosed", err)
	}
	if locked, err := engine(s).IsLocked(ctx, "late"); err != nil || locked {
		t.Errorf("after a grant that reached a closed engine: locked %v, %v; want it passed on", locked, err)
	}
}
