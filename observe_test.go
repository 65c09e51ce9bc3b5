package atomicredis

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// What an operator sees: events, logs, inspection, the admin calls, and a
// context that ends with the holding.

// recorder keeps the events an engine reports.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) observe(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// wait waits (generously) for an event of type typ about name, and
// returns it.
func (r *recorder) wait(t *testing.T, typ EventType, name string) Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.Type == typ && ev.Name == name {
				r.mu.Unlock()
				return ev
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %q in 10s; saw %v", typ, name, r.types())
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		out = append(out, ev.Type.String()+" "+ev.Name)
	}
	return out
}

// Every event type, from a scenario that causes it, for locks, read-write
// locks and semaphores.
func TestEvents(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		ctx := ctxT(t)
		rec := &recorder{}
		e := engine(s, WithObserver(rec.observe))

		// Acquired, not acquired, released; queued or not.
		l, err := e.TryLock(ctx, "ev", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if ev := rec.wait(t, EventAcquired, "ev"); ev.Object != "lock" || ev.Queued || ev.Token != l.Token() || ev.Fence != l.Fence() {
			t.Errorf("acquired: %+v", ev)
		}
		if _, err := e.TryLock(ctx, "ev", LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Fatal(err)
		}
		if ev := rec.wait(t, EventNotAcquired, "ev"); !errors.Is(ev.Err, ErrNotAcquired) || ev.Token != "" {
			t.Errorf("not acquired: %+v", ev)
		}
		time.AfterFunc(50*time.Millisecond, func() { l.Unlock(ctx) })
		w, err := e.Lock(ctx, "ev", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ev := rec.wait(t, EventReleased, "ev"); ev.Held < 40*time.Millisecond || ev.Fence != l.Fence() {
			t.Errorf("released: %+v, want held about 50ms", ev)
		}
		rec.mu.Lock()
		var queued *Event
		for i := range rec.events {
			if ev := rec.events[i]; ev.Type == EventAcquired && ev.Token == w.Token() {
				queued = &ev
			}
		}
		rec.mu.Unlock()
		if queued == nil || !queued.Queued || queued.Wait < 40*time.Millisecond {
			t.Errorf("the waiter's acquisition: %+v, want queued, about 50ms of wait", queued)
		}
		if ev := rec.wait(t, EventQueued, "ev"); ev.Token != w.Token() || ev.Wait > 40*time.Millisecond {
			t.Errorf("queued: %+v, want the waiter's token, before the release", ev)
		}
		rec.mu.Lock()
		n := 0
		for _, ev := range rec.events {
			if ev.Type == EventQueued {
				n++
			}
		}
		rec.mu.Unlock()
		if n != 1 {
			t.Errorf("%d EventQueued for one waiting call, want 1", n)
		}
		w.Unlock(ctx)

		// Lost: the key deleted behind a watchdog holder.
		wd, err := e.TryLock(ctx, "gone", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "DEL", s.NS+"lock:{gone}")
		if ev := rec.wait(t, EventLost, "gone"); !errors.Is(ev.Err, ErrNotHeld) || ev.Fence != wd.Fence() {
			t.Errorf("lost: %+v", ev)
		}

		// Extend failed: the watchdog's connection is refused for a while.
		proxy := startProxy(t, s.Addr, faults{})
		pe := New(newPool(t, proxy.addr()), WithNamespace(s.NS), WithObserver(rec.observe))
		pl, err := pe.TryLock(ctx, "flaky", LockOptions{TTL: 600 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		proxy.refuse.Store(true)
		proxy.cutAll()
		if ev := rec.wait(t, EventExtendFailed, "flaky"); ev.Err == nil || ev.Fence != pl.Fence() {
			t.Errorf("extend failed: %+v", ev)
		}
		proxy.refuse.Store(false)
		if err := pl.Unlock(ctx); err != nil {
			t.Errorf("Unlock after extensions came back: %v", err)
		}

		// A background error: the wake subscription cannot be made.
		be := New(brokenSubscriber{s.Pool}, WithNamespace(s.NS), WithObserver(rec.observe))
		hold, err := be.TryLock(ctx, "bg", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if w, err := be.Lock(ctx, "bg", LockOptions{TTL: time.Minute, Wait: time.Minute}); err == nil {
				w.Unlock(ctx)
			}
		}()
		ev := rec.wait(t, EventBackgroundError, "")
		if ev.Err == nil || !strings.Contains(ev.Err.Error(), "wake subscription") {
			t.Errorf("background error: %+v", ev)
		}
		hold.Unlock(ctx)

		// Read-write locks and semaphores name themselves.
		r, err := e.TryRLock(ctx, "rwev", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Unlock(ctx)
		if ev := rec.wait(t, EventReleased, "rwev"); ev.Object != "read-write lock" {
			t.Errorf("read-write lock released: %+v", ev)
		}
		p, err := e.TryAcquireSemaphore(ctx, "semev", SemaphoreOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx)
		if ev := rec.wait(t, EventReleased, "semev"); ev.Object != "semaphore" || ev.Token != p.Token() {
			t.Errorf("semaphore released: %+v", ev)
		}
		for _, x := range []*Engine{e, pe, be} {
			x.Close(ctx)
		}
	})
}

// brokenSubscriber is a pool whose subscriptions always fail.
type brokenSubscriber struct{ Pool }

func (brokenSubscriber) Subscribe(context.Context, string) (Subscription, error) {
	return nil, errors.New("no subscriptions here")
}

// logRecords is a slog handler that keeps its records.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// WithLogger: background failures at Warn, lost holdings at Error, with
// the object, its name and the error; nothing for the daily business.
func TestLogger(t *testing.T) {
	s := testserver.Mini(t)
	s.Realtime(t)
	ctx := ctxT(t)
	logs := &logRecords{}
	e := New(brokenSubscriber{s.Pool}, WithNamespace(s.NS), WithLogger(slog.New(logs)))
	l, err := e.TryLock(ctx, "lg", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	go e.Lock(ctx, "lg", LockOptions{Wait: 300 * time.Millisecond}) // its subscription fails
	s.Must(t, "DEL", s.NS+"lock:{lg}")
	<-l.Lost()
	time.Sleep(400 * time.Millisecond)
	e.Close(ctx)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	levels := map[string]slog.Level{}
	for _, r := range logs.records {
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		levels[r.Message] = r.Level
		if attrs["error"] == "" || attrs["error"] == "<nil>" {
			t.Errorf("%q logged without its error: %v", r.Message, attrs)
		}
		if r.Message == "atomicredis: lost" && (attrs["object"] != "lock" || attrs["name"] != "lg") {
			t.Errorf("lost logged with %v, want object lock, name lg", attrs)
		}
	}
	if levels["atomicredis: lost"] != slog.LevelError || levels["atomicredis: background error"] != slog.LevelWarn {
		t.Errorf("levels %v: want lost at ERROR, background error at WARN", levels)
	}
	for msg := range levels {
		if msg != "atomicredis: lost" && msg != "atomicredis: background error" && msg != "atomicredis: extend failed" {
			t.Errorf("logged %q: only failures are logged", msg)
		}
	}
}

// LockInfo tells the holder, its fence and lease, and the live waiters;
// it writes nothing.
func TestLockInfo(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		if info, err := e.LockInfo(ctx, "inf"); err != nil || info != (LockInfo{}) {
			t.Errorf("LockInfo of a free lock = %+v, %v", info, err)
		}
		l, err := e.TryLock(ctx, "inf", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wctx, cancel := context.WithCancel(ctx)
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.Lock(wctx, "inf", LockOptions{Wait: time.Minute})
			}()
		}
		waitQueued(s, t, s.NS+"lock:{inf}:queue", 3)
		rawWaiter(s, t, "inf", "lapsed", "nobody", time.Millisecond) // not live: not counted
		time.Sleep(5 * time.Millisecond)
		before := s.Snapshot(t)
		info, err := e.LockInfo(ctx, "inf")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held || info.Token != l.Token() || info.Fence != l.Fence() || info.TTL < 50*time.Second || info.TTL > time.Minute || info.Waiting != 3 {
			t.Errorf("LockInfo = %+v; want held by %s (fence %d), about a minute left, 3 waiting", info, l.Token(), l.Fence())
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("LockInfo wrote: %v -> %v", before, after)
		}
		cancel()
		wg.Wait()
		l.Unlock(ctx)
	})
}

// ForceUnlock frees a lock whoever holds it and hands it to the first live
// waiter; the old holder's Unlock says ErrNotHeld and its watchdog loses
// it.
func TestForceUnlock(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		e.queueTTL = slowExtensions // the waiter must be handed the lock, not find it
		if ok, err := e.ForceUnlock(ctx, "stuck"); ok || err != nil {
			t.Errorf("ForceUnlock of a free lock = %v, %v; want false", ok, err)
		}
		old, err := e.TryLock(ctx, "stuck", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lock, 1)
		go func() {
			l, err := e.Lock(ctx, "stuck", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		waitQueued(s, t, s.NS+"lock:{stuck}:queue", 1)
		waitSubscribed(s, t, e)
		if ok, err := e.ForceUnlock(ctx, "stuck"); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		var next *Lock
		select {
		case next = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not handed the lock within 5s of ForceUnlock")
		}
		if next.Fence() <= old.Fence() {
			t.Errorf("the waiter's fence %d after the forced holder's %d", next.Fence(), old.Fence())
		}
		if err := old.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("the forced holder's Unlock: %v, want ErrNotHeld", err)
		}
		select {
		case <-old.Lost():
		default:
			t.Error("the forced holder's Lost is open after its Unlock found the lock gone")
		}
		if held, err := next.Held(ctx); !held || err != nil {
			t.Errorf("the waiter's Held = %v, %v", held, err)
		}
		next.Unlock(ctx)
	})
}

// SetSemaphoreLimit under holders and waiters: raising it admits waiters
// at once, lowering it admits nobody until the holders are under it, and
// the limit stays while the semaphore is idle.
func TestSetSemaphoreLimit(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		e.queueTTL = slowExtensions // an admission must come by wake-up
		var held []*Permit
		for i := 0; i < 2; i++ {
			p, err := e.TryAcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 2, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}
		got := make(chan *Permit, 3)
		for i := 0; i < 3; i++ {
			go func() {
				p, err := e.AcquireSemaphore(ctx, "exp", SemaphoreOptions{TTL: time.Minute, Wait: time.Minute})
				if err != nil {
					t.Error(err)
				}
				got <- p
			}()
			waitQueued(s, t, s.NS+"sem:{exp}:queue", i+1)
		}
		if err := e.SetSemaphoreLimit(ctx, "exp", 3); err != nil {
			t.Fatal(err)
		}
		var admitted []*Permit
		select {
		case p := <-got:
			admitted = append(admitted, p)
		case <-time.After(5 * time.Second):
			t.Fatal("raising the limit admitted nobody within 5s")
		}
		if info, err := e.SemaphoreInfo(ctx, "exp"); err != nil || semCounts(info) != (semInfoCounts{Limit: 3, Holders: 3, Waiting: 2}) {
			t.Errorf("after raising: %+v, %v; want limit 3, 3 holders, 2 waiting", info, err)
		}
		if err := e.SetSemaphoreLimit(ctx, "exp", 1); err != nil {
			t.Fatal(err)
		}
		for _, p := range held { // 3 held, then 1: still not under the limit
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case p := <-got:
			t.Fatalf("admitted fence %d with 1 holder and the limit lowered to 1", p.Fence())
		case <-time.After(200 * time.Millisecond):
		}
		if err := admitted[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			admitted = append(admitted, p)
		case <-time.After(5 * time.Second):
			t.Fatal("nobody admitted once the holders were under the lowered limit")
		}
		if info, err := e.SemaphoreInfo(ctx, "exp"); err != nil || semCounts(info) != (semInfoCounts{Limit: 1, Holders: 1, Waiting: 1}) {
			t.Errorf("after lowering: %+v, %v; want limit 1, 1 holder, 1 waiting", info, err)
		}
		admitted[1].Release(ctx)
		(<-got).Release(ctx)
		if info, err := e.SemaphoreInfo(ctx, "exp"); err != nil || semCounts(info) != (semInfoCounts{Limit: 1}) {
			t.Errorf("idle: %+v, %v; want the set limit 1 kept", info, err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 5}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("second permit under the set limit 1 (asking 5): %v", err)
		}
	})
}

// Lock.Context ends when the lock is released, when a watchdog holder
// loses it (within one extension period), and at the lease's end without a
// watchdog.
func TestLockContext(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "c1", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := l.Context(ctx)
		defer cancel()
		if dl, ok := lctx.Deadline(); !ok || time.Until(dl) < 50*time.Second {
			t.Errorf("deadline %v, %v: want the lease's end, about a minute away", dl, ok)
		}
		l.Unlock(ctx)
		if lctx.Err() == nil {
			t.Error("context running after Unlock")
		}

		const lease = 600 * time.Millisecond // a late extension on a loaded machine must not lose it
		wd, err := e.TryLock(ctx, "c2", LockOptions{TTL: lease, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel2 := wd.Context(ctx)
		defer cancel2()
		time.Sleep(2 * lease)
		if wctx.Err() != nil {
			t.Fatalf("a watchdog holder's context ended while extended: %v", wctx.Err())
		}
		s.Must(t, "DEL", s.NS+"lock:{c2}")
		start := time.Now()
		select {
		case <-wctx.Done():
			if took := time.Since(start); took > lease/3+time.Second {
				t.Errorf("context ended %v after the loss, want within an extension period (%v)", took, lease/3)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a watchdog holder's context still running 5s after the lock was deleted")
		}

		nw, err := e.TryLock(ctx, "c3", LockOptions{TTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		nctx, cancel3 := nw.Context(ctx)
		defer cancel3()
		select {
		case <-nctx.Done():
			if !errors.Is(nctx.Err(), context.DeadlineExceeded) {
				t.Errorf("ended with %v, want its deadline", nctx.Err())
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a holder without a watchdog: context still running 5s after a 200ms lease")
		}
	})
}

// A permit with a watchdog is held past several TTLs, and its Lost closes
// when it is deleted behind its back.
func TestPermitWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		const ttl = 300 * time.Millisecond
		p, err := e.TryAcquireSemaphore(ctx, "wd", SemaphoreOptions{Limit: 1, TTL: ttl, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * ttl)
		if held, err := p.Held(ctx); !held || err != nil {
			t.Fatalf("after 4 TTLs with a watchdog: Held = %v, %v", held, err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "wd", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("a second permit while the watched one lives: %v", err)
		}
		s.Must(t, "ZREM", s.NS+"sem:{wd}", p.Token())
		select {
		case <-p.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("Lost still open 5s after the permit was deleted")
		}
		if err := p.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Release of a lost permit: %v, want ErrNotHeld", err)
		}
		if n, _ := redis.Int(s.Do("ZCARD", s.NS+"sem:{wd}:owner")); n != 0 {
			t.Errorf("%d owner entries left", n)
		}
	})
}

// A string at a lock's key that is not a lock's value is free to LockInfo,
// as it is to TryLock, which takes it over; LockInfo used to fail on it
// ("unexpected reply []": its parse's nils cut the reply short).
func TestLockInfoOnAForeignValue(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		s.Must(t, "SET", s.NS+"lock:{foreign}", "not a lock")
		info, err := e.LockInfo(ctx, "foreign")
		if err != nil || info.Held {
			t.Fatalf("LockInfo on a foreign value: %+v, %v; want free", info, err)
		}
		l, err := e.TryLock(ctx, "foreign", LockOptions{})
		if err != nil {
			t.Fatalf("TryLock on a foreign value: %v, want it taken", err)
		}
		if info, err := e.LockInfo(ctx, "foreign"); err != nil || !info.Held || info.Token != l.Token() {
			t.Errorf("LockInfo after TryLock: %+v, %v; want held by %s", info, err, l.Token())
		}
	})
}
