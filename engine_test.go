package atomicredis

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// Close stops every watchdog the engine runs (their Lost channels close:
// nobody extends those leases any more) and waits for pending abandons.
func TestEngine_Close(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		proxy := startProxy(t, s.Addr, faults{delayP: 1, maxDelay: 30 * time.Millisecond})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
		var ls []*Lock
		for _, name := range []string{"c1", "c2"} {
			l, err := e.TryLock(ctx, name, LockOptions{TTL: time.Minute, Watchdog: true})
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		waitWatchdogs(t, 1) // one renewer extends both
		// Cut-off acquisitions leave abandons running in the background.
		for i := 0; i < 20; i++ {
			cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			e.TryLock(cctx, "cut", LockOptions{TTL: time.Minute})
			cancel()
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := watchdogs(); n != 0 {
			t.Errorf("%d watchdogs after Close", n)
		}
		if n := abandons(); n != 0 {
			t.Errorf("%d abandons still running after Close", n)
		}
		for _, l := range ls {
			select {
			case <-l.Lost():
			default:
				t.Errorf("lock %q: Lost open after Close stopped its watchdog", l.obj.name)
			}
		}
		if locked, err := engine(s).IsLocked(ctx, "cut"); err != nil || locked {
			t.Errorf("after Close, cut-off acquisitions left the lock held: %v, %v", locked, err)
		}
		if _, err := e.TryLock(ctx, "after", LockOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("TryLock after Close: %v, want ErrClosed", err)
		}
		for _, l := range ls { // holdings stay usable
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("Unlock after Close: %v", err)
			}
		}
	})
}

func abandons() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "atomicredis.(*Engine).abandon(")
}

// Close ends waits at once with ErrClosed, releases every lock and permit
// the engine still holds (watchdog or not) with a cause wrapping ErrClosed,
// closes their Lost channels, tells the observer EventReleased and logs no
// error; an Unlock afterwards returns nil, the holdings' other calls
// ErrClosed, and nothing waited for is granted afterwards.
func TestEngine_CloseEndsWaitsAndReleasesHoldings(t *testing.T) {
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
func TestEngine_UnlockBesideClose(t *testing.T) {
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
func TestEngine_GrantAfterCloseIsPassedOn(t *testing.T) {
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

// A nil *redis.Pool (a typed nil in the Pool interface) is a nil pool:
// every call returns ErrInvalid, and New does not panic.
func TestEngine_TypedNilPool(t *testing.T) {
	var p *redis.Pool
	e := New(p)
	if _, err := e.TryLock(ctxT(t), "x", LockOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("TryLock on an engine of a nil *redis.Pool: %v, want ErrInvalid", err)
	}
}

// A rejected option or a nil pool makes every call fail with ErrInvalid,
// before any I/O.
func TestEngine_Bad(t *testing.T) {
	s := testserver.Mini(t)
	for name, e := range map[string]*Engine{
		"nil pool":          New(nil),
		"namespace {":       New(s.Pool, WithNamespace("a{")),
		"namespace }":       New(s.Pool, WithNamespace("}")),
		"recent capacity":   New(s.Pool, WithRecentCapacity(0)),
		"negative capacity": New(s.Pool, WithRecentCapacity(-5)),
		"call timeout 0":    New(s.Pool, WithCallTimeout(0)),
		"retention 0":       New(s.Pool, WithFenceRetention(0)),
		"ack past timeout":  New(s.Pool, WithCallTimeout(time.Second), WithReplicaAck(1, time.Second)),
		"nil engine":        nil,
		"zero engine":       new(Engine),
	} {
		if e == nil || e.stop == nil {
			if err := e.Close(ctxT(t)); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Close: %v, want ErrInvalid", name, err)
			}
		}
		for _, c := range validCalls() {
			if strings.HasPrefix(c.name, "Lock.") || strings.HasPrefix(c.name, "Permit.") {
				continue // no lock to call it on
			}
			if err := c.run(ctxT(t), e); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %s: %v, want ErrInvalid", name, c.name, err)
			}
		}
	}
	if ks := s.Keys(t); len(ks) != 0 {
		t.Errorf("keys written: %q", ks)
	}
}

// After Close every call returns an error wrapping ErrClosed, Ping
// included, and writes nothing.
func TestEngine_ClosedAnswersErrClosed(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s)
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		calls := append(validCalls(),
			call{"Ping", func(ctx context.Context, e *Engine) error { return e.Ping(ctx) }},
			call{"TryLockAll", func(ctx context.Context, e *Engine) error {
				_, err := e.TryLockAll(ctx, []string{"m1", "m2"}, LockOptions{})
				return err
			}},
			call{"LockAll", func(ctx context.Context, e *Engine) error {
				_, err := e.LockAll(ctx, []string{"m1", "m2"}, LockOptions{})
				return err
			}},
			call{"Campaign", func(ctx context.Context, e *Engine) error {
				_, err := e.Election("el", ElectionOptions{}).Campaign(ctx, "me")
				return err
			}},
			call{"Leader", func(ctx context.Context, e *Engine) error {
				_, err := e.Election("el", ElectionOptions{}).Leader(ctx)
				return err
			}},
			call{"HashTag", func(ctx context.Context, e *Engine) error { _, err := e.HashTag("m1"); return err }},
		)
		for _, c := range calls {
			if strings.HasPrefix(c.name, "Lock.") || strings.HasPrefix(c.name, "Permit.") {
				continue // no lock to call it on
			}
			if err := c.run(ctx, e); !errors.Is(err, ErrClosed) {
				t.Errorf("%s on a closed engine: %v, want ErrClosed", c.name, err)
			}
		}
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("a closed engine wrote %q", ks)
		}
	})
}
