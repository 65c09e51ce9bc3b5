package suite

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

type semOpts = atomicredis.SemaphoreOptions

func semaphoreLimit(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	o := semOpts{Limit: 2, TTL: time.Minute}
	a, err := e.TryAcquireSemaphore(ctx, "pool", o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.TryAcquireSemaphore(ctx, "pool", o)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fence() >= b.Fence() || a.Token() == b.Token() || len(a.Token()) != 36 {
		t.Errorf("fences %d %d tokens %q %q", a.Fence(), b.Fence(), a.Token(), b.Token())
	}
	before := s.Snapshot(t)
	if _, err := e.TryAcquireSemaphore(ctx, "pool", o); !errors.Is(err, atomicredis.ErrNotAcquired) {
		t.Fatalf("third permit of 2: %v", err)
	}
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("a refused attempt wrote: %q -> %q", before, after)
	}
	if n, err := e.SemaphoreHolders(ctx, "pool"); n != 2 || err != nil {
		t.Errorf("holders %d, %v; want 2", n, err)
	}
	want := []string{s.NS + "sem:{pool}", s.NS + "sem:{pool}:counter", s.NS + "sem:{pool}:limit", s.NS + "sem:{pool}:owner"}
	if got := s.Keys(t); !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("second Release: %v", err)
	}
	if n, err := e.SemaphoreHolders(ctx, "pool"); n != 1 || err != nil {
		t.Errorf("holders %d, %v after a release; want 1", n, err)
	}
	c, err := e.TryAcquireSemaphore(ctx, "pool", o)
	if err != nil {
		t.Fatalf("permit after a release: %v", err)
	}
	if c.Fence() <= b.Fence() {
		t.Errorf("fence %d after %d", c.Fence(), b.Fence())
	}
	for _, p := range []*atomicredis.Permit{b, c} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.SemaphoreHolders(ctx, "pool"); n != 0 || err != nil {
		t.Errorf("holders %d, %v after releasing all", n, err)
	}
}

func semaphoreTimeout(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	p, err := e.TryAcquireSemaphore(ctx, "to", semOpts{Limit: 1, TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Advance(80 * time.Millisecond)
	if err := p.Extend(ctx, 0); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("Extend after the TTL: %v", err)
	}
	// A failed Extend must not bring the permit back (the book's does).
	if n, err := e.SemaphoreHolders(ctx, "to"); n != 0 || err != nil {
		t.Errorf("holders %d, %v after a failed Extend", n, err)
	}
	for _, k := range []string{s.NS + "sem:{to}", s.NS + "sem:{to}:owner"} {
		if v, err := s.Do("ZSCORE", k, p.Token()); v != nil || err != nil {
			t.Errorf("%s still scores the timed-out permit: %v %v", k, v, err)
		}
	}
	if err := p.Release(ctx); !errors.Is(err, atomicredis.ErrNotHeld) {
		t.Errorf("Release after the TTL: %v", err)
	}
	if _, err := e.TryAcquireSemaphore(ctx, "to", semOpts{Limit: 1}); err != nil {
		t.Errorf("slot not free after a timeout: %v", err)
	}
}

func semaphoreExtendKeepsPermit(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	p, err := e.TryAcquireSemaphore(ctx, "rf", semOpts{Limit: 1, TTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ { // 600ms: six TTLs
		s.Advance(60 * time.Millisecond)
		if err := p.Extend(ctx, 0); err != nil {
			t.Fatalf("Extend %d: %v", i, err)
		}
	}
	if n, err := e.SemaphoreHolders(ctx, "rf"); n != 1 || err != nil {
		t.Errorf("holders %d, %v after extending", n, err)
	}
	if _, err := e.TryAcquireSemaphore(ctx, "rf", semOpts{Limit: 1}); !errors.Is(err, atomicredis.ErrNotAcquired) {
		t.Errorf("an extended permit's slot was given away: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Error(err)
	}
}

func semaphoreWait(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	a, err := e.TryAcquireSemaphore(ctx, "wt", semOpts{Limit: 1, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		released <- time.Now()
		a.Release(ctx)
	}()
	b, err := e.AcquireSemaphore(ctx, "wt", semOpts{Limit: 1, TTL: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lag := time.Since(<-released)
	t.Logf("waiter got the permit %v after the release began", lag)
	if lag > 2*time.Second {
		t.Errorf("waiter needed %v after the release", lag)
	}
	start := time.Now()
	if _, err := e.AcquireSemaphore(ctx, "wt", semOpts{Limit: 1, Wait: 50 * time.Millisecond}); !errors.Is(err, atomicredis.ErrNotAcquired) {
		t.Errorf("wait ran out: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v", d)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := e.AcquireSemaphore(cctx, "wt", semOpts{Limit: 1, Wait: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Error(err)
	}
}

// 32 clients, limit 3: never more than 3 inside, every fence distinct,
// and each holder's permit among the live ones in the owner set, ranked
// by its fence.
func semaphoreAdmission(t *testing.T, s *testserver.Server) {
	ctx := ctxT(t)
	const limit, workers = 3, 32
	rounds := 100
	if testing.Short() {
		rounds = 25
	} else if s.Mini != nil {
		rounds = 50 // miniredis's Lua under -race on 2 cores: keep it well inside ctxT's minute
	}
	var inside, over, granted, maxInside atomic.Int64
	var fences sync.Map
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		e := engine(s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				p, err := e.AcquireSemaphore(ctx, "adm", semOpts{Limit: limit, Wait: time.Minute})
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
					// The owner set ranks each live permit by its fence. (No
					// WITHSCORES or ZSCORE: go-redis on RESP3 gives scores as
					// floats, which the adapter refuses to pass as redigo's.)
					key := s.NS + "sem:{adm}:owner"
					n, err := redis.Int(s.Do("ZCARD", key))
					ranked, err2 := redis.Strings(s.Do("ZRANGEBYSCORE", key, p.Fence(), p.Fence()))
					if err != nil || err2 != nil || n > limit || !slices.Contains(ranked, p.Token()) {
						t.Errorf("owner set of %d (%v), %q at score %d (%v), while holding fence %d as %s", n, err, ranked, p.Fence(), err2, p.Fence(), p.Token())
					}
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := p.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d permits granted, at most %d inside at once", granted.Load(), maxInside.Load())
	if over.Load() != 0 || granted.Load() != int64(workers*rounds) {
		t.Errorf("%d over-admissions in %d grants (want 0 in %d)", over.Load(), granted.Load(), workers*rounds)
	}
	if maxInside.Load() < 2 {
		t.Errorf("at most %d inside: the test did not contend", maxInside.Load())
	}
}
