package atomicredis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

func TestSemaphoreLimit(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		o := SemaphoreOptions{Limit: 2, TTL: time.Minute}
		a, err := e.AcquireSemaphore(ctx, "pool", o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.AcquireSemaphore(ctx, "pool", o)
		if err != nil {
			t.Fatal(err)
		}
		if a.Fence() != 1 || b.Fence() != 2 || a.Token() == b.Token() {
			t.Errorf("fences %d %d tokens %q %q", a.Fence(), b.Fence(), a.Token(), b.Token())
		}
		before := s.snapshot(t)
		if _, err := e.AcquireSemaphore(ctx, "pool", o); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("third permit of 2: %v", err)
		}
		if after := s.snapshot(t); !sameMap(before, after) {
			t.Errorf("a refused attempt wrote: %v -> %v", before, after)
		}
		if n, err := e.SemaphoreHolders(ctx, "pool"); n != 2 || err != nil {
			t.Errorf("holders %d, %v", n, err)
		}
		want := []string{s.ns + "sem:{pool}", s.ns + "sem:{pool}:counter", s.ns + "sem:{pool}:limit", s.ns + "sem:{pool}:owner"}
		if got := s.keys(t); !sameStrings(got, want) {
			t.Errorf("keys %q, want %q", got, want)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("second Release: %v", err)
		}
		c, err := e.AcquireSemaphore(ctx, "pool", o)
		if err != nil {
			t.Fatalf("permit after a release: %v", err)
		}
		if c.Fence() <= b.Fence() {
			t.Errorf("fence %d after %d", c.Fence(), b.Fence())
		}
		for _, p := range []*Permit{b, c} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := e.SemaphoreHolders(ctx, "pool"); n != 0 || err != nil {
			t.Errorf("holders %d, %v after releasing all", n, err)
		}
	})
}

// With miniredis's clock moved by hand a permit is gone exactly at its
// deadline; each permit keeps its own TTL.
func TestSemaphoreExpiryExact(t *testing.T) {
	s := newMini(t)
	ctx, e := ctxT(t), s.engine()
	short, err := e.AcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 5, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	long, err := e.AcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 5, TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	holders := func() int {
		n, err := e.SemaphoreHolders(ctx, "exp")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	s.advance(999 * time.Millisecond)
	if n := holders(); n != 2 {
		t.Errorf("1ms before the first deadline: %d holders", n)
	}
	s.advance(time.Millisecond)
	if n := holders(); n != 1 {
		t.Errorf("at the first deadline: %d holders, want 1", n)
	}
	if err := short.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of a timed-out permit: %v", err)
	}
	s.advance(1999 * time.Millisecond)
	if n := holders(); n != 1 {
		t.Errorf("1ms before the 3s deadline: %d holders", n)
	}
	s.advance(time.Millisecond)
	if n := holders(); n != 0 {
		t.Errorf("at the 3s deadline: %d holders", n)
	}
	if err := long.Refresh(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Refresh of a timed-out permit: %v", err)
	}
	if ks := s.keys(t); !sameStrings(ks, []string{s.ns + "sem:{exp}:counter"}) {
		t.Errorf("keys left: %q", ks)
	}
}

func TestSemaphoreTimeout(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		p, err := e.AcquireSemaphore(ctx, "to", SemaphoreOptions{Limit: 1, TTL: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.advance(80 * time.Millisecond)
		if err := p.Refresh(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Refresh after the TTL: %v", err)
		}
		// The failed Refresh must not bring the permit back (the book's does).
		if n, err := e.SemaphoreHolders(ctx, "to"); n != 0 || err != nil {
			t.Errorf("holders %d, %v after a failed Refresh", n, err)
		}
		for _, k := range []string{s.ns + "sem:{to}", s.ns + "sem:{to}:owner"} {
			if v, err := s.do("ZSCORE", k, p.Token()); v != nil || err != nil {
				t.Errorf("%s still scores the timed-out permit: %v %v", k, v, err)
			}
		}
		if err := p.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Release after the TTL: %v", err)
		}
		// Its slot is free for someone else.
		if _, err := e.AcquireSemaphore(ctx, "to", SemaphoreOptions{Limit: 1}); err != nil {
			t.Errorf("slot not free after a timeout: %v", err)
		}
	})
}

func TestSemaphoreRefreshKeepsPermit(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		p, err := e.AcquireSemaphore(ctx, "rf", SemaphoreOptions{Limit: 1, TTL: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ { // 600ms: six TTLs
			s.advance(60 * time.Millisecond)
			if err := p.Refresh(ctx); err != nil {
				t.Fatalf("Refresh %d: %v", i, err)
			}
		}
		if n, _ := e.SemaphoreHolders(ctx, "rf"); n != 1 {
			t.Errorf("holders %d after refreshing", n)
		}
		if _, err := e.AcquireSemaphore(ctx, "rf", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("a refreshed permit's slot was given away: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Error(err)
		}
	})
}

func TestSemaphoreWait(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		a, err := e.AcquireSemaphore(ctx, "wt", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		released := make(chan time.Time, 1)
		go func() {
			time.Sleep(50 * time.Millisecond)
			released <- time.Now()
			a.Release(ctx)
		}()
		b, err := e.AcquireSemaphore(ctx, "wt", SemaphoreOptions{Limit: 1, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		lag := time.Since(<-released)
		t.Logf("waiter got the permit %v after the release began", lag)
		if lag > 2*time.Second {
			t.Errorf("waiter needed %v", lag)
		}
		start := time.Now()
		if _, err := e.AcquireSemaphore(ctx, "wt", SemaphoreOptions{Limit: 1, Wait: 50 * time.Millisecond}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("wait ran out: %v", err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("gave up after %v", d)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if _, err := e.AcquireSemaphore(cctx, "wt", SemaphoreOptions{Limit: 1, Wait: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ctx deadline: %v", err)
		}
		b.Release(ctx)
	})
}

// A waiter also sees a permit time out, without anyone releasing it.
func TestSemaphoreWaitForTimeout(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		s.realtime(t)
		ctx, e := ctxT(t), s.engine()
		if _, err := e.AcquireSemaphore(ctx, "wto", SemaphoreOptions{Limit: 1, TTL: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.AcquireSemaphore(ctx, "wto", SemaphoreOptions{Limit: 1, Wait: 5 * time.Second}); err != nil {
			t.Errorf("waiter: %v", err)
		}
	})
}

// Many clients, limit 3: never more than 3 inside, and each holder's permit
// is among the live ones in the owner set, ranked below the limit.
func TestSemaphoreAdmission(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx := ctxT(t)
		const limit, workers = 3, 32
		rounds := 100
		if testing.Short() {
			rounds = 25
		} else if s.mini != nil {
			rounds = 50 // miniredis's Lua under -race on 2 cores: keep it well inside ctxT's minute
		}
		var inside, over, granted, maxInside atomic.Int64
		var fences sync.Map
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			e := s.engine()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					p, err := e.AcquireSemaphore(ctx, "adm", SemaphoreOptions{Limit: limit, Wait: time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					if n > limit {
						over.Add(1)
					}
					for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
					}
					granted.Add(1)
					if _, dup := fences.LoadOrStore(p.Fence(), true); dup {
						t.Errorf("fence %d granted twice", p.Fence())
					}
					if i%10 == 0 {
						owners, err := redis.Int64Map(s.do("ZRANGE", s.ns+"sem:{adm}:owner", 0, -1, "WITHSCORES"))
						if err != nil || len(owners) > limit || owners[p.Token()] != p.Fence() {
							t.Errorf("owner set %v (%v) while holding fence %d", owners, err, p.Fence())
						}
					}
					inside.Add(-1)
					if err := p.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("%d permits granted, at most %d inside at once, %d over the limit", granted.Load(), maxInside.Load(), over.Load())
		if over.Load() != 0 || granted.Load() != int64(workers*rounds) {
			t.Errorf("%d over-admissions in %d grants", over.Load(), granted.Load())
		}
		if maxInside.Load() < 2 {
			t.Errorf("at most %d inside: the test did not contend", maxInside.Load())
		}
	})
}

// Acquisitions cut off mid-call leave no permit behind.
func TestSemaphoreCutOff(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		e := s.engine()
		cutOff(t, func(ctx context.Context) (func(context.Context) error, error) {
			p, err := e.AcquireSemaphore(ctx, "cut", SemaphoreOptions{Limit: 1, TTL: time.Minute})
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		})
		if err := e.Close(context.Background()); err != nil { // wait for the undos
			t.Fatal(err)
		}
		if n, err := e.SemaphoreHolders(context.Background(), "cut"); n != 0 || err != nil {
			t.Errorf("holders %d, %v after cut-off acquisitions", n, err)
		}
	})
}

// Permit.TTL and Held have Lock's semantics: the server's remaining time,
// ErrNotHeld (Held false) once it timed out or was released.
func TestPermitTTLAndHeld(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		p, err := e.AcquireSemaphore(ctx, "ph", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
			t.Errorf("TTL = %v, %v; want (4s, 5s]", ttl, err)
		}
		if held, err := p.Held(ctx); err != nil || !held {
			t.Errorf("Held = %v, %v", held, err)
		}
		before := s.snapshot(t)
		p.TTL(ctx)
		p.Held(ctx)
		if after := s.snapshot(t); !sameMap(before, after) {
			t.Errorf("TTL/Held wrote: %v -> %v", before, after)
		}
		s.advance(5 * time.Second)
		if _, err := p.TTL(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("TTL at the deadline: %v, want ErrNotHeld", err)
		}
		if held, err := p.Held(ctx); err != nil || held {
			t.Errorf("Held at the deadline = %v, %v", held, err)
		}
		q, err := e.AcquireSemaphore(ctx, "ph", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if held, err := q.Held(ctx); err != nil || held {
			t.Errorf("Held after Release = %v, %v", held, err)
		}
		err = q.Release(ctx)
		if !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "released or timed out") {
			t.Errorf("second Release: %v, want ErrNotHeld saying released or timed out", err)
		}
	})
}

// The limit is stored with the semaphore: the first acquire sets it, a
// different limit while permits are held is ErrInvalid naming the stored
// one and writes nothing, and an idle semaphore takes a new limit.
func TestSemaphoreStoredLimit(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		var ps []*Permit
		for i := 0; i < 3; i++ {
			p, err := e.AcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 3, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		before := s.snapshot(t)
		_, err := e.AcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit 3") {
			t.Errorf("Limit 5 while 3 are held under Limit 3: %v, want ErrInvalid naming limit 3", err)
		}
		_, err = e.AcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: time.Second})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Limit 1 while held under Limit 3, waiting: %v, want ErrInvalid", err)
		}
		if after := s.snapshot(t); !sameMap(before, after) {
			t.Errorf("a refused limit wrote: %v -> %v", before, after)
		}
		for _, p := range ps {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Idle now: a new limit is taken, and holds.
		if _, err := e.AcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 1, TTL: 100 * time.Millisecond}); err != nil {
			t.Fatalf("Limit 1 on an idle semaphore: %v", err)
		}
		if _, err := e.AcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("second permit under the new Limit 1: %v", err)
		}
		// The limit goes with the last holder also when it times out.
		s.advance(150 * time.Millisecond)
		if _, err := e.AcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 4, TTL: time.Minute}); err != nil {
			t.Errorf("Limit 4 after the last permit timed out: %v", err)
		}
	})
}
