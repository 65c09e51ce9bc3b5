package atomicredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// syncBuffer is a bytes.Buffer safe for a logger on several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// An acquisition whose Limit differs from the stored limit reports it once
// per (engine, name, stored limit), granted or refused: an
// EventLimitDiffers whose Err names both limits, and a WARN log line.
// Agreeing limits and Limit 0 report nothing.
func TestEvents_StoredLimitDiffersIsReported(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		rec := &recorder{}
		var logs syncBuffer
		e := engine(s, WithObserver(rec.observe), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		differs := func() []string {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var out []string
			for _, ev := range rec.events {
				if ev.Type == EventLimitDiffers {
					var ae *Error
					if !errors.As(ev.Err, &ae) || ev.Object != "semaphore" || ev.Name != ae.Name {
						t.Errorf("event %+v: want Object semaphore and an *Error naming it", ev)
					}
					out = append(out, ev.Name+": "+ae.Err.Error())
				}
			}
			return out
		}
		try := func(name string, limit int) error {
			_, err := e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: limit})
			return err
		}
		if err := try("s", 2); err != nil { // stores 2
			t.Fatal(err)
		}
		if err := try("s", 2); err != nil {
			t.Fatal(err)
		}
		if got := differs(); len(got) != 0 {
			t.Fatalf("agreeing limits reported: %q", got)
		}
		// A deploy asks 3: refused (the stored 2 are held), reported once.
		for i := 0; i < 3; i++ {
			if err := try("s", 3); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("Limit 3 over a stored 2, both held: %v, want ErrNotAcquired", err)
			}
		}
		if err := try("s", 0); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("Limit 0: %v", err)
		}
		// The administrator raises it to 5: Limit 3 is granted under the
		// stored 5, and that is a new value to report, once.
		if err := e.SetSemaphoreLimit(ctx, "s", 5); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := try("s", 3); err != nil {
				t.Fatalf("Limit 3 under a stored 5: %v", err)
			}
		}
		if err := try("s", 5); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"s: stored limit 2 rules, not Limit 3 (SetSemaphoreLimit changes it)",
			"s: stored limit 5 rules, not Limit 3 (SetSemaphoreLimit changes it)",
		}
		if got := differs(); !slices.Equal(got, want) {
			t.Errorf("reported:\n%q\nwant\n%q", got, want)
		}
		if n := strings.Count(logs.String(), `level=WARN msg="atomicredis: limit differs" object=semaphore name=s`); n != 2 {
			t.Errorf("%d WARN lines, want 2:\n%s", n, logs.String())
		}
		// Another engine has its own memory: it reports the same again.
		other := engine(s, WithObserver(rec.observe))
		if _, err := other.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 3}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("a fifth permit under 5: %v", err)
		}
		if got := differs(); len(got) != 3 || got[2] != want[1] {
			t.Errorf("the other engine: reported %q", got)
		}
	})
}

// An engine remembers at most limitsRemembered reported (name, limit)
// pairs; past that, one is forgotten for each new one.
func TestEvents_StoredLimitMemoryIsBounded(t *testing.T) {
	s := testserver.Mini(t)
	n := 0
	e := New(s.Pool, WithObserver(func(ev Event) { n++ }))
	obj, err := e.object(kindSem, "s")
	if err != nil {
		t.Fatal(err)
	}
	for i := range limitsRemembered + 500 {
		e.limitDiffers(obj, int64(i+2), 1)
	}
	e.limitDiffers(obj, limitsRemembered+500+2, 1) // the last one: remembered
	e.limitDiffers(obj, limitsRemembered+500+2, 1)
	if len(e.limits) != limitsRemembered || n != limitsRemembered+501 {
		t.Errorf("%d remembered, %d reported; want %d and %d", len(e.limits), n, limitsRemembered, limitsRemembered+501)
	}
	if got := fmt.Sprint(EventLimitDiffers); got != "limit differs" {
		t.Errorf("EventLimitDiffers prints %q", got)
	}
}

// Every event type, from a scenario that causes it, for locks, read-write
// locks and semaphores.
func TestEvents_Delivered(t *testing.T) {
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
		if ev := rec.wait(t, EventLost, "gone"); !errors.Is(ev.Err, ErrNotHeld) || ev.Fence != wd.Fence() || ev.Reason != LostTaken {
			t.Errorf("lost: %+v, want reason %q (gone while its lease ran)", ev, LostTaken)
		}

		// Lost when its lease ran out: found gone by a call (the client's
		// clock decides that the lease may have run out: a real wait).
		s.Realtime(t)
		short, err := e.TryLock(ctx, "short", LockOptions{TTL: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if held, err := short.Held(ctx); held || err != nil {
			t.Fatalf("Held past the lease: %v, %v", held, err)
		}
		if err := short.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Unlock past the lease: %v", err)
		}
		if ev := rec.wait(t, EventLost, "short"); ev.Reason != LostExpired {
			t.Errorf("lost past its lease: %+v, want reason %q", ev, LostExpired)
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

// WithLogger: background failures at Warn, lost holdings at Error, with
// the object, its name and the error; nothing for the daily business.
func TestEvents_Logger(t *testing.T) {
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
