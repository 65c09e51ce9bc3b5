package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// With miniredis's clock moved by hand a permit is gone exactly at its
// deadline; each permit keeps its own TTL.
func TestSemaphoreExpiryExact(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	short, err := e.TryAcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 5, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	long, err := e.TryAcquireSemaphore(ctx, "exp", SemaphoreOptions{Limit: 5, TTL: 3 * time.Second})
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
	s.Advance(999 * time.Millisecond)
	if n := holders(); n != 2 {
		t.Errorf("1ms before the first deadline: %d holders", n)
	}
	s.Advance(time.Millisecond)
	if n := holders(); n != 1 {
		t.Errorf("at the first deadline: %d holders, want 1", n)
	}
	if err := short.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of a timed-out permit: %v", err)
	}
	s.Advance(1999 * time.Millisecond)
	if n := holders(); n != 1 {
		t.Errorf("1ms before the 3s deadline: %d holders", n)
	}
	s.Advance(time.Millisecond)
	if n := holders(); n != 0 {
		t.Errorf("at the 3s deadline: %d holders", n)
	}
	if err := long.Extend(ctx, 0); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Extend of a timed-out permit: %v", err)
	}
	if ks := s.Keys(t); !slices.Equal(ks, []string{s.NS + "sem:{exp}:counter"}) {
		t.Errorf("keys left: %q", ks)
	}
}

// A waiter also sees a permit time out, without anyone releasing it.
func TestSemaphoreWaitForTimeout(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		if _, err := e.TryAcquireSemaphore(ctx, "wto", SemaphoreOptions{Limit: 1, TTL: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.AcquireSemaphore(ctx, "wto", SemaphoreOptions{Limit: 1, Wait: 5 * time.Second}); err != nil {
			t.Errorf("waiter: %v", err)
		}
	})
}

// Acquisitions cut off mid-call leave no permit behind.
func TestSemaphoreCutOff(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e := engine(s)
		cutOff(t, func(ctx context.Context) (func(context.Context) error, error) {
			p, err := e.TryAcquireSemaphore(ctx, "cut", SemaphoreOptions{Limit: 1, TTL: time.Minute})
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		})
		if err := e.Close(context.Background()); err != nil { // wait for the abandons
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
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		p, err := e.TryAcquireSemaphore(ctx, "ph", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
			t.Errorf("TTL = %v, %v; want (4s, 5s]", ttl, err)
		}
		if held, err := p.Held(ctx); err != nil || !held {
			t.Errorf("Held = %v, %v", held, err)
		}
		before := s.Snapshot(t)
		p.TTL(ctx)
		p.Held(ctx)
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("TTL/Held wrote: %v -> %v", before, after)
		}
		s.Advance(5 * time.Second)
		if _, err := p.TTL(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("TTL at the deadline: %v, want ErrNotHeld", err)
		}
		if held, err := p.Held(ctx); err != nil || held {
			t.Errorf("Held at the deadline = %v, %v", held, err)
		}
		q, err := e.TryAcquireSemaphore(ctx, "ph", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
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

// The limit is stored with the semaphore and rules: the first acquire
// stores it, an acquisition asking another limit follows the stored one
// (a rolling deploy that changes Limit keeps working), Limit 0 means the
// stored limit (ErrInvalid, writing nothing, when none is stored), and an
// idle semaphore takes a new limit.
func TestSemaphoreStoredLimit(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		before := s.Snapshot(t)
		if _, err := e.TryAcquireSemaphore(ctx, "lim", SemaphoreOptions{TTL: time.Minute}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no limit") {
			t.Errorf("Limit 0 with no limit stored: %v, want ErrInvalid saying no limit is stored", err)
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("a refused Limit 0 wrote: %v -> %v", before, after)
		}
		var ps []*Permit
		for i, limit := range []int{3, 5, 0} { // 5 and 0 follow the stored 3
			p, err := e.TryAcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: limit, TTL: time.Minute})
			if err != nil {
				t.Fatalf("permit %d (Limit %d): %v", i+1, limit, err)
			}
			ps = append(ps, p)
		}
		_, err := e.TryAcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "3 of 3 held, none free") {
			t.Errorf("Limit 5 while 3 are held under the stored 3: %v, want ErrNotAcquired saying all 3 are held", err)
		}
		if info, err := e.SemaphoreInfo(ctx, "lim"); err != nil || semCounts(info) != (semInfoCounts{Limit: 3, Holders: 3}) {
			t.Errorf("SemaphoreInfo = %+v, %v; want limit 3, 3 holders", info, err)
		}
		for _, p := range ps {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Idle now: a new limit is taken, and holds.
		if _, err := e.TryAcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 1, TTL: 100 * time.Millisecond}); err != nil {
			t.Fatalf("Limit 1 on an idle semaphore: %v", err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 3}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("second permit under the new Limit 1, asking 3: %v", err)
		}
		// The limit goes with the last holder also when it times out.
		s.Advance(150 * time.Millisecond)
		if _, err := e.TryAcquireSemaphore(ctx, "lim", SemaphoreOptions{Limit: 4, TTL: time.Minute}); err != nil {
			t.Errorf("Limit 4 after the last permit timed out: %v", err)
		}
	})
}

// A one try that finds no slot free says when the first live permit times
// out, not one that timed out and was not purged yet (the refusal writes
// nothing, so nothing purges it), and counts the live permits alone.
func TestSemaphoreRefusalNamesTheFirstLiveDeadline(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		for i, ttl := range []time.Duration{100 * time.Millisecond, time.Minute, time.Minute} {
			if _, err := e.TryAcquireSemaphore(ctx, "hint", SemaphoreOptions{Limit: 3, TTL: ttl}); err != nil {
				t.Fatalf("permit %d: %v", i+1, err)
			}
		}
		if err := e.SetSemaphoreLimit(ctx, "hint", 2); err != nil {
			t.Fatal(err)
		}
		s.Advance(150 * time.Millisecond) // the first permit timed out: 2 live fill the limit 2
		before := s.Snapshot(t)
		_, err := e.TryAcquireSemaphore(ctx, "hint", SemaphoreOptions{Limit: 2})
		m := regexp.MustCompile(`2 of 2 held, none free; the first permit times out in ([^:]+):`).FindStringSubmatch(fmt.Sprint(err))
		var hint time.Duration
		if m != nil {
			hint, _ = time.ParseDuration(m[1])
		}
		if !errors.Is(err, ErrNotAcquired) || hint < 50*time.Second || hint > time.Minute {
			t.Errorf("TryAcquireSemaphore: %v; want ErrNotAcquired saying 2 of 2 held and the first permit times out in 50 s to 1 min", err)
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("the refusal wrote: %v -> %v", before, after)
		}
	})
}

// A semaphore's counter past 2^53 (set by hand: one started from the clock
// stays below it for centuries) still grows by one a permit, as INCR keeps
// it: a Lua number cannot add one to it exactly.
func TestSemaphoreCounterPastExactDoubles(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		counter := object{kind: kindSem, name: "big", ns: s.NS}.key(":counter")
		s.Must(t, "SET", counter, "9007199254740993")
		last := int64(9007199254740993)
		for i := 0; i < 3; i++ {
			p, err := e.TryAcquireSemaphore(ctx, "big", SemaphoreOptions{Limit: 2, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := redis.Int64(s.Do("GET", counter))
			if err != nil || got != last+1 {
				t.Fatalf("permit %d: the counter holds %d (%v), want %d", i+1, got, err, last+1)
			}
			last = got
		}
	})
}

// A fence is written whole in every range lib/queue.lua's fmt splits:
// below 10^9 (a counter v3 started at 1), around 10^9 and the clock's
// 16 digits (two parts, the low one zero-padded), and up to 2^53 - 1.
// The semaphore's grant stores each with fmt (counter_next).
func TestFencesWrittenWhole(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		counter := object{kind: kindSem, name: "whole", ns: s.NS}.key(":counter")
		for _, last := range []int64{0, 7, 999999998, 999999999, 1000000000, 1000000008, 1734567000000000, 1734567000000041,
			1734567999999998, 1734567999999999, 9007199254740990} {
			s.Must(t, "SET", counter, last)
			p, err := e.TryAcquireSemaphore(ctx, "whole", SemaphoreOptions{Limit: 2, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			got, err := redis.String(s.Do("GET", counter))
			if want := strconv.FormatInt(last+1, 10); got != want || err != nil || p.Fence() != last+1 {
				t.Errorf("after %d: the counter holds %q (%v), the permit's fence is %d; want %s", last, got, err, p.Fence(), want)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// An acquire purges a permit at exactly its deadline, as SemaphoreHolders
// does: 1 ms before it the permit still fills the semaphore, at it the
// slot is free. No SemaphoreHolders call in between does the purge for it.
func TestSemaphoreAcquirePurgesAtDeadline(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	o := SemaphoreOptions{Limit: 1, TTL: time.Second}
	first, err := e.TryAcquireSemaphore(ctx, "edge", o)
	if err != nil {
		t.Fatal(err)
	}
	s.Advance(999 * time.Millisecond)
	if _, err := e.TryAcquireSemaphore(ctx, "edge", o); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("1ms before the first permit's deadline: %v, want ErrNotAcquired", err)
	}
	s.Advance(time.Millisecond)
	second, err := e.TryAcquireSemaphore(ctx, "edge", o)
	if err != nil {
		t.Fatalf("at the first permit's deadline: %v, want a permit", err)
	}
	if second.Fence() != first.Fence()+1 {
		t.Errorf("fences %d then %d", first.Fence(), second.Fence())
	}
	if err := first.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of the purged permit: %v, want ErrNotHeld", err)
	}
}

// rawSemWaiter queues token on a semaphore of limit 1 with the acquire
// script, as a waiter that never extends nor confirms (it may as well be
// dead), and returns its entry's deadline (server ms).
func rawSemWaiter(s *testserver.Server, t *testing.T, name, token string, entry time.Duration) int64 {
	t.Helper()
	k := func(suffix string) any { return s.NS + "sem:{" + name + "}" + suffix }
	c := s.Pool.Get()
	defer c.Close()
	v, err := redis.Int64s(scriptSemAcquire.Do(c, k(""), k(":owner"), k(":counter"), k(":limit"), k(":queue"), k(":waiters"), k(":owners"), k(":void:"+token),
		token, 1, entry.Milliseconds(), time.Minute.Milliseconds(), time.Hour.Milliseconds(), "nobody", s.NS+"wake:", 1))
	if err != nil || len(v) == 0 || v[0] != 0 {
		t.Fatalf("queueing %s: %v, %v", token, v, err)
	}
	e, err := redis.String(s.Do("HGET", k(":waiters"), token))
	if err != nil {
		t.Fatal(err)
	}
	deadline, err := strconv.ParseInt(e[:strings.IndexByte(e, ' ')], 10, 64)
	if err != nil {
		t.Fatalf("entry %q: %v", e, err)
	}
	return deadline
}

// A permit a release hands to a waiter lasts, until the waiter confirms
// it, exactly to the waiter's queue entry's deadline: one handed to a
// waiter that died frees its slot then, not later.
func TestHandedPermitEndsWithItsEntry(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		ctx, e := ctxT(t), engine(s)
		o := SemaphoreOptions{Limit: 1, TTL: time.Minute}
		p, err := e.TryAcquireSemaphore(ctx, "hp", o)
		if err != nil {
			t.Fatal(err)
		}
		const entry = time.Minute
		deadline := rawSemWaiter(s, t, "hp", "gone", entry)
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := redis.Int64(s.Do("ZSCORE", s.NS+"sem:{hp}", "gone"))
		if err != nil {
			t.Fatalf("the waiter was not handed the permit: %v", err)
		}
		if got != deadline {
			t.Errorf("the permit handed to the waiter times out at %d, %d ms after its entry's deadline; want at it", got, got-deadline)
		}
		if s.Mini == nil {
			return
		}
		// The slot is free at the deadline, and not 1 ms before.
		s.Advance(entry - time.Millisecond)
		if _, err := e.TryAcquireSemaphore(ctx, "hp", o); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("1ms before the handed permit's deadline: %v, want ErrNotAcquired", err)
		}
		s.Advance(time.Millisecond)
		if _, err := e.TryAcquireSemaphore(ctx, "hp", o); err != nil {
			t.Errorf("at the handed permit's deadline: %v, want a permit", err)
		}
	})
}

// A limit SetSemaphoreLimit stored stays while the semaphore is used:
// every grant gives it the fence retention again, so it outlives the
// retention after it was set, and callers asking another Limit still
// follow it. Here grants come 0.6 retentions apart.
func TestSetLimitStaysWhileUsed(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		retention := 300 * time.Millisecond
		if s.Mini == nil {
			retention = 2 * time.Second // a real server is waited on: 0.8 s of slack per gap
		}
		ctx, e := ctxT(t), engine(s, WithFenceRetention(retention))
		if err := e.SetSemaphoreLimit(ctx, "adm", 2); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			s.Advance(retention * 6 / 10)
			p, err := e.TryAcquireSemaphore(ctx, "adm", SemaphoreOptions{Limit: 5, TTL: time.Minute})
			if err != nil {
				t.Fatalf("grant %d: %v", i+1, err)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if info, err := e.SemaphoreInfo(ctx, "adm"); err != nil || info.Limit != 2 {
			t.Errorf("SemaphoreInfo %v after SetSemaphoreLimit(2), used %v ago (retention %v) = %+v, %v; want limit 2",
				2*retention*6/10, retention*6/10, retention, info, err)
		}
		var held []*Permit
		for i := 0; i < 3; i++ {
			p, err := e.TryAcquireSemaphore(ctx, "adm", SemaphoreOptions{Limit: 5, TTL: time.Minute})
			if err != nil {
				if i < 2 || !errors.Is(err, ErrNotAcquired) {
					t.Errorf("permit %d asking Limit 5 under the set 2: %v", i+1, err)
				}
				break
			}
			if i == 2 {
				t.Errorf("a third permit asking Limit 5: the set limit of 2 was lost")
			}
			held = append(held, p)
		}
		for _, p := range held {
			p.Release(ctx)
		}
	})
}

// The owner set keeps only live permits: timed-out ones leave it at the
// next acquisition, and a release that leaves the two sets the same size
// runs no ZINTERSTORE (counted on a real server; miniredis keeps no
// command statistics).
func TestSemaphoreOwnerSetFollowsPermits(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		for i := 0; i < 3; i++ {
			if _, err := e.TryAcquireSemaphore(ctx, "own", SemaphoreOptions{Limit: 3, TTL: 100 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		s.Advance(300 * time.Millisecond) // the three time out: their holders crashed
		p, err := e.TryAcquireSemaphore(ctx, "own", SemaphoreOptions{Limit: 3, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		owners, err := redis.Strings(s.Do("ZRANGE", s.NS+"sem:{own}:owner", 0, -1))
		if err != nil || !slices.Equal(owners, []string{p.Token()}) {
			t.Errorf("owner set after the timed-out permits were purged: %q, %v; want only the live permit", owners, err)
		}
		if s.Mini != nil || s.Engines != nil {
			t.Logf("%s: ZINTERSTORE not counted (needs one real server's INFO commandstats)", s.Name)
			p.Release(ctx)
			return
		}
		before := zinterstores(t, s)
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		q, err := e.TryAcquireSemaphore(ctx, "own", SemaphoreOptions{Limit: 3, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := zinterstores(t, s) - before; n != 0 {
			t.Errorf("%d ZINTERSTORE in a release, an acquisition and a release with no permit timed out, want 0", n)
		}
	})
}

// zinterstores is how many ZINTERSTORE the server has run (INFO
// commandstats).
func zinterstores(t *testing.T, s *testserver.Server) int64 {
	t.Helper()
	info, err := redis.String(s.Do("INFO", "commandstats"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(info, "cmdstat_zinterstore:calls=")
	v, _, _ := strings.Cut(rest, ",")
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// The keys a release writes only for a waiter, the fence counter and the
// waiters hash, are read when one is queued: a counter of the wrong type
// then fails the release with nothing changed; with nobody queued a
// release does not read it, nor a one-try acquire the waiters hash.
func TestSemaphoreLazyReadsBeforeWrites(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		e.queueTTL = slowExtensions // the waiter's own look at the counter would fail while it is a hash
		obj := object{kind: kindSem, name: "lazy", ns: s.NS}
		counter, waiters := obj.key(":counter"), obj.key(":waiters")
		held, err := e.TryAcquireSemaphore(ctx, "lazy", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		// The engine subscribes before the waiter queues: every waiter
		// looks once the subscription is up, and that look must not fall
		// while the counter is a hash. Another name's waiter brings it up.
		other, err := e.TryAcquireSemaphore(ctx, "lazy-other", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		octx, ostop := context.WithCancel(ctx)
		odone := make(chan error, 1)
		go func() {
			_, err := e.AcquireSemaphore(octx, "lazy-other", SemaphoreOptions{Limit: 1, Wait: time.Minute})
			odone <- err
		}()
		defer func() {
			ostop()
			if err := <-odone; !errors.Is(err, context.Canceled) {
				t.Errorf("the other name's waiter: %v, want context.Canceled", err)
			}
			if err := other.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
		waitSubscribed(s, t, e)
		got := make(chan error, 1)
		go func() {
			p, err := e.AcquireSemaphore(wctx, "lazy", SemaphoreOptions{Limit: 1, Wait: time.Minute})
			if err == nil {
				err = p.Release(ctx)
			}
			got <- err
		}()
		for {
			info, err := e.SemaphoreInfo(ctx, "lazy")
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiting == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		last := s.Must(t, "GET", counter)
		s.Must(t, "DEL", counter)
		s.Must(t, "HSET", counter, "f", "1")
		before := s.Snapshot(t)
		if err := held.Release(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Release with a waiter and a hash for the counter: %v, want WRONGTYPE", err)
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("the failed release changed keys:\n%v\n%v", before, after)
		}
		s.Must(t, "DEL", counter)
		s.Must(t, "SET", counter, last)
		if err := held.Release(ctx); err != nil {
			t.Fatalf("Release with the counter back: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the waiter: %v", err)
		}
		// Nobody queued: a one-try acquire does not read the waiters hash,
		// a release not the counter.
		s.Must(t, "DEL", waiters)
		s.Must(t, "SET", waiters, "not a hash")
		p, err := e.TryAcquireSemaphore(ctx, "lazy", SemaphoreOptions{Limit: 1})
		if err != nil {
			t.Fatalf("TryAcquireSemaphore, nobody queued, a string for the waiters hash: %v", err)
		}
		s.Must(t, "DEL", counter)
		s.Must(t, "HSET", counter, "f", "1")
		if err := p.Release(ctx); err != nil {
			t.Errorf("Release, nobody queued, a hash for the counter: %v", err)
		}
		s.Must(t, "DEL", counter, waiters)
	})
}

// Where the waiters hash is read lazily, it is still read before any write
// of a script that may touch it: a one-try acquire with someone queued
// (a timed-out permit is purged, a write, before the queue's head is
// read), and a waiting acquire with nobody queued and no room (the limit
// is stored, a write, before the caller queues). A string there fails
// both with WRONGTYPE and no key changed.
func TestSemaphoreWaitersReadBeforeWrites(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		now := serverMicros(s, t) / 1000
		a := object{kind: kindSem, name: "wa", ns: s.NS}
		s.Must(t, "ZADD", a.key(""), 1, "old")
		s.Must(t, "ZADD", a.key(":owner"), 5, "old")
		s.Must(t, "SET", a.key(":counter"), 5)
		s.Must(t, "ZADD", a.key(":queue"), 1, "ghost")
		s.Must(t, "SET", a.key(":waiters"), "not a hash")
		before := s.Snapshot(t)
		if _, err := e.TryAcquireSemaphore(ctx, "wa", SemaphoreOptions{Limit: 1}); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("TryAcquireSemaphore, someone queued, a string for the waiters hash: %v, want WRONGTYPE", err)
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("the one try changed keys:\n%v\n%v", before, after)
		}
		b := object{kind: kindSem, name: "wb", ns: s.NS}
		s.Must(t, "ZADD", b.key(""), now+60000, "live")
		s.Must(t, "ZADD", b.key(":owner"), 5, "live")
		s.Must(t, "SET", b.key(":counter"), 5)
		s.Must(t, "SET", b.key(":waiters"), "not a hash")
		before = s.Snapshot(t)
		if _, err := e.AcquireSemaphore(ctx, "wb", SemaphoreOptions{Limit: 1, Wait: 200 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("AcquireSemaphore, nobody queued, no room, a string for the waiters hash: %v, want WRONGTYPE", err)
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("the waiting acquire changed keys:\n%v\n%v", before, after)
		}
	})
}

// A semaphore script that fails on a key of the wrong type has written
// nothing: SetSemaphoreLimit and an abandon read the permits (their
// timeouts) before their first write, and the pickup of a permit handed
// over reads its counter before it moves its deadline. (Before, each wrote
// first: the limit, the abandon mark, the deadline.)
func TestSemaphoreScriptsReadPermitsFirst(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		failsClean := func(what string, f func() error) {
			t.Helper()
			before := s.Snapshot(t)
			err := f()
			if after := s.Snapshot(t); !maps.Equal(before, after) {
				t.Errorf("%s: keys changed by a failed script:\nbefore %v\nafter  %v", what, before, after)
			}
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("%s: %v, want WRONGTYPE", what, err)
			}
		}
		k := func(name, suffix string) string { return object{kind: kindSem, name: name, ns: s.NS}.key(suffix) }
		s.Must(t, "SET", k("limit", ""), "not a zset")
		failsClean("SetSemaphoreLimit", func() error { return e.SetSemaphoreLimit(ctx, "limit", 5) })

		s.Must(t, "SET", k("abandon", ""), "not a zset")
		failsClean("abandon", func() error {
			c := s.Pool.Get()
			defer c.Close()
			kk := func(suffix string) any { return k("abandon", suffix) }
			_, err := scriptSemAbandon.Do(c, kk(""), kk(":owner"), kk(":counter"), kk(":limit"), kk(":queue"), kk(":waiters"), kk(":owners"),
				kk(":void:tok"), "tok", 1000, time.Hour.Milliseconds(), s.NS+"wake:")
			return err
		})

		token := "tok-1"
		s.Must(t, "ZADD", k("pick", ""), serverMicros(s, t)/1000+60000, token) // handed over: its deadline
		s.Must(t, "SET", k("pick", ":owner"), "not a zset")
		failsClean("pickup", func() error {
			args := append(semOps.keysAnd(object{kind: kindSem, name: "pick", ns: s.NS}, ":void:", token), token, 2, 1000, 10000, e.retentionArg, e.idArg, e.wakeArg, 5)
			_, err := e.call(ctx, scriptSemAcquire, args, false, 0)
			return err
		})
	})
}
