package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// With miniredis's clock moved by hand a permit is gone exactly at its
// deadline; each permit keeps its own TTL.
func TestSemaphore_ExpiryExact(t *testing.T) {
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
func TestSemaphore_WaitForTimeout(t *testing.T) {
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
func TestSemaphore_CutOff(t *testing.T) {
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
		if n, err := engine(s).SemaphoreHolders(context.Background(), "cut"); n != 0 || err != nil {
			t.Errorf("holders %d, %v after cut-off acquisitions", n, err)
		}
	})
}

// Permit.TTL and Held have Lock's semantics: the server's remaining time,
// ErrNotHeld (Held false) once it timed out or was released.
func TestSemaphore_PermitTTLAndHeld(t *testing.T) {
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
func TestSemaphore_StoredLimit(t *testing.T) {
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
func TestSemaphore_RefusalNamesTheFirstLiveDeadline(t *testing.T) {
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
func TestSemaphore_CounterPastExactDoubles(t *testing.T) {
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
func TestSemaphore_FencesWrittenWhole(t *testing.T) {
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
func TestSemaphore_AcquirePurgesAtDeadline(t *testing.T) {
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
func TestSemaphore_HandedPermitEndsWithItsEntry(t *testing.T) {
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
func TestSemaphore_SetLimitStaysWhileUsed(t *testing.T) {
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
func TestSemaphore_OwnerSetFollowsPermits(t *testing.T) {
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
func TestSemaphore_LazyReadsBeforeWrites(t *testing.T) {
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
func TestSemaphore_WaitersReadBeforeWrites(t *testing.T) {
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
func TestSemaphore_ScriptsReadPermitsFirst(t *testing.T) {
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

// SetSemaphoreLimit under holders and waiters: raising it admits waiters
// at once, lowering it admits nobody until the holders are under it, and
// the limit stays while the semaphore is idle.
func TestSemaphore_SetLimit(t *testing.T) {
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

// A permit with a watchdog is held past several TTLs, and its Lost closes
// when it is deleted behind its back.
func TestSemaphore_PermitWatchdog(t *testing.T) {
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

// semOwners is semaphore name's owners hash: permit token -> Owner.
func semOwners(t *testing.T, s *testserver.Server, name string) map[string]string {
	t.Helper()
	m, err := redis.StringMap(s.Do("HGETALL", s.NS+"sem:{"+name+"}:owners"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// semInfo is SemaphoreInfo, failing t on an error.
func semInfo(t *testing.T, e *Engine, name string) SemaphoreInfo {
	t.Helper()
	info, err := e.SemaphoreInfo(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// permitInfo is the permit SemaphoreInfo lists with token, or false.
func permitInfo(info SemaphoreInfo, token string) (PermitInfo, bool) {
	for _, p := range info.Permits {
		if p.Token == token {
			return p, true
		}
	}
	return PermitInfo{}, false
}

// A permit's Owner is stored with it: SemaphoreInfo lists it with the
// permit's token, fence and time left, Owner reads it, SetOwner changes
// it and nothing else, Extend keeps it, Release removes it. A permit
// without one writes nothing.
func TestSemaphore_OwnerStored(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 3, TTL: 3 * time.Second}
		o.Owner = ownerBytes
		p1, err := e.TryAcquireSemaphore(ctx, "o", o)
		if err != nil {
			t.Fatal(err)
		}
		o.Owner = ""
		p2, err := e.TryAcquireSemaphore(ctx, "o", o)
		if err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "o"); len(got) != 1 || got[p1.Token()] != ownerBytes || p1.Owner() != ownerBytes || p2.Owner() != "" {
			t.Fatalf("owners hash %q, Owner() %q and %q; want only p1's", got, p1.Owner(), p2.Owner())
		}
		info := semInfo(t, e, "o")
		if semCounts(info) != (semInfoCounts{Limit: 3, Holders: 2}) || len(info.Permits) != 2 {
			t.Fatalf("SemaphoreInfo %+v, want 2 permits listed", info)
		}
		for _, c := range []struct {
			p     *Permit
			owner string
		}{{p1, ownerBytes}, {p2, ""}} {
			got, ok := permitInfo(info, c.p.Token())
			if !ok || got.Fence != c.p.Fence() || got.Owner != c.owner || got.TTL <= 2*time.Second || got.TTL > 3*time.Second {
				t.Errorf("SemaphoreInfo lists %+v (%v) for permit %s fence %d, want Owner %q and a TTL near 3s", got, ok, c.p.Token(), c.p.Fence(), c.owner)
			}
		}

		if err := p1.SetOwner(ctx, "renamed"); err != nil {
			t.Fatal(err)
		}
		if err := p2.SetOwner(ctx, "late"); err != nil {
			t.Fatal(err)
		}
		after := semInfo(t, e, "o")
		for _, c := range []struct {
			p     *Permit
			owner string
		}{{p1, "renamed"}, {p2, "late"}} {
			was, _ := permitInfo(info, c.p.Token())
			got, _ := permitInfo(after, c.p.Token())
			if got.Owner != c.owner || c.p.Owner() != c.owner || got.Fence != was.Fence || got.TTL > was.TTL || got.TTL <= 0 {
				t.Errorf("after SetOwner(%q): %+v, Owner() %q; before %+v", c.owner, got, c.p.Owner(), was)
			}
		}
		if err := p1.Extend(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if got, _ := permitInfo(semInfo(t, e, "o"), p1.Token()); got.Owner != "renamed" || got.TTL <= 3*time.Second {
			t.Errorf("after Extend(10s): %+v, want Owner \"renamed\" and 10s", got)
		}
		if err := p2.SetOwner(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "o"); len(got) != 1 || p2.Owner() != "" {
			t.Errorf("after SetOwner(\"\"): owners hash %q, Owner() %q", got, p2.Owner())
		}
		if err := p1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "o"); len(got) != 0 {
			t.Errorf("after Release: owners hash %q", got)
		}
		if err := p1.SetOwner(ctx, "gone"); !errors.Is(err, ErrNotHeld) {
			t.Errorf("SetOwner after Release: %v, want ErrNotHeld", err)
		}
		if got := semOwners(t, s, "o"); len(got) != 0 {
			t.Errorf("a released permit's SetOwner wrote %q", got)
		}
		p2.Release(ctx)
		for _, k := range s.Keys(t) { // the counter stays, and an extension number until its TTL
			if !strings.HasSuffix(k, ":counter") && !strings.Contains(k, ":seq:") {
				t.Errorf("key left after the last Release: %q", k)
			}
		}
	})
}

// A waiter's Owner comes with the permit a release hands it, there before
// the waiter confirms.
func TestSemaphore_OwnerHanded(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		p, err := e.TryAcquireSemaphore(ctx, "h", SemaphoreOptions{Limit: 1, TTL: 3 * time.Second, Owner: "first"})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Permit, 1)
		go func() {
			w, err := e.AcquireSemaphore(ctx, "h", SemaphoreOptions{Wait: 5 * time.Second, Owner: "waiter"})
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		waitFor(t, func() bool { return semInfo(t, e, "h").Waiting == 1 })
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Read before the waiter's engine has confirmed anything: the
		// release's own script stored it.
		if owners := semOwners(t, s, "h"); len(owners) != 1 || !strings.HasPrefix(mapValue(owners), "waiter") {
			t.Errorf("owners hash right after the handoff %q, want the waiter's", owners)
		}
		w := <-got
		if w == nil {
			return
		}
		info := semInfo(t, e, "h")
		if pi, _ := permitInfo(info, w.Token()); pi.Owner != "waiter" || w.Owner() != "waiter" || len(info.Permits) != 1 {
			t.Errorf("after the handoff: %+v, Owner() %q", info, w.Owner())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if owners := semOwners(t, s, "h"); len(owners) != 0 {
			t.Errorf("owners hash after the last release: %q", owners)
		}
	})
}

// mapValue is m's one value.
func mapValue(m map[string]string) string {
	for _, v := range m {
		return v
	}
	return ""
}

// A permit's Owner goes when the permit does however it goes: purged
// after it timed out (by another's acquisition, or by its own holder's
// late extension), abandoned; and the watchdog keeps it.
func TestSemaphore_OwnerLeaves(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 5, TTL: 100 * time.Millisecond}
		stays, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		o.Owner = "purged"
		purged, err := e.TryAcquireSemaphore(ctx, "p", o)
		if err != nil {
			t.Fatal(err)
		}
		o.Owner = "late"
		late, err := e.TryAcquireSemaphore(ctx, "p", o)
		if err != nil {
			t.Fatal(err)
		}
		dog, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Second, Watchdog: true, Owner: "dog"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1200 * time.Millisecond) // two permits time out; the watchdog's lives past its TTL
		if owners := semOwners(t, s, "p"); len(owners) != 3 {
			t.Fatalf("owners hash %q before anything purged: the test proves nothing", owners)
		}
		if err := late.SetOwner(ctx, "too late"); !errors.Is(err, ErrNotHeld) {
			t.Errorf("SetOwner on a timed-out permit: %v, want ErrNotHeld", err)
		}
		if got := semOwners(t, s, "p")[late.Token()]; got != "late" {
			t.Errorf("SetOwner on a timed-out permit stored %q", got)
		}
		// The other late holder's extension finds its permit gone: it
		// removes it, and purges the other timed-out one, Owners and all.
		// (late's holding ended when SetOwner found it gone: nothing is sent
		// for it any more.)
		if err := purged.Extend(ctx, 0); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Extend of a timed-out permit: %v", err)
		}
		if owners := semOwners(t, s, "p"); len(owners) != 1 || owners[dog.Token()] != "dog" {
			t.Errorf("owners hash after a late Extend purged two: %q, want only the watchdog's", owners)
		}
		if info := semInfo(t, e, "p"); info.Holders != 2 {
			t.Errorf("SemaphoreInfo %+v, want 2 holders", info)
		}
		if err := late.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Release of a purged permit: %v", err)
		}

		// Purged by another's acquisition.
		o.Owner = "purged too"
		if _, err := e.TryAcquireSemaphore(ctx, "p", o); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
		next, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if owners := semOwners(t, s, "p"); len(owners) != 1 || owners[dog.Token()] != "dog" {
			t.Errorf("owners hash after an acquisition purged a timed-out permit: %q, want only the watchdog's", owners)
		}

		// Abandoned (as a waiter gives up when the grant crossed its
		// timeout).
		gone, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Minute, Owner: "abandoned"})
		if err != nil {
			t.Fatal(err)
		}
		c := s.Pool.Get()
		defer c.Close()
		k := func(suffix string) any { return s.NS + "sem:{p}" + suffix }
		if _, err := scriptSemAbandon.Do(c, k(""), k(":owner"), k(":counter"), k(":limit"), k(":queue"), k(":waiters"), k(":owners"),
			k(":void:"+gone.Token()), gone.Token(), 1000, time.Hour.Milliseconds(), s.NS+"wake:"); err != nil {
			t.Fatal(err)
		}
		if owners := semOwners(t, s, "p"); len(owners) != 1 || owners[dog.Token()] != "dog" {
			t.Errorf("owners hash after an abandon: %q, want only the watchdog's", owners)
		}
		for _, p := range []*Permit{dog, stays, next} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := redis.Int(s.Do("EXISTS", k(":owners"))); err != nil || n != 0 {
			t.Errorf("owners hash left after the last release: %d, %v", n, err)
		}
	})
}

// An Owner longer than MaxOwner is refused, and nothing is written.
func TestSemaphore_OwnerTooLong(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		long := strings.Repeat("o", MaxOwner+1)
		if _, err := e.TryAcquireSemaphore(ctx, "x", SemaphoreOptions{Limit: 1, Owner: long}); !errors.Is(err, ErrInvalid) {
			t.Errorf("TryAcquireSemaphore with an Owner of %d bytes: %v, want ErrInvalid", len(long), err)
		}
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("a refused acquisition wrote %q", ks)
		}
		p, err := e.TryAcquireSemaphore(ctx, "x", SemaphoreOptions{Limit: 1, Owner: long[:MaxOwner]})
		if err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "x")[p.Token()]; got != long[:MaxOwner] {
			t.Errorf("an Owner of MaxOwner bytes stored as %d bytes", len(got))
		}
		if err := p.SetOwner(ctx, long); !errors.Is(err, ErrInvalid) || p.Owner() != long[:MaxOwner] {
			t.Errorf("SetOwner of %d bytes: %v, Owner() %d bytes; want ErrInvalid and the old one", len(long), err, len(p.Owner()))
		}
		p.Release(ctx)
	})
}

// SemaphoreInfo lists at most MaxInfoPermits permits, those that time out
// first, and counts them all.
func TestSemaphore_InfoListsAtMostMaxInfoPermits(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e := engine(s)
		// Permits written straight into the sets, as the acquire script
		// would (MaxInfoPermits+2 acquisitions would take too long here).
		now := serverMicros(s, t) / 1000
		args := []any{s.NS + "sem:{many}"}
		fences := []any{s.NS + "sem:{many}:owner"}
		for i := range MaxInfoPermits + 2 {
			token := "t" + strconv.Itoa(i)
			args = append(args, now+60_000+int64(i), token)
			fences = append(fences, i+1, token)
		}
		s.Must(t, "ZADD", args...)
		s.Must(t, "ZADD", fences...)
		s.Must(t, "SET", s.NS+"sem:{many}:limit", MaxInfoPermits+2)
		s.Must(t, "HSET", s.NS+"sem:{many}:owners", args[2], "first")
		info := semInfo(t, e, "many")
		if info.Holders != MaxInfoPermits+2 || len(info.Permits) != MaxInfoPermits {
			t.Fatalf("Holders %d, %d listed; want %d and %d", info.Holders, len(info.Permits), MaxInfoPermits+2, MaxInfoPermits)
		}
		if first := info.Permits[0]; first.Token != args[2] || first.Owner != "first" || first.Fence != 1 {
			t.Errorf("first listed %+v, want the first to time out, fence 1, Owner \"first\"", first)
		}
		if last := info.Permits[MaxInfoPermits-1]; last.Fence != MaxInfoPermits || last.Owner != "" {
			t.Errorf("last listed %+v, want fence %d", last, MaxInfoPermits)
		}
	})
}

// unweightedCommands is how many commands (scripts' calls included) each
// semaphore operation made on a private redis-server before permits had
// weights (main at 9851909), measured by TestSemaphore_UnweightedCostsNothing itself
// on that commit with its Weight fields removed: permits of weight 1 must
// cost nothing, so these stay as they were. Since lowered, as this test
// counted them, where a one-try acquire reads the waiters hash, and a
// release the fence counter, only when someone is queued (27, 27, 26, 30,
// 33 and 65 before); raised where SetSemaphoreLimit reads the permits
// before its first write, so that a key of the wrong type fails it with
// nothing written (11 before), and where a permit's extension writes
// PEXPIRE first, so that it works at maxmemory (31 before).
var unweightedCommands = map[string]int{
	"TryAcquireSemaphore+Release":       25,
	"AcquireSemaphore+Release":          26,
	"TryAcquireSemaphore beside permit": 24,
	"with an Owner":                     28,
	"Extend":                            32,
	"handoff":                           63,
	"SemaphoreInfo":                     7,
	"SemaphoreInfo with an Owner":       8,
	"SetSemaphoreLimit":                 12,
}

// Weight 1 costs nothing: taking, extending, handing over and releasing
// permits of weight 1, and reading a semaphore's figures, run as many
// commands as before permits had weights (INFO commandstats of a private
// server, which nobody else uses).
func TestSemaphore_UnweightedCostsNothing(t *testing.T) {
	t.Parallel()
	s := privateServer(t, "redis")
	queued := make(chan struct{}, 1)
	e, ctx := engine(s, WithObserver(func(ev Event) {
		if ev.Type == EventQueued {
			queued <- struct{}{}
		}
	})), ctxT(t)
	e.queueTTL = 10 * time.Second // no extension of a queue entry within a round
	beside, err := e.TryAcquireSemaphore(ctx, "sb", SemaphoreOptions{Limit: 2, TTL: time.Minute, Weight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer beside.Release(ctx)
	named, err := e.TryAcquireSemaphore(ctx, "so", SemaphoreOptions{Limit: 2, TTL: time.Minute, Weight: 1, Owner: "me"})
	if err != nil {
		t.Fatal(err)
	}
	defer named.Release(ctx)
	o := SemaphoreOptions{Limit: 2, Weight: 1}
	ops := []struct {
		name string
		run  func() error
	}{
		{"TryAcquireSemaphore+Release", func() error { return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "s", o)) }},
		{"AcquireSemaphore+Release", func() error { return giveBack(ctx)(e.AcquireSemaphore(ctx, "s", o)) }},
		{"TryAcquireSemaphore beside permit", func() error { return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "sb", o)) }},
		{"with an Owner", func() error {
			return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 2, Weight: 1, Owner: "me"}))
		}},
		{"Extend", func() error {
			p, err := e.TryAcquireSemaphore(ctx, "s", o)
			if err != nil {
				return err
			}
			if err := p.Extend(ctx, 0); err != nil {
				return err
			}
			return p.Release(ctx)
		}},
		{"handoff", func() error { // a holder, a waiter queued, the release hands over
			one := SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: 30 * time.Second, Weight: 1}
			p, err := e.TryAcquireSemaphore(ctx, "h", one)
			if err != nil {
				return err
			}
			c := make(chan error, 1)
			go func() { c <- giveBack(ctx)(e.AcquireSemaphore(ctx, "h", one)) }()
			<-queued
			if err := p.Release(ctx); err != nil {
				return err
			}
			return <-c
		}},
		{"SemaphoreInfo", func() error { _, err := e.SemaphoreInfo(ctx, "sb"); return err }},
		{"SemaphoreInfo with an Owner", func() error { _, err := e.SemaphoreInfo(ctx, "so"); return err }},
		{"SetSemaphoreLimit", func() error { return e.SetSemaphoreLimit(ctx, "sb", 2) }},
	}
	const rounds = 10
	for _, op := range ops {
		if err := op.run(); err != nil { // loads its scripts
			t.Fatalf("%s: %v", op.name, err)
		}
		before := dataCommands(t, s)
		for range rounds {
			if err := op.run(); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
		}
		n := dataCommands(t, s) - before
		t.Logf("%s: %v commands", op.name, float64(n)/rounds)
		if n != int64(rounds*unweightedCommands[op.name]) {
			t.Errorf("%s: %v commands, want %d as before permits had weights", op.name, float64(n)/rounds, unweightedCommands[op.name])
		}
	}
}

// weightedTake is one acquisition of the weighted checker, by this
// process's monotonic clock.
type weightedTake struct {
	weight     int
	start      time.Time // the call began
	queued     time.Time // its client was told it was queued (EventQueued); zero if it never was
	in, out    time.Time // the section: after the call returned, before the release was sent
	fence      int64
	valid      bool // the release found the permit still held
	tokenInUse string
}

// weightedOverAdmissions counts section starts at which valid sections of
// more than limit weight were open, and the peak weight open at once.
func weightedOverAdmissions(takes []weightedTake, limit int) (over, peak int) {
	var spans []span
	for _, tk := range takes {
		if tk.valid {
			spans = append(spans, span{tk.in, tk.out, tk.weight})
		}
	}
	return overWeight(spans, limit)
}

// outOfOrder counts admissions that came before one that queued earlier,
// as the clients saw it: B's call began after A's client was told A was
// queued (so B reached the server after A's queue entry was there), yet B
// was admitted before A (a lower fence: fences number admissions). judged
// is how many acquisitions had someone queued before their call began.
func outOfOrder(takes []weightedTake) (violations, judged int) {
	var q []weightedTake
	for _, tk := range takes {
		if !tk.queued.IsZero() {
			q = append(q, tk)
		}
	}
	sort.Slice(q, func(i, j int) bool { return q[i].queued.Before(q[j].queued) })
	highest := make([]int64, len(q)) // the highest fence among q[:i+1]
	for i, tk := range q {
		highest[i] = tk.fence
		if i > 0 {
			highest[i] = max(highest[i], highest[i-1])
		}
	}
	for _, b := range takes {
		n := sort.Search(len(q), func(i int) bool { return !q[i].queued.Before(b.start) }) // queued before b began
		if n == 0 {
			continue
		}
		judged++
		if highest[n-1] > b.fence {
			violations++
		}
	}
	return violations, judged
}

// TestSemaphore_WeightedAdmissionUnderFaults: 16 goroutines on 4 engines take
// permits of weight 1 and 3, interleaved, of one semaphore of limit 10
// (one acquisition in eight by TryAcquireSemaphore, the rest waiting),
// through a proxy that delays a fifth of all chunks by up to 20 ms and cuts
// connections at random; permits last 50 ms (250 on miniredis) and 2% of
// holders extend them and then outstay them, so permits time out and are purged with their
// weight. By the clients' own record: valid holders (the release found
// the permit theirs) never hold more than 10 at once, and no acquisition
// is admitted before one that was queued before its call began. Queue
// entries live 5 s here, so that no waiter's entry lapses under the
// faults (a waiter whose entry lapsed queues again, rightly behind later
// arrivals, which the check would count).
func TestSemaphore_WeightedAdmissionUnderFaults(t *testing.T) {
	testserver.Apart(t) // slow, and reads nothing the process or server shares
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		const limit, workers, engines = 10, 16, 4
		target := checkerScale(s)
		if testing.Short() {
			target = 400
		}
		ttl := 50 * time.Millisecond
		if s.Mini != nil {
			ttl = 250 * time.Millisecond // miniredis's Lua, under -race, is slow enough to time out 50 ms permits
		}
		proxy := startProxy(t, s.Addr, faults{delayP: 0.2, maxDelay: 20 * time.Millisecond})
		pool := newPool(t, proxy.addr())
		pool.MaxIdle = 64
		var queuedAt sync.Map // token -> time.Time
		es := make([]*Engine, engines)
		for i := range es {
			es[i] = New(pool, WithNamespace(s.NS), WithObserver(func(ev Event) {
				if ev.Type == EventQueued {
					queuedAt.Store(ev.Token, time.Now())
				}
			}))
			es[i].queueTTL = 5 * time.Second
		}
		defer func() {
			for _, e := range es {
				e.Close(context.Background())
			}
		}()

		var mu sync.Mutex
		var takes []weightedTake
		var acquisitions, tries, refused, lost, errs, ranOut atomic.Int64
		var firstErrs sync.Once
		stop := proxy.chaos()
		deadline := time.Now().Add(5 * time.Minute)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for i := 0; acquisitions.Load() < int64(target) && time.Now().Before(deadline); i++ {
					tk := weightedTake{weight: 1 + 2*((w+i)%2), start: time.Now()}
					o, acquire := SemaphoreOptions{Limit: limit, Weight: tk.weight, TTL: ttl, Wait: 30 * time.Second}, es[w%engines].AcquireSemaphore
					try := i%8 == 7 // one in eight makes one attempt: it must not jump the queue either
					if try {
						acquire = es[w%engines].TryAcquireSemaphore
					}
					p, err := acquire(ctx, "wf", o)
					switch {
					case try && errors.Is(err, ErrNotAcquired):
						refused.Add(1)
						time.Sleep(time.Millisecond)
						continue
					case errors.Is(err, ErrNotAcquired):
						ranOut.Add(1)
						continue
					case err != nil:
						errs.Add(1)
						firstErrs.Do(func() { t.Logf("first error: %v", err) })
						continue
					}
					acquisitions.Add(1)
					if try {
						tries.Add(1)
					}
					tk.in, tk.fence, tk.tokenInUse = time.Now(), p.Fence(), p.Token()
					switch r := rand.IntN(100); {
					case r < 3: // outstay the permit: it times out, and its weight is purged
						if p.Extend(ctx, 0) == nil { // a permit handed over lasts to its queue entry's end until extended
							time.Sleep(ttl + 10*time.Millisecond)
						}
					default:
						time.Sleep(rand.N(2 * time.Millisecond))
					}
					tk.out = time.Now()
					err = p.Release(ctx)
					tk.valid = err == nil
					switch {
					case errors.Is(err, ErrNotHeld):
						lost.Add(1)
					case err != nil:
						errs.Add(1)
						firstErrs.Do(func() { t.Logf("first error: %v", err) })
					}
					mu.Lock()
					takes = append(takes, tk)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		stop()

		queued := 0
		for i := range takes {
			if at, ok := queuedAt.Load(takes[i].tokenInUse); ok {
				takes[i].queued = at.(time.Time)
				queued++
			}
		}
		over, peak := weightedOverAdmissions(takes, limit)
		violations, judged := outOfOrder(takes)
		t.Logf("%s: %d acquisitions of weight 1 and 3 (limit %d), %d queued, %d by TryAcquireSemaphore (%d refused); %d over-admissions (peak %d held at once by valid holders); %d admitted before one queued earlier, of %d judged; %d timed out or cut before their release, %d waits ran out, %d errors, %d connections cut",
			s.Name, acquisitions.Load(), limit, queued, tries.Load(), refused.Load(), over, peak, violations, judged, lost.Load(), ranOut.Load(), errs.Load(), proxy.cuts.Load())
		if over != 0 {
			t.Errorf("%d over-admissions: valid holders held up to %d of %d", over, peak, limit)
		}
		if violations != 0 {
			t.Errorf("%d acquisitions admitted before one queued before they began", violations)
		}
		if acquisitions.Load() < int64(target)*9/10 {
			t.Errorf("only %d of %d acquisitions succeeded", acquisitions.Load(), target)
		}
		if want := map[bool]int{true: limit / 2, false: limit - 2}[s.Mini != nil]; peak < want || judged < len(takes)/4 || lost.Load() == 0 {
			t.Errorf("peak %d held, %d judged for order, %d permits lost: the check proves little", peak, judged, lost.Load())
		}
	})
}

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

// pending fails t if the acquisition has returned already.
func pending(t *testing.T, c <-chan permitOrErr, what string) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("%s returned (%v, %v), want it still waiting", what, r.p.Token(), r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestSemaphore_WeightInvalid(t *testing.T) {
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
func TestSemaphore_WeightReleaseAdmitsSeveral(t *testing.T) {
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
func TestSemaphore_WeightHeadOfLine(t *testing.T) {
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
func TestSemaphore_WeightLoweredLimitRefusesWaiter(t *testing.T) {
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
func TestSemaphore_WeightPurged(t *testing.T) {
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
func TestSemaphore_WeightInfoAndExtend(t *testing.T) {
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
		// A TTL that a busy machine's late sleeps stay well inside (300 ms
		// with 200 ms between extensions expired once in CI at load 10).
		three := take(SemaphoreOptions{TTL: time.Second, Weight: 3, Watchdog: true, Owner: "three"})
		one := take(SemaphoreOptions{TTL: time.Minute})
		two := take(SemaphoreOptions{TTL: time.Second, Weight: 2})
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
		// Extended by Extend and by the watchdog, past their TTL.
		for range 3 {
			time.Sleep(400 * time.Millisecond)
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
func TestSemaphore_WeightHandedOver(t *testing.T) {
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

// A semaphore's counter past 2^53 (set by hand: one started from the clock
// stays below it for centuries), grown with INCR, is kept for the fence
// retention as any other, so that fences never start again lower.
func TestSemaphore_CounterPastExactDoublesKeptForTheRetention(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s, WithFenceRetention(time.Hour)), ctxT(t)
		counter := object{kind: kindSem, name: "big", ns: s.NS}.key(":counter")
		s.Must(t, "SET", counter, "9007199254740993", "PX", 1000)
		p, err := e.TryAcquireSemaphore(ctx, "big", SemaphoreOptions{Limit: 2, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if p.Fence() != 9007199254740994 {
			t.Fatalf("fence %d, want 9007199254740994", p.Fence())
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if pttl := s.PTTL(t, counter); pttl < 59*time.Minute || pttl > time.Hour {
			t.Fatalf("the counter expires in %v, want the retention of 1h", pttl)
		}
	})
}

// semaphore_info's reply: four counts, then five figures a permit.
func TestSemaphore_DecodeInfo(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	got, err := decodeSemaphoreInfo([]any{int64(3), int64(1), int64(2), int64(2), b("t"), int64(900), b("41"), b("o"), int64(2)})
	if err != nil || got.Limit != 3 || got.Holders != 1 || got.Waiting != 2 || got.Held != 2 || len(got.Permits) != 1 ||
		got.Permits[0] != (PermitInfo{Token: "t", Fence: 41, TTL: 900 * time.Millisecond, Owner: "o", Weight: 2}) {
		t.Errorf("decodeSemaphoreInfo = %+v, %v", got, err)
	}
	for _, bad := range []any{nil, []any{int64(1), int64(2), int64(3)}, []any{int64(1), int64(1), int64(0), int64(1), b("t")},
		[]any{b("x"), int64(1), int64(0), int64(1)}} {
		if got, err := decodeSemaphoreInfo(bad); err == nil {
			t.Errorf("decodeSemaphoreInfo(%v) = %+v, want an error", bad, got)
		}
	}
}
