package atomicredis

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// Weighted permits (SemaphoreOptions.Weight): a permit takes Weight of the
// limit, waiters are admitted strictly in arrival order whatever their
// weights, and a weight above the limit in force is refused in the script.

// slowWaitEngine is an engine whose waiters extend their queue entries
// only every 3 s, so a waiter that gets its permit sooner was woken by the
// script that admitted it (or refused it), not found it on its own.
func slowWaitEngine(s *testserver.Server) *Engine {
	e := engine(s)
	e.queueTTL = 10 * time.Second
	return e
}

// acquireAsync runs AcquireSemaphore in the background once the server
// shows queued-1 waiters already in the queue, and waits until it shows
// the new one queued too (so waiters queue in the order started).
func acquireAsync(t *testing.T, s *testserver.Server, e *Engine, name string, o SemaphoreOptions, queued int) <-chan permitOrErr {
	t.Helper()
	out := make(chan permitOrErr, 1)
	go func() {
		p, err := e.AcquireSemaphore(context.Background(), name, o)
		out <- permitOrErr{p, err, time.Now()}
	}()
	waitQueued(s, t, s.NS+"sem:{"+name+"}:queue", queued)
	return out
}

type permitOrErr struct {
	p   *Permit
	err error
	at  time.Time
}

// got waits (generously) for an acquisition started by acquireAsync.
func got(t *testing.T, c <-chan permitOrErr) permitOrErr {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("acquisition did not return in 10 s")
	}
	return permitOrErr{}
}

// pending fails t if the acquisition has returned already.
func pending(t *testing.T, c <-chan permitOrErr, what string) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("%s returned (%v, %v), want it still waiting", what, r.p.Token(), r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWeightInvalid(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		if _, err := e.TryAcquireSemaphore(ctx, "w", SemaphoreOptions{Limit: 5, Weight: 2}); err != nil {
			t.Fatal(err)
		}
		before := s.Snapshot(t)
		for _, o := range []SemaphoreOptions{
			{Limit: 5, Weight: -1},
			{Limit: 5, Weight: 1 << 53},
			{Limit: 5, Weight: 6},  // above the stored limit
			{Limit: 50, Weight: 6}, // the stored limit rules
			{Weight: 6},
		} {
			for _, wait := range []bool{false, true} {
				var err error
				if wait {
					_, err = e.AcquireSemaphore(ctx, "w", o)
				} else {
					_, err = e.TryAcquireSemaphore(ctx, "w", o)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("Weight %d (Limit %d, wait %v): %v, want ErrInvalid", o.Weight, o.Limit, wait, err)
				}
			}
		}
		// With no limit stored, the caller's Limit is the one in force.
		if _, err := e.AcquireSemaphore(ctx, "fresh", SemaphoreOptions{Limit: 2, Weight: 3}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Weight 3 over Limit 2: %v, want ErrInvalid", err)
		} else {
			t.Log(err)
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("a refused weight wrote:\nbefore %v\nafter  %v", before, after)
		}
	})
}

// Three weight-1 waiters behind a weight-3 holder all get in at its
// release, in arrival order, each woken by the release script.
func TestWeightReleaseAdmitsSeveral(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := slowWaitEngine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 3, TTL: time.Minute, Wait: 30 * time.Second}
		heavy, err := e.TryAcquireSemaphore(ctx, "rs", SemaphoreOptions{Limit: 3, TTL: time.Minute, Weight: 3})
		if err != nil {
			t.Fatal(err)
		}
		// One permit holds the whole limit: the refusal counts weight, not permits.
		if _, err := e.TryAcquireSemaphore(ctx, "rs", SemaphoreOptions{Limit: 3}); !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), `"rs": 3 of 3 held, none free; the first permit times out in `) {
			t.Errorf("TryAcquireSemaphore beside a weight-3 permit on limit 3: %v, want ErrNotAcquired saying 3 of 3 held", err)
		}
		var waiters []<-chan permitOrErr
		for i := range 3 {
			waiters = append(waiters, acquireAsync(t, s, e, "rs", o, i+1))
		}
		released := time.Now()
		if err := heavy.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var last int64
		for i, c := range waiters {
			r := got(t, c)
			if r.err != nil {
				t.Fatalf("waiter %d: %v", i, r.err)
			}
			if took := r.at.Sub(released); took > 2*time.Second {
				t.Errorf("waiter %d got its permit %v after the release: not woken", i, took)
			}
			if r.p.Fence() <= last {
				t.Errorf("waiter %d: fence %d after %d: not in arrival order", i, r.p.Fence(), last)
			}
			last = r.p.Fence()
		}
		if info := semInfo(t, e, "rs"); info.Holders != 3 || info.Held != 3 || info.Waiting != 0 {
			t.Errorf("SemaphoreInfo %+v, want 3 holders holding 3", info)
		}
	})
}

// Strict head of line: a weight-2 waiter at the head blocks a weight-1
// arrival even with one slot free, and a one-shot TryAcquireSemaphore does
// not jump it either.
func TestWeightHeadOfLine(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := slowWaitEngine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 3, TTL: time.Minute, Wait: 30 * time.Second}
		first, err := e.TryAcquireSemaphore(ctx, "hl", SemaphoreOptions{Limit: 3, TTL: time.Minute, Weight: 2})
		if err != nil {
			t.Fatal(err)
		}
		o.Weight = 2
		head := acquireAsync(t, s, e, "hl", o, 1)
		o.Weight = 1
		if _, err := e.TryAcquireSemaphore(ctx, "hl", o); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryAcquireSemaphore of weight 1 with 1 free behind a weight-2 waiter: %v, want ErrNotAcquired", err)
		} else {
			t.Log(err)
		}
		behind := acquireAsync(t, s, e, "hl", o, 2)
		pending(t, behind, "a weight-1 waiter behind a weight-2 one")
		if info := semInfo(t, e, "hl"); info.Held != 2 || info.Waiting != 2 {
			t.Errorf("SemaphoreInfo %+v, want 2 held and 2 waiting", info)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h, b := got(t, head), got(t, behind)
		if h.err != nil || b.err != nil {
			t.Fatalf("after the release: head %v, behind %v", h.err, b.err)
		}
		if h.p.Fence() >= b.p.Fence() {
			t.Errorf("fences %d (head) and %d (behind): not in arrival order", h.p.Fence(), b.p.Fence())
		}
		if info := semInfo(t, e, "hl"); info.Held != 3 || info.Holders != 2 {
			t.Errorf("SemaphoreInfo %+v, want 2 holders holding 3", info)
		}
	})
}

// SetSemaphoreLimit lowered under a waiting weight: the waiter is woken
// at once with an error wrapping ErrInvalid, though the semaphore is full
// (no release comes to refuse it), and a waiter behind it gets in as soon
// as it fits.
func TestWeightLoweredLimitRefusesWaiter(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := slowWaitEngine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 5, TTL: time.Minute, Wait: 30 * time.Second}
		if _, err := e.TryAcquireSemaphore(ctx, "lo", SemaphoreOptions{Limit: 5, TTL: time.Minute, Weight: 2}); err != nil {
			t.Fatal(err)
		}
		one, err := e.TryAcquireSemaphore(ctx, "lo", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		o.Weight = 4
		heavy := acquireAsync(t, s, e, "lo", o, 1)
		o.Weight = 1
		light := acquireAsync(t, s, e, "lo", o, 2)
		pending(t, light, "a weight-1 waiter behind a weight-4 one")
		lowered := time.Now()
		if err := e.SetSemaphoreLimit(ctx, "lo", 3); err != nil {
			t.Fatal(err)
		}
		h := got(t, heavy)
		if !errors.Is(h.err, ErrInvalid) || h.at.Sub(lowered) > 2*time.Second {
			t.Fatalf("the weight-4 waiter, %v after the limit went to 3: %v, want ErrInvalid at once", h.at.Sub(lowered), h.err)
		}
		t.Log(h.err)
		pending(t, light, "a weight-1 waiter with 3 of 3 held")
		if info := semInfo(t, e, "lo"); info.Limit != 3 || info.Held != 3 || info.Waiting != 1 {
			t.Errorf("SemaphoreInfo %+v, want limit 3, 3 held, 1 waiting", info)
		}
		released := time.Now()
		if err := one.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l := got(t, light)
		if l.err != nil || l.at.Sub(released) > 2*time.Second {
			t.Fatalf("the weight-1 waiter, %v after a release: %v, want a permit at once", l.at.Sub(released), l.err)
		}
		if info := semInfo(t, e, "lo"); info.Held != 3 || info.Holders != 2 || info.Waiting != 0 {
			t.Errorf("SemaphoreInfo %+v, want 2 holders holding 3, none waiting", info)
		}
	})
}

// A timed-out permit's weight comes back when it is purged, by an
// acquisition or by another permit's release.
func TestWeightPurged(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		short := SemaphoreOptions{Limit: 4, TTL: 100 * time.Millisecond, Weight: 3}
		if _, err := e.TryAcquireSemaphore(ctx, "pg", short); err != nil {
			t.Fatal(err)
		}
		s.Advance(150 * time.Millisecond)
		if info := semInfo(t, e, "pg"); info.Holders != 0 || info.Held != 0 {
			t.Errorf("SemaphoreInfo %+v after the permit timed out, want nothing held", info)
		}
		p, err := e.TryAcquireSemaphore(ctx, "pg", SemaphoreOptions{Limit: 4, TTL: time.Minute, Weight: 4})
		if err != nil {
			t.Fatalf("weight 4 of 4 after a weight-3 permit timed out: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// Purged by a release: a weight-3 permit times out beside a
		// weight-1 one, whose release purges it; then 4 fit again.
		keep, err := e.TryAcquireSemaphore(ctx, "pg", SemaphoreOptions{Limit: 4, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "pg", short); err != nil {
			t.Fatal(err)
		}
		s.Advance(150 * time.Millisecond)
		if err := keep.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{":limit", ":owners"} { // they went with the last permit, weights and all
			if n := s.Must(t, "EXISTS", s.NS+"sem:{pg}"+k); n != int64(0) {
				t.Errorf("%s left after the last permit", k)
			}
		}
		if _, err := e.TryAcquireSemaphore(ctx, "pg", SemaphoreOptions{Limit: 4, TTL: time.Minute, Weight: 4}); err != nil {
			t.Fatalf("weight 4 of 4 after the release purged a weight-3 permit: %v", err)
		}
	})
}

// SemaphoreInfo counts holdings (Holders, Waiting) and weight (Held);
// SemaphoreHolders counts holdings; Extend and the watchdog keep a
// permit's weight.
func TestWeightInfoAndExtend(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		take := func(o SemaphoreOptions) *Permit {
			t.Helper()
			o.Limit = 10
			p, err := e.TryAcquireSemaphore(ctx, "in", o)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		three := take(SemaphoreOptions{TTL: 300 * time.Millisecond, Weight: 3, Watchdog: true, Owner: "three"})
		one := take(SemaphoreOptions{TTL: time.Minute})
		two := take(SemaphoreOptions{TTL: 300 * time.Millisecond, Weight: 2})
		if three.Weight() != 3 || one.Weight() != 1 || two.Weight() != 2 || (*Permit)(nil).Weight() != 0 {
			t.Errorf("Weight() %d %d %d", three.Weight(), one.Weight(), two.Weight())
		}
		info := semInfo(t, e, "in")
		if info.Limit != 10 || info.Holders != 3 || info.Held != 6 || len(info.Permits) != 3 {
			t.Fatalf("SemaphoreInfo %+v, want 3 holders holding 6 of 10", info)
		}
		for _, p := range []*Permit{three, one, two} {
			if pi, ok := permitInfo(info, p.Token()); !ok || pi.Weight != p.Weight() || pi.Owner != p.Owner() {
				t.Errorf("PermitInfo %+v for a permit of weight %d, Owner %q", pi, p.Weight(), p.Owner())
			}
		}
		if n, err := e.SemaphoreHolders(ctx, "in"); n != 3 || err != nil {
			t.Errorf("SemaphoreHolders %d, %v: want 3", n, err)
		}
		// Extended by Extend and by the watchdog, three times their TTL.
		for range 3 {
			time.Sleep(200 * time.Millisecond)
			if err := two.Extend(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		if info := semInfo(t, e, "in"); info.Held != 6 || info.Holders != 3 {
			t.Errorf("SemaphoreInfo %+v after extensions, want 3 holders holding 6", info)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "in", SemaphoreOptions{Limit: 10, Weight: 5}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("weight 5 with 6 of 10 held: %v, want ErrNotAcquired", err)
		} else {
			t.Log(err)
		}
		four := take(SemaphoreOptions{TTL: time.Minute, Weight: 4})
		if err := three.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if info := semInfo(t, e, "in"); info.Held != 7 || info.Holders != 3 {
			t.Errorf("SemaphoreInfo %+v, want 3 holders holding 7", info)
		}
		for _, p := range []*Permit{one, two, four} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if info := semInfo(t, e, "in"); info.Held != 0 || info.Holders != 0 || info.Limit != 0 {
			t.Errorf("SemaphoreInfo %+v after every release, want nothing", info)
		}
	})
}

// A waiter's weight rides in its queue entry: a handoff gives it the
// weight it asked, which the next acquisitions see.
func TestWeightHandedOver(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := slowWaitEngine(s), ctxT(t)
		full, err := e.TryAcquireSemaphore(ctx, "ho", SemaphoreOptions{Limit: 4, TTL: time.Minute, Weight: 4})
		if err != nil {
			t.Fatal(err)
		}
		c := acquireAsync(t, s, e, "ho", SemaphoreOptions{Limit: 4, TTL: time.Minute, Wait: 30 * time.Second, Weight: 3, Owner: "o"}, 1)
		if err := full.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := got(t, c)
		if r.err != nil {
			t.Fatal(r.err)
		}
		info := semInfo(t, e, "ho")
		if pi, _ := permitInfo(info, r.p.Token()); info.Held != 3 || pi.Weight != 3 || pi.Owner != "o" {
			t.Errorf("SemaphoreInfo %+v after a handoff to a weight-3 waiter", info)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "ho", SemaphoreOptions{Limit: 4, Weight: 2}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("weight 2 beside a handed-over weight 3 of 4: %v, want ErrNotAcquired", err)
		}
		if err := r.p.Release(ctx); err != nil { // its weight goes with it
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "ho", SemaphoreOptions{Limit: 4, Weight: 4}); err != nil {
			t.Errorf("weight 4 after the handed-over permit's release: %v", err)
		}
	})
}
