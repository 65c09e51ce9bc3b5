package atomicredisotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/atomicredisotel"
)

// LockAll is one acquisition, whether it took its names at once or one by
// one (its names' own acquisitions are not counted again), and it queued
// if any name queued.
func TestLockAllCountedOnce(t *testing.T) {
	s := server(t)
	s.Realtime(t)
	tel := newTelemetry(t)
	e := atomicredis.New(s.Pool, atomicredis.WithNamespace(s.NS), tel.options())
	defer e.Close(context.Background())
	ctx := context.Background()
	m, err := e.LockAll(ctx, []string{"one"}, atomicredis.LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := tel.histogram(t, "atomicredis.acquire.duration"); n != 1 {
		t.Errorf("acquire.duration after one LockAll of one name: %d points, want 1", n)
	}
	m.Unlock(ctx)
	other := atomicredis.New(s.Pool, atomicredis.WithNamespace(s.NS))
	defer other.Close(context.Background())
	b, err := other.Lock(ctx, "b", atomicredis.LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); b.Unlock(ctx) }()
	m, err = e.LockAll(ctx, []string{"a", "b"}, atomicredis.LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	if n, _ := tel.histogram(t, "atomicredis.acquire.duration"); n != 2 {
		t.Errorf("acquire.duration after a second LockAll, which waited: %d points, want 2", n)
	}
	if n, _ := tel.histogram(t, "atomicredis.acquire.duration", acquired, queued); n != 1 {
		t.Errorf("the LockAll that waited for b: %d points with queued=true, want 1", n)
	}
	if n := len(spanNamed(tel, "atomicredis.Lock")); n != 0 {
		t.Errorf("%d atomicredis.Lock spans under LockAll, want none", n)
	}
}

// atomicredis.holdings comes back to 0 however holdings end: leases left
// to run out (found by Close, or pruned from the engine's registry) end
// as expired, not lost; elections, weighted permits and read holds end
// with Close; a campaign cancelled in the queue stops waiting.
func TestHoldingsBalance(t *testing.T) {
	s := server(t)
	s.Realtime(t)
	tel := newTelemetry(t)
	e := atomicredis.New(s.Pool, atomicredis.WithNamespace(s.NS), tel.options())
	ctx := context.Background()

	if _, err := e.TryLock(ctx, "lapse", atomicredis.LockOptions{TTL: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// Enough short leases that the registry prunes those that ran out.
	for i := range 1100 {
		if _, err := e.TryLock(ctx, fmt.Sprint("short-", i), atomicredis.LockOptions{TTL: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if i == 600 {
			time.Sleep(50 * time.Millisecond) // the first 600 run out
		}
	}
	el := e.Election("boss", atomicredis.ElectionOptions{TTL: 300 * time.Millisecond})
	if _, err := el.Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := el.Campaign(cctx, "two"); done <- err }()
	waitFor(t, "the second campaign waiting", func() bool { return tel.sum(t, "atomicredis.waiters") == 1 })
	cancel()
	<-done
	p1, err := e.AcquireSemaphore(ctx, "sem", atomicredis.SemaphoreOptions{Limit: 3, Weight: 2, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); p1.Release(ctx) }()
	if _, err := e.AcquireSemaphore(ctx, "sem", atomicredis.SemaphoreOptions{Limit: 3, Weight: 2, TTL: time.Minute, Wait: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RLock(ctx, "rw", atomicredis.LockOptions{TTL: time.Minute, Watchdog: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // every short lease has run out
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := tel.sum(t, "atomicredis.holdings"); n != 0 {
		t.Errorf("holdings after Close: %d, want 0", n)
	}
	if n := tel.sum(t, "atomicredis.waiters"); n != 0 {
		t.Errorf("waiters after Close: %d, want 0", n)
	}
	if n := tel.sum(t, "atomicredis.lost"); n != 0 {
		t.Errorf("lost after leases left to run out and Close: %d, want 0", n)
	}
	if n := len(spanNamed(tel, "atomicredis.Close")); n != 1 {
		t.Errorf("%d atomicredis.Close spans, want 1", n)
	}
}

// A lease that ran out, found by an Extend to a longer TTL, is lost as
// expired, not taken: the lease in force decides, not the one asked for.
func TestExtendAfterExpiryReason(t *testing.T) {
	s := server(t)
	s.Realtime(t)
	tel := newTelemetry(t)
	e := atomicredis.New(s.Pool, atomicredis.WithNamespace(s.NS), tel.options())
	defer e.Close(context.Background())
	ctx := context.Background()
	l, err := e.TryLock(ctx, "ext", atomicredis.LockOptions{TTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := l.Extend(ctx, time.Minute); err == nil {
		t.Fatal("Extend after the lease ran out: nil")
	}
	reason := atomicredisotel.AttrLostReason
	if taken, expired := tel.sum(t, "atomicredis.lost", reason.String("taken")), tel.sum(t, "atomicredis.lost", reason.String("expired")); taken != 0 || expired != 1 {
		t.Errorf("lost taken %d, expired %d; want 0 and 1", taken, expired)
	}
}
