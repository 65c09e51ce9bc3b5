package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// held is a holding of any kind, as the renewal tests take them.
type heldThing interface {
	Lost() <-chan struct{}
	TTL(ctx context.Context) (time.Duration, error)
}

// takeMixed takes n watchdog holdings on e: locks, read holds and
// permits in turn, with lease ttl.
func takeMixed(t *testing.T, ctx context.Context, e *Engine, n int, ttl time.Duration) (all []heldThing, names []string) {
	t.Helper()
	for i := 0; i < n; i++ {
		name := fmt.Sprint("r", i)
		var h heldThing
		var err error
		switch i % 3 {
		case 0:
			h, err = e.TryLock(ctx, name, LockOptions{TTL: ttl, Watchdog: true})
		case 1:
			h, err = e.TryRLock(ctx, name, LockOptions{TTL: ttl, Watchdog: true})
		default:
			h, err = e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 1, TTL: ttl, Watchdog: true})
		}
		if err != nil {
			t.Fatal(err)
		}
		all, names = append(all, h), append(names, name)
	}
	return all, names
}

// A renewal that finds one holding gone loses that one (Lost, EventLost
// wrapping ErrNotHeld) and keeps every other, of every kind.
func TestRenew_LosesOnlyTheGone(t *testing.T) {
	t.Parallel() // it waits for renewals
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		rec := &events{}
		e := engine(s, WithObserver(rec.observe))
		defer e.Close(ctx)
		all, _ := takeMixed(t, ctx, e, 12, 600*time.Millisecond)
		// One lock, one read hold and one permit vanish behind their holders.
		s.Must(t, "DEL", s.NS+"lock:{r3}")
		s.Must(t, "DEL", s.NS+"rw:{r4}", s.NS+"rw:{r4}:holds")
		s.Must(t, "DEL", s.NS+"sem:{r5}", s.NS+"sem:{r5}:owner")
		gone := map[int]bool{3: true, 4: true, 5: true}
		losesOnly(t, ctx, all, gone)
		lost := rec.of(EventLost)
		if len(lost) != len(gone) {
			t.Errorf("%d EventLost, want %d: %v", len(lost), len(gone), lost)
		}
		for _, ev := range lost {
			if !errors.Is(ev.Err, ErrNotHeld) || !map[string]bool{"r3": true, "r4": true, "r5": true}[ev.Name] {
				t.Errorf("EventLost %+v: want r3, r4 or r5, wrapping ErrNotHeld", ev)
			}
		}
	})
}

// A renewal that finds one holding's key of another type (overwritten
// behind its holder) loses that one, and keeps every other in its batch:
// before, the batch script failed on it, and every holding it carried was
// declared lost once retries ran out.
func TestRenew_LosesOnlyTheBroken(t *testing.T) {
	t.Parallel() // it waits for renewals
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		defer e.Close(ctx)
		all, _ := takeMixed(t, ctx, e, 12, 600*time.Millisecond)
		// One lock, one read hold and one permit get a key of another type.
		s.Must(t, "DEL", s.NS+"lock:{r3}")
		s.Must(t, "HSET", s.NS+"lock:{r3}", "x", "y")
		s.Must(t, "DEL", s.NS+"rw:{r4}")
		s.Must(t, "SET", s.NS+"rw:{r4}", "not a zset")
		s.Must(t, "DEL", s.NS+"sem:{r5}")
		s.Must(t, "SET", s.NS+"sem:{r5}", "not a zset")
		losesOnly(t, ctx, all, map[int]bool{3: true, 4: true, 5: true})
	})
}

// An extension number that is not a number (written behind its holder)
// costs no other holding: one server's batch counts it as none, extends
// that holding and writes its own; on a cluster, where each name has its
// own script, a lock's is healed the same way (lock_extend reads the value
// as lock_extend_many does) and a read hold's or a permit's is lost alone.
// (Before, the batch script failed on it, after extending those before
// it, and every holding it carried was lost.)
func TestRenew_HealsAnExtensionNumber(t *testing.T) {
	t.Parallel() // it waits for renewals
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		defer e.Close(ctx)
		all, _ := takeMixed(t, ctx, e, 12, 600*time.Millisecond)
		lock, read, permit := all[6].(*Lock), all[7].(*Lock), all[8].(*Permit)
		v, err := redis.String(s.Do("HGET", s.NS+"lock:{r6}", "v"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(v)
		s.Must(t, "HSET", s.NS+"lock:{r6}", "v", f[0]+" "+f[1]+" x1")
		s.Must(t, "HSET", s.NS+"rw:{r7}:holds", read.Token(), "x1")
		s.Must(t, "SET", permit.seqKey(), "x1", "PX", 600)
		if s.Engines != nil {
			losesOnly(t, ctx, all, map[int]bool{7: true, 8: true})
		} else {
			losesOnly(t, ctx, all, nil)
		}
		if v, _ := redis.String(s.Do("HGET", s.NS+"lock:{r6}", "v")); !strings.HasPrefix(v, lock.Token()+" ") || strings.HasSuffix(v, " x1") {
			t.Errorf("lock r6 after the renewals: %q, want its own extension number back", v)
		}
	})
}

// losesOnly fails t unless the holdings of all whose index is in lost are
// lost within 3 s, and the others (leases of 600 ms) kept by two renewals
// more.
func losesOnly(t *testing.T, ctx context.Context, all []heldThing, lost map[int]bool) {
	t.Helper()
	for i := range lost {
		select {
		case <-all[i].Lost():
		case <-time.After(3 * time.Second):
			t.Fatalf("holding r%d: Lost did not close", i)
		}
	}
	time.Sleep(700 * time.Millisecond) // more than two renewals of the rest
	for i, h := range all {
		if lost[i] {
			continue
		}
		select {
		case <-h.Lost():
			t.Errorf("holding r%d lost with the others", i)
		default:
		}
		if ttl, err := h.TTL(ctx); err != nil || ttl < 300*time.Millisecond {
			t.Errorf("holding r%d: TTL %v, %v: the renewal should keep it", i, ttl, err)
		}
	}
}

// A renewal numbered before an Extend but landing after it changes
// nothing: the lease stays the Extend's, for a lock, a read-write hold
// and a permit, on every path (batch scripts on one server, a pipeline per
// node on a cluster).
func TestRenew_LateRenewalCannotUndoExtend(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s)
		defer e.Close(ctx)
		l, err := e.TryLock(ctx, "late", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		w, err := e.TryWLock(ctx, "late", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.TryAcquireSemaphore(ctx, "late", SemaphoreOptions{Limit: 2, TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		hs := []*holding{&l.holding, &w.holding, &p.holding}
		ttls := []func() (time.Duration, error){
			func() (time.Duration, error) { return l.TTL(ctx) },
			func() (time.Duration, error) { return w.TTL(ctx) },
			func() (time.Duration, error) { return p.TTL(ctx) },
		}
		r := &renewer{}
		seq := e.renew.extensions.Add(1) // the renewal is numbered first, one number for its batch as the renewer's ...
		for _, h := range hs {
			r.batch = append(r.batch, &renewal{h: h, lease: time.Second, seq: seq, deadline: time.Now().Add(time.Minute)})
		}
		for _, h := range hs {
			// ... then the caller's Extend, with a longer lease, lands first.
			if err := h.extend(ctx, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		r.send(ctx, e, time.Now())
		for i, x := range r.batch {
			if !x.held || x.err != nil {
				t.Errorf("%s: the late renewal: held %v, %v; want held (a newer extension stands)", hs[i].obj.kind.noun, x.held, x.err)
			}
			if ttl, err := ttls[i](); err != nil || ttl < time.Minute {
				t.Errorf("%s: TTL %v, %v after a late renewal of 1s: want the Extend's 2m to stand", hs[i].obj.kind.noun, ttl, err)
			}
		}
		// A renewal numbered after the Extend applies.
		r.batch = r.batch[:0]
		seq = e.renew.extensions.Add(1)
		for _, h := range hs {
			r.batch = append(r.batch, &renewal{h: h, lease: 30 * time.Second, seq: seq, deadline: time.Now().Add(time.Minute)})
		}
		r.send(ctx, e, time.Now())
		for i, x := range r.batch {
			if !x.held || x.err != nil {
				t.Errorf("%s: a current renewal: held %v, %v", hs[i].obj.kind.noun, x.held, x.err)
			}
			if ttl, err := ttls[i](); err != nil || ttl > 30*time.Second {
				t.Errorf("%s: TTL %v, %v after a current renewal of 30s", hs[i].obj.kind.noun, ttl, err)
			}
		}
	})
}

// A renewal of holdings with different leases, interleaved, extends each
// to its own lease: a batch script carries one lease, so the renewal
// sends one per lease and kind.
func TestRenew_KeepsEachLease(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s)
		defer e.Close(ctx)
		leases := []time.Duration{time.Minute, 3 * time.Minute, 2 * time.Minute}
		var hs []*holding
		var ttls []func(context.Context) (time.Duration, error)
		for i := range 6 {
			name := fmt.Sprint("each", i)
			l, err := e.TryLock(ctx, name, LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			w, err := e.TryRLock(ctx, name+"rw", LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 1, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, &l.holding, &w.holding, &p.holding)
			ttls = append(ttls, l.TTL, w.TTL, p.TTL)
		}
		r := &renewer{}
		seq := e.renew.extensions.Add(1)
		for i, h := range hs {
			r.batch = append(r.batch, &renewal{h: h, lease: leases[i/3%len(leases)], seq: seq, deadline: time.Now().Add(time.Minute)})
		}
		r.send(ctx, e, time.Now())
		for i, x := range r.batch {
			if !x.held || x.err != nil {
				t.Fatalf("%s %d: held %v, %v", x.h.obj.kind.noun, i, x.held, x.err)
			}
		}
		for i, h := range hs {
			want := leases[i/3%len(leases)] // hs holds a lock, a read hold and a permit of each name
			if ttl, err := ttls[i](ctx); err != nil || ttl > want || ttl < want-10*time.Second {
				t.Errorf("%s %d: TTL %v, %v after a renewal of %v", h.obj.kind.noun, i, ttl, err, want)
			}
		}
	})
}

// Renewals that fail (the server unreachable) are retried: a holding
// survives them while its lease lasts, and is lost once it would have
// run out (EventExtendFailed before, EventLost wrapping ErrNotHeld after).
// TestRenew_ExtendWhileTheRenewerStarts extends a lock without a watchdog while
// another goroutine takes the engine's first watchdog lock: Extend pokes
// the renewer, whose first holding starts it. The renewer's fields are
// made in New, so the two share nothing unsynchronized; under -race, the
// channel made at the first holding instead (stop 33's CI) is a data race
// between the poke's read and that write. Without -race this checks only
// that both calls succeed.
func TestRenew_ExtendWhileTheRenewerStarts(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		for i := range 10 {
			e := engine(s)
			plain, err := e.TryLock(ctx, fmt.Sprint("plain", i), LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			var extendErr, lockErr error
			var dog *Lock
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				extendErr = plain.Extend(ctx, 2*time.Minute)
			}()
			go func() {
				defer wg.Done()
				<-start
				dog, lockErr = e.TryLock(ctx, fmt.Sprint("dog", i), LockOptions{TTL: time.Minute, Watchdog: true})
			}()
			close(start)
			wg.Wait()
			if extendErr != nil || lockErr != nil {
				t.Fatalf("Extend: %v; the watchdog lock: %v", extendErr, lockErr)
			}
			if err := errors.Join(dog.Unlock(ctx), plain.Unlock(ctx)); err != nil {
				t.Fatal(err)
			}
			e.Close(ctx)
		}
	})
}

func TestRenew_SurvivesFailuresUntilTheLease(t *testing.T) {
	t.Parallel() // it waits out leases
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		ctx := ctxT(t)
		rec := &events{}
		proxy := startProxy(t, s.Addr, faults{})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS), WithObserver(rec.observe))
		defer e.Close(ctx)
		const ttl = 900 * time.Millisecond
		all, _ := takeMixed(t, ctx, e, 6, ttl)
		defer proxy.refuse.Store(false) // before Close: its releases get through

		// A third of the lease without a server: failures, no loss.
		proxy.refuse.Store(true)
		proxy.cutAll()
		for deadline := time.Now().Add(2 * time.Second); len(rec.of(EventExtendFailed)) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no EventExtendFailed in 2s with the server refused")
			}
		}
		time.Sleep(ttl / 4)
		proxy.refuse.Store(false)
		time.Sleep(ttl)
		for i, h := range all {
			select {
			case <-h.Lost():
				t.Fatalf("holding r%d lost after failures shorter than its lease: %v", i, rec.of(EventLost))
			default:
			}
		}

		// Refused for good: each is lost once its lease would have run out,
		// not before.
		proxy.refuse.Store(true)
		proxy.cutAll()
		cut := time.Now()
		for i, h := range all {
			select {
			case <-h.Lost():
			case <-time.After(3 * ttl):
				t.Fatalf("holding r%d: Lost still open %v after the server went away", i, time.Since(cut))
			}
		}
		if d := time.Since(cut); d < ttl/2 {
			t.Errorf("all lost %v after the server went away: before their leases (%v) could have run out", d, ttl)
		}
		// Lost closes just before EventLost goes out: give the last one a moment.
		for deadline := time.Now().Add(time.Second); len(rec.of(EventLost)) < len(all) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		for _, ev := range rec.of(EventLost) {
			if !errors.Is(ev.Err, ErrNotHeld) || !strings.Contains(ev.Err.Error(), "extensions failed until the lease ran out") || ev.Reason != LostError {
				t.Errorf("EventLost %+v: want extensions failed until the lease ran out, wrapping ErrNotHeld, for reason %q", ev, LostError)
			}
		}
		if n := len(rec.of(EventLost)); n != len(all) {
			t.Errorf("%d EventLost, want %d", n, len(all))
		}
	})
}

// One goroutine renews every holding: 1,000 watchdog holdings add a few
// goroutines to an engine (its renewer, the pool's), not one each; and
// the renewer ends when the last holding goes.
func TestRenew_OneGoroutine(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Mini == nil && testing.Short() {
			t.Skip("1,000 holdings: miniredis only with -short")
		}
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		defer e.Close(ctx)
		first, err := e.TryLock(ctx, "g", LockOptions{TTL: 2 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		before := runtime.NumGoroutine()
		// One after another: parallel calls would open connections, and
		// miniredis serves each on a goroutine.
		var ls []*Lock
		for i := 0; i < 1000; i++ {
			l, err := e.TryLock(ctx, fmt.Sprint("g", i), LockOptions{TTL: 2 * time.Second, Watchdog: true})
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		time.Sleep(time.Second) // renewals run: each is due two thirds of a second after its grant
		if n := runtime.NumGoroutine() - before; n > 10 {
			t.Errorf("1,000 watchdog holdings added %d goroutines, want at most 10", n)
		}
		for _, l := range append(ls[:10:10], first) {
			if held, err := l.Held(ctx); !held || err != nil {
				t.Errorf("%s, 1s after the last of 2s leases was taken: Held = %v, %v", l.obj.name, held, err)
			}
		}
		if err := each(len(ls), func(i int) error { return ls[i].Unlock(ctx) }); err != nil {
			t.Fatal(err)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		e.renew.mu.Lock()
		n := len(e.renew.held)
		e.renew.mu.Unlock()
		if n != 0 {
			t.Errorf("the renewer keeps %d holdings after every Unlock", n)
		}
	})
}

// WithReplicaAck applies to renewals: each renewal's pipeline ends with
// WAIT, and too few acknowledgements are a failed extension
// (EventExtendFailed wrapping ErrNotReplicated), retried as any other.
func TestRenew_WaitsForReplicas(t *testing.T) {
	testserver.Parallel(t)
	primary, replica := startReplicated(t)
	ctx := ctxT(t)
	rec := &events{}
	e := engine(primary, WithReplicaAck(1, time.Second), WithObserver(rec.observe))
	defer e.Close(ctx)
	const ttl = 3 * time.Second // a renewal may wait a second for WAIT
	all, _ := takeMixed(t, ctx, e, 3, ttl)
	time.Sleep(ttl) // renewals, each acknowledged by the replica
	if evs := rec.of(EventExtendFailed); len(evs) != 0 {
		t.Errorf("extensions failed with a replica acknowledging: %v", evs)
	}
	if ms, err := redis.Int64(replica.Do("PTTL", primary.NS+"lock:{r0}")); err != nil || ms <= 0 {
		t.Errorf("the replica's lock PTTL %d, %v: want it renewed", ms, err)
	}
	// The replica leaves: no renewal is acknowledged now.
	replica.Must(t, "REPLICAOF", "NO", "ONE")
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		evs := rec.of(EventExtendFailed)
		if len(evs) > 0 {
			if !errors.Is(evs[0].Err, ErrNotReplicated) {
				t.Errorf("EventExtendFailed %+v: want it wrapping ErrNotReplicated", evs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no EventExtendFailed in 3s with no replica to acknowledge")
		}
	}
	for i, h := range all {
		select {
		case <-h.Lost():
		case <-time.After(3 * ttl):
			t.Errorf("holding r%d: renewals unacknowledged past its lease, and Lost still open (%d failed extensions)", i, len(rec.of(EventExtendFailed)))
		}
	}
}

func TestRenew_WatchdogLost(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		if n := watchdogs(); n != 0 {
			t.Fatalf("%d watchdogs before the test", n)
		}
		l, err := e.TryLock(ctx, "gone", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "DEL", s.NS+"lock:{gone}")
		select {
		case <-l.Lost():
		case <-time.After(3 * time.Second):
			t.Fatal("Lost did not close after the key vanished")
		}
		waitWatchdogs(t, 0)
		if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Unlock of a lost lock: %v", err)
		}
	})
}

// A watchdog holding is lost when its span runs out after its last
// extension even while the renewer waits on another batch's reply (here
// 1.5 s late, within the call's timeout): its Context ends before another
// engine can take it. (Before, only the renewer ended it, once the slow
// batch returned: another engine held b while b's Context was live.)
func TestRenew_StalledBatchHidesNoLoss(t *testing.T) {
	testserver.Parallel(t) // waits out a lease
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("a plain pool in front of one server")
		}
		s.Realtime(t)
		ctx := ctxT(t)
		sp := &stallPool{p: s.Pool, stallFor: 1500 * time.Millisecond}
		e := New(sp, WithNamespace(s.NS))
		defer e.Close(ctx)
		other := engine(s)
		a, err := e.TryLock(ctx, "a", LockOptions{TTL: 3 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Unlock(ctx)
		time.Sleep(500 * time.Millisecond)
		sp.stall.Store(true) // a's next batch, at about 1 s, gets its reply 1.5 s late
		time.Sleep(700 * time.Millisecond)
		sp.stall.Store(false)
		b, err := e.TryLock(ctx, "b", LockOptions{TTL: time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		work, stop := b.Context(ctx)
		defer stop()
		time.Sleep(1150 * time.Millisecond)
		o, err := other.TryLock(ctx, "b", LockOptions{TTL: 10 * time.Second})
		if err == nil && work.Err() == nil {
			t.Errorf("another engine holds b while b's Context is live")
		}
		if o != nil {
			o.Unlock(ctx)
		}
	})
}

// Unlock stops the watchdog itself, before it returns: the goroutine is
// gone at once (not at its next wake-up, when an extension would find the lock
// gone) and no extension is sent afterwards.
func TestRenew_UnlockStopsWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		pool := &countingPool{Pool: s.Pool}
		e := New(pool, WithNamespace(s.NS))
		waitWatchdogs(t, 0)
		if t.Failed() {
			t.Fatal("another test left a watchdog running")
		}

		// A 30s lease: the watchdog next wakes after 10s, so only Unlock can
		// end it within waitWatchdogs' two seconds.
		long, err := e.TryLock(ctx, "long", LockOptions{TTL: 30 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		waitWatchdogs(t, 1)
		if err := long.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		waitWatchdogs(t, 0)

		// A 300ms lease extends every 100ms: after Unlock, nothing is sent.
		short, err := e.TryLock(ctx, "short", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		taken := pool.gets.Load()
		for deadline := time.Now().Add(2 * time.Second); pool.gets.Load() == taken; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no extension in 2s (one is due every 100ms): the watchdog is not running, the test is blind")
			}
		}
		if err := short.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		unlocked := pool.gets.Load()
		time.Sleep(400 * time.Millisecond) // four extension periods
		if n := pool.gets.Load() - unlocked; n != 0 {
			t.Errorf("%d calls sent after Unlock returned, want none", n)
		}
		waitWatchdogs(t, 0)

		// A new holder's short lease runs out on time: nothing extends it.
		next, err := e.TryLock(ctx, "short", LockOptions{TTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Advance(250 * time.Millisecond)
		if held, err := next.Held(ctx); held || err != nil {
			t.Errorf("the next holder's 200ms lease after 250ms: Held = %v, %v", held, err)
		}
	})
}

// A watchdog permit whose entry in the owner set vanished behind its
// holder (evicted, say) is lost at its next renewal, and the renewal hands
// its slot to the waiter queued for it before Lost closes.
func TestRenew_GonePermitHandsItsSlotOn(t *testing.T) {
	testserver.Parallel(t) // waits for a renewal
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		w := engine(s)
		w.queueTTL = slowExtensions // the waiter looks again only when woken, or at the permit's end
		o := SemaphoreOptions{Limit: 1, TTL: 6 * time.Second, Watchdog: true}
		p, err := e.TryAcquireSemaphore(ctx, "gone", o)
		if err != nil {
			t.Fatal(err)
		}
		c := make(chan permitOrErr, 1)
		go func() {
			q, err := w.AcquireSemaphore(ctx, "gone", SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: 30 * time.Second})
			c <- permitOrErr{p: q, err: err}
		}()
		waitFor(t, func() bool {
			info, err := e.SemaphoreInfo(ctx, "gone")
			return err == nil && info.Waiting == 1
		})
		s.Must(t, "DEL", object{kind: kindSem, name: "gone", ns: s.NS}.key(":owner"))
		select {
		case <-p.Lost():
		case <-time.After(10 * time.Second): // its renewal is due at 2 s
			t.Fatal("the permit gone from the owner set was not lost in 10 s")
		}
		// The permit's lease would run 4 s more: only the renewal that
		// found it gone can have given its slot to the waiter.
		info, err := e.SemaphoreInfo(ctx, "gone")
		if err != nil || info.Waiting != 0 || info.Holders != 1 {
			t.Errorf("when Lost closed: %+v, %v; want the waiter holding the slot (1 holder, none waiting)", semCounts(info), err)
		}
		r := got(t, c)
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		if err := r.p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// After a renewal of one read hold, the read-write lock's keys live as
// long as the longest live hold, another reader's without a watchdog, not
// the renewed one's lease.
func TestRenew_ReadHoldKeepsTheLongestLease(t *testing.T) {
	t.Parallel() // it waits for a renewal
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		long, err := e.TryRLock(ctx, "shared", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer long.Unlock(ctx)
		short, err := e.TryRLock(ctx, "shared", LockOptions{TTL: 1500 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer short.Unlock(ctx)
		leases := object{kind: kindRW, name: "shared", ns: s.NS}.key("")
		first, err := redis.Int64(s.Do("ZSCORE", leases, short.Token()))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { // a renewal moved the short hold's deadline
			d, err := redis.Int64(s.Do("ZSCORE", leases, short.Token()))
			return err == nil && d > first
		})
		if pttl := s.PTTL(t, leases); pttl < 50*time.Second {
			t.Errorf("after the renewal the leases expire in %v, want the long hold's minute", pttl)
		}
	})
}

// Two watchdog locks of one lease, taken a fifth of a lease apart, come to
// share their renewals: the second one due rides along with the first's
// batch, and from then on one script extends both (their keys expire at
// the same instant).
func TestRenew_HoldingsOfOneLeaseShareABatch(t *testing.T) {
	testserver.Parallel(t) // it waits for renewals
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("reads both keys in one script: one server")
		}
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		const lease = 3 * time.Second
		a, err := e.TryLock(ctx, "sa", LockOptions{TTL: lease, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Unlock(ctx)
		time.Sleep(lease / 5)
		b, err := e.TryLock(ctx, "sb", LockOptions{TTL: lease, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Unlock(ctx)
		ka, kb := object{kind: kindLock, name: "sa", ns: s.NS}.key(""), object{kind: kindLock, name: "sb", ns: s.NS}.key("")
		both := `return {redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}`
		var last []int64
		for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if last, err = redis.Int64s(s.Do("EVAL", both, 2, ka, kb)); err != nil {
				t.Fatal(err)
			}
			if last[0] == last[1] {
				return
			}
		}
		t.Errorf("after %v the two locks still expire apart (PTTL %v): each renewed in a batch of its own", 3*lease, last)
	})
}

// silentPool dials a connection of its own for each call; while silent is
// set, a reply read is never answered (a server that went silent): the
// read waits for its context or its timeout and fails, and the connection
// is dropped.
type silentPool struct {
	addr   string
	silent atomic.Bool
}

func (p *silentPool) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := redis.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &silentConn{Conn: c, p: p}, nil
}

type silentConn struct {
	redis.Conn
	p *silentPool
}

func (c *silentConn) Receive() (any, error) { return c.ReceiveContext(context.Background()) }

func (c *silentConn) ReceiveContext(ctx context.Context) (any, error) {
	if c.p.silent.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return c.Conn.(redis.ConnWithContext).ReceiveContext(ctx)
}

func (c *silentConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	return c.Conn.(redis.ConnWithContext).DoContext(ctx, cmd, args...)
}

// ReceiveWithTimeout and DoWithTimeout, the engine's way in: while silent,
// the command goes out and no reply comes back within d.
func (c *silentConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	if c.p.silent.Load() {
		time.Sleep(d)
		return nil, fmt.Errorf("silent server: %w", os.ErrDeadlineExceeded)
	}
	return redis.ReceiveWithTimeout(c.Conn, d)
}

func (c *silentConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	if c.p.silent.Load() {
		if err := c.Conn.Send(cmd, args...); err != nil {
			return nil, err
		}
		c.Conn.Flush()
		time.Sleep(d)
		return nil, fmt.Errorf("silent server: %w", os.ErrDeadlineExceeded)
	}
	return redis.DoWithTimeout(c.Conn, d, cmd, args...)
}

// A renewal that the server never answers is given up at its holding's
// loss, not at the end of a longer call timeout: the renewer is free again
// by then, and a holding taken once the server answers again is kept.
// (Had it waited out the call timeout, the later holding's lease would
// have passed unextended, and it would have been lost too.)
func TestRenew_SilentServerHoldsUpNoLaterHolding(t *testing.T) {
	testserver.Parallel(t) // waits out a lease
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		ctx := ctxT(t)
		sp := &silentPool{addr: s.Addr}
		e := New(sp, WithNamespace(s.NS), WithCallTimeout(20*time.Second))
		defer e.Close(ctx)
		a, err := e.TryLock(ctx, "a", LockOptions{TTL: 600 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		sp.silent.Store(true)
		select {
		case <-a.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("a, its renewals unanswered, was not lost in 10 s")
		}
		sp.silent.Store(false)
		b, err := e.TryLock(ctx, "b", LockOptions{TTL: 1500 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Unlock(ctx)
		time.Sleep(4 * time.Second) // more than two of b's leases
		select {
		case <-b.Lost():
			t.Fatal("b, taken once the server answered again, was lost: its renewals waited behind a's")
		default:
		}
		if held, err := b.Held(ctx); !held || err != nil {
			t.Fatalf("b: Held = %v, %v", held, err)
		}
	})
}

// An extension numbered as the last one applied to a lock changes nothing
// (reply 2), in the batch script as in lock_extend: the engine never sends
// one number twice to one holding (every batch and Extend takes a new
// one, and only a call NOSCRIPT refused is sent again), so this is the
// scripts' contract, run here directly.
func TestRenew_ExtensionNumberedAsTheLastChangesNothing(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		l, err := e.TryLock(ctx, "dup", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		key := object{kind: kindLock, name: "dup", ns: s.NS}.key("")
		c := s.Pool.Get()
		defer c.Close()
		for i, want := range []int64{1, 2} {
			v, err := redis.Int64s(scriptLockExtends.Do(c, 1, key, 30000, 7, l.Token()))
			if err != nil || len(v) != 1 || v[0] != want {
				t.Fatalf("lock_extend_many numbered 7, time %d: %v, %v; want [%d]", i+1, v, err, want)
			}
		}
		if got, err := redis.Int64(scriptLockExtend.Do(c, key, l.Token(), 30000, 7)); err != nil || got != 2 {
			t.Fatalf("lock_extend numbered 7 after it: %v, %v; want 2", got, err)
		}
		if pttl := s.PTTL(t, key); pttl > 30*time.Second || pttl < 20*time.Second {
			t.Fatalf("the lock expires in %v, want the 30 s of the extension", pttl)
		}
	})
}
