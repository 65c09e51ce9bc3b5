package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func TestObject_KeySlot(t *testing.T) {
	// Values from the Redis cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{"foo": 12182, "bar": 5061, "{user1000}.following": keySlot("user1000"), "{}x": keySlot("{}x")} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	t.Run("cluster-node", func(t *testing.T) {
		addr := testserver.ClusterNodeAddr()
		if addr == "" {
			t.Skip("REDIS_CLUSTER_ADDR not set: no cluster-enabled node for CLUSTER KEYSLOT")
		}
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, key := range []string{"foo", "lock:{a b}:fence", "x{}y", "{\xff\x00}", "ns:sem:{é}:owner", "a{b}c{d}"} {
			want, err := redis.Int(c.Do("CLUSTER", "KEYSLOT", key))
			if err != nil {
				t.Fatal(err)
			}
			if got := keySlot(key); int(got) != want {
				t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
	})
}

// FuzzKeys: for any namespace, name and period, every key the operations
// write lies in the name's slot (activity's partitions, in their own tag's
// slot), or the input is refused with ErrInvalid and
// nothing is written.
func FuzzKeys(f *testing.F) {
	for _, seed := range [][3]string{{"", "orders", "2026-11-21"}, {"app:", "a b", ""}, {"x", "é\x00\xff", "{p}"}, {"", "{", "p"}, {"n{", "a", "p"}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	s := testserver.Mini(f)
	f.Fuzz(func(t *testing.T, ns, name, period string) {
		s.Mini.FlushAll()
		e := New(s.Pool, WithNamespace(ns))
		ctx := context.Background()
		errs := []error{
			func() error { _, err := e.TryLock(ctx, name, LockOptions{TTL: time.Minute}); return err }(),
			func() error { _, err := e.TryRLock(ctx, name, LockOptions{TTL: time.Minute}); return err }(),
			func() error { _, err := e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 1}); return err }(),
			e.AddRecent(ctx, name, "item"),
			e.AddMembers(ctx, name, "m"),
			e.MarkActive(ctx, name, period, 3),
			func() error { _, err := e.CountActive(ctx, name, period, period+"2"); return err }(),
		}
		invalid := name == "" || strings.ContainsAny(name+ns, "{}")
		for _, err := range errs {
			if invalid != errors.Is(err, ErrInvalid) || (!invalid && err != nil) {
				t.Fatalf("ns %q name %q: error %v (invalid input: %v)", ns, name, err, invalid)
			}
		}
		keys := s.Mini.Keys()
		if invalid {
			if len(keys) != 0 {
				t.Fatalf("refused input wrote %q", keys)
			}
			return
		}
		if len(keys) < 7 {
			t.Fatalf("only %d keys: %q", len(keys), keys)
		}
		for _, k := range keys {
			want := keySlot("{" + name + "}")
			switch {
			case strings.HasPrefix(k[len(ns):], "act:"):
				want = keySlot("{" + partTag(name, placeOf(3).part()) + "}") // id 3's partition
			case strings.HasPrefix(k[len(ns):], "bits:"):
				want = keySlot("{" + name + ":0}") // v3's key of id 3's shard, guarded
			}
			if got := keySlot(k); got != want {
				t.Fatalf("key %q in slot %d, the name's slot is %d", k, got, want)
			}
		}
	})
}

// Fence counters expire WithFenceRetention after their name's last grant
// (read-write locks, semaphores; a plain lock keeps its last fence in its
// one key for the rest of its lease, TestLock_FenceKeptForTheLease), so an
// idle name leaves no key; the next fence then starts from the server's
// clock in microseconds, above every fence before it.
func TestObject_CountersExpireAfterRetention(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		const retention = 300 * time.Millisecond
		ctx, e := ctxT(t), engine(s, WithFenceRetention(retention))
		for _, c := range []struct {
			counter string
			take    func() (fence int64, release func() error, err error)
		}{
			{"rw:{f}:fence", func() (int64, func() error, error) {
				l, err := e.TryWLock(ctx, "f", LockOptions{TTL: time.Minute})
				return l.Fence(), func() error { return l.Unlock(ctx) }, err
			}},
			{"sem:{f}:counter", func() (int64, func() error, error) {
				p, err := e.TryAcquireSemaphore(ctx, "f", SemaphoreOptions{Limit: 1, TTL: time.Minute})
				return p.Fence(), func() error { return p.Release(ctx) }, err
			}},
		} {
			key := s.NS + c.counter
			first, release, err := c.take()
			if err != nil {
				t.Fatal(err)
			}
			if got := s.PTTL(t, key); got <= 0 || got > retention {
				t.Errorf("PTTL %s after a grant = %v, want (0, %v]", key, got, retention)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			second, release, err := c.take()
			if err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if second != first+1 {
				t.Errorf("%s: fences %d then %d while the counter lives, want consecutive", c.counter, first, second)
			}
			s.Advance(retention + 50*time.Millisecond)
			if n, _ := redis.Int(s.Do("EXISTS", key)); n != 0 {
				t.Errorf("%s still there after its retention (PTTL %v)", key, s.PTTL(t, key))
			}
			third, release, err := c.take()
			if err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if third <= second {
				t.Errorf("%s: fence %d after the counter expired, %d before: fences went back", c.counter, third, second)
			}
		}
		s.Advance(retention + 50*time.Millisecond)
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("keys left after the retention: %q", ks)
		}
	})
}

// Every grant gives its name's fence counter the whole retention again
// (locks, read-write locks, semaphores): a name used more often than its
// retention keeps its counter, and its fences stay consecutive, however
// long ago its first grant was. Here grants come 0.6 retentions apart, so
// the third is 1.2 retentions after the first.
func TestObject_FenceCounterKeepsItsRetention(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		retention := 300 * time.Millisecond
		if s.Mini == nil {
			retention = 2 * time.Second // a real server is waited on: 0.8 s of slack per gap
		}
		ctx, e := ctxT(t), engine(s, WithFenceRetention(retention))
		kinds := []struct {
			counter string
			take    func() (int64, error)
		}{
			{"lock:{fk}:fence", func() (int64, error) {
				l, err := e.TryLock(ctx, "fk", LockOptions{TTL: time.Minute})
				if err != nil {
					return 0, err
				}
				return l.Fence(), l.Unlock(ctx)
			}},
			{"rw:{fk}:fence", func() (int64, error) {
				l, err := e.TryWLock(ctx, "fk", LockOptions{TTL: time.Minute})
				if err != nil {
					return 0, err
				}
				return l.Fence(), l.Unlock(ctx)
			}},
			{"sem:{fk}:counter", func() (int64, error) {
				p, err := e.TryAcquireSemaphore(ctx, "fk", SemaphoreOptions{Limit: 1, TTL: time.Minute})
				if err != nil {
					return 0, err
				}
				return p.Fence(), p.Release(ctx)
			}},
		}
		fences := make([][]int64, len(kinds))
		for round := 0; round < 3; round++ {
			if round > 0 {
				s.Advance(retention * 6 / 10)
			}
			for i, k := range kinds {
				f, err := k.take()
				if err != nil {
					t.Fatalf("%s, grant %d: %v", k.counter, round+1, err)
				}
				fences[i] = append(fences[i], f)
			}
		}
		for i, k := range kinds {
			if f := fences[i]; f[1] != f[0]+1 || f[2] != f[1]+1 {
				t.Errorf("%s: fences %v from grants %v apart (retention %v), want consecutive: the counter did not outlive its first grant by a retention", k.counter, f, retention*6/10, retention)
			}
		}
	})
}

// The largest values each option and argument takes are stored and read
// back exactly; one past them (and MaxInt64) is ErrInvalid, with nothing
// written.
func TestObject_NumbersExactAndInRange(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		// near reports whether a TTL read back is d, less what a round trip
		// or two took.
		near := func(got, d time.Duration) error {
			if got > d.Truncate(time.Millisecond) || got < d-time.Minute {
				return fmt.Errorf("TTL %v, want about %v", got, d)
			}
			return nil
		}
		for _, c := range []struct {
			name    string
			invalid bool
			run     func() error
		}{
			// Options.
			{"WithRecentCapacity(2^53-1)", false, func() error {
				e := engine(s, WithRecentCapacity(maxExact))
				for _, item := range []string{"a", "b"} {
					if err := e.AddRecent(ctx, "cap", item); err != nil {
						return err
					}
				}
				if got, err := e.SuggestRecent(ctx, "cap", "", maxExact); err != nil || !slices.Equal(got, []string{"b", "a"}) {
					return fmt.Errorf("SuggestRecent = %q, %v", got, err)
				}
				return nil
			}},
			{"WithRecentCapacity(2^53)", true, func() error { return engine(s, WithRecentCapacity(maxExact+1)).AddRecent(ctx, "cap2", "a") }},
			{"WithRecentCapacity(MaxInt64)", true, func() error {
				return engine(s, WithRecentCapacity(math.MaxInt64)).AddRecent(ctx, "cap2", "a")
			}},
			{"WithFenceRetention(max)", false, func() error {
				l, err := engine(s, WithFenceRetention(maxDuration)).TryWLock(ctx, "ret", LockOptions{}) // a plain lock keeps its fence with its lease
				if err != nil {
					return err
				}
				defer l.Unlock(ctx)
				return near(s.PTTL(t, s.NS+"rw:{ret}:fence"), maxDuration)
			}},
			{"WithCallTimeout(max)", false, func() error {
				_, err := engine(s, WithCallTimeout(maxDuration)).IsLocked(ctx, "ct")
				return err
			}},
			// Semaphore limits.
			{"TryAcquireSemaphore Limit 2^53-1", false, func() error {
				p, err := e.TryAcquireSemaphore(ctx, "big", SemaphoreOptions{Limit: maxExact})
				if err != nil {
					return err
				}
				defer p.Release(ctx)
				if info, err := e.SemaphoreInfo(ctx, "big"); info.Limit != maxExact || err != nil {
					return fmt.Errorf("SemaphoreInfo = %+v, %v; want Limit 2^53-1", info, err)
				}
				return nil
			}},
			{"TryAcquireSemaphore Limit 2^53", true, func() error {
				_, err := e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: maxExact + 1})
				return err
			}},
			{"TryAcquireSemaphore Limit 2^53+1", true, func() error {
				_, err := e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 1<<53 + 1})
				return err
			}},
			{"AcquireSemaphore Limit MaxInt64", true, func() error {
				_, err := e.AcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: math.MaxInt64})
				return err
			}},
			{"SetSemaphoreLimit 2^53-1", false, func() error {
				if err := e.SetSemaphoreLimit(ctx, "set", maxExact); err != nil {
					return err
				}
				if info, err := e.SemaphoreInfo(ctx, "set"); info.Limit != maxExact || err != nil {
					return fmt.Errorf("SemaphoreInfo = %+v, %v; want Limit 2^53-1", info, err)
				}
				return nil
			}},
			{"SetSemaphoreLimit 2^53", true, func() error { return e.SetSemaphoreLimit(ctx, "s", maxExact+1) }},
			{"SetSemaphoreLimit MaxInt64", true, func() error { return e.SetSemaphoreLimit(ctx, "s", math.MaxInt64) }},

			// Result limits.
			{"Suggest limit 2^53-1", false, func() error {
				if err := e.AddMembers(ctx, "m", "ab", "ac"); err != nil {
					return err
				}
				if got, err := e.Suggest(ctx, "m", "a", maxExact); err != nil || !slices.Equal(got, []string{"ab", "ac"}) {
					return fmt.Errorf("Suggest = %q, %v", got, err)
				}
				return nil
			}},
			{"Suggest limit 2^53", true, func() error { _, err := e.Suggest(ctx, "m", "a", maxExact+1); return err }},
			{"Suggest limit MaxInt64", true, func() error { _, err := e.Suggest(ctx, "m", "a", math.MaxInt64); return err }},
			{"SuggestRecent limit 2^53", true, func() error { _, err := e.SuggestRecent(ctx, "r", "a", maxExact+1); return err }},
			{"SuggestRecent limit MaxInt64", true, func() error {
				_, err := e.SuggestRecent(ctx, "r", "a", math.MaxInt64)
				return err
			}},

			// Durations: their largest value in ms is far below 2^53.
			{"TryLock TTL max", false, func() error {
				l, err := e.TryLock(ctx, "long", LockOptions{TTL: maxDuration})
				if err != nil {
					return err
				}
				defer l.Unlock(ctx)
				ttl, err := l.TTL(ctx)
				if err != nil {
					return err
				}
				return near(ttl, maxDuration)
			}},
			{"TryLock Wait max (not used)", false, func() error {
				l, err := e.TryLock(ctx, "wait", LockOptions{Wait: maxDuration})
				if err == nil {
					err = l.Unlock(ctx)
				}
				return err
			}},
			{"Lock.Extend max", false, func() error {
				l, err := e.TryLock(ctx, "ext", LockOptions{})
				if err != nil {
					return err
				}
				defer l.Unlock(ctx)
				if err := l.Extend(ctx, maxDuration); err != nil {
					return err
				}
				ttl, err := l.TTL(ctx)
				if err != nil {
					return err
				}
				return near(ttl, maxDuration)
			}},
			{"TryAcquireSemaphore TTL max, Permit.Extend max", false, func() error {
				p, err := e.TryAcquireSemaphore(ctx, "long", SemaphoreOptions{Limit: 1, TTL: maxDuration})
				if err != nil {
					return err
				}
				defer p.Release(ctx)
				if ttl, err := p.TTL(ctx); err != nil || near(ttl, maxDuration) != nil {
					return fmt.Errorf("TTL %v, %v; want about %v", ttl, err, maxDuration)
				}
				if err := p.Extend(ctx, maxDuration); err != nil {
					return err
				}
				ttl, err := p.TTL(ctx)
				if err != nil {
					return err
				}
				return near(ttl, maxDuration)
			}},

			{"WithActivityTTL(max)", false, func() error {
				e := engine(s, WithActivityTTL(maxDuration))
				if err := e.MarkActive(ctx, "ttl", "p", 3); err != nil {
					return err
				}
				if ok, err := e.IsActive(ctx, "ttl", "p", 3); !ok || err != nil {
					return fmt.Errorf("IsActive = %v, %v", ok, err)
				}
				return nil
			}},

			// Ids: split in Go, exact up to MaxInt64. (Activity rows last:
			// their bitmaps are slow to snapshot.)
			{"MarkActive id MaxInt64", false, func() error {
				if err := e.MarkActive(ctx, "ids", "p", math.MaxInt64); err != nil {
					return err
				}
				if ok, err := e.IsActive(ctx, "ids", "p", math.MaxInt64); !ok || err != nil {
					return fmt.Errorf("IsActive(MaxInt64) = %v, %v", ok, err)
				}
				if ok, err := e.IsActive(ctx, "ids", "p", math.MaxInt64-1); ok || err != nil {
					return fmt.Errorf("IsActive(MaxInt64-1) = %v, %v", ok, err)
				}
				if n, err := e.CountActive(ctx, "ids", "p"); n != 1 || err != nil {
					return fmt.Errorf("CountActive = %d, %v", n, err)
				}
				return nil
			}},
		} {
			var before map[string]string
			if c.invalid {
				before = s.Snapshot(t)
			}
			err := c.run()
			switch {
			case c.invalid && !errors.Is(err, ErrInvalid):
				t.Errorf("%s: %v, want ErrInvalid", c.name, err)
			case c.invalid:
				if after := s.Snapshot(t); !maps.Equal(before, after) {
					t.Errorf("%s: wrote:\n%q\n->\n%q", c.name, before, after)
				}
			case err != nil:
				t.Errorf("%s: %v", c.name, err)
			}
		}
	})
}

// An engine refused for an option says which; the limit in force is read
// back as stored (no rounding on the way).
func TestObject_NumbersErrorsNameTheValue(t *testing.T) {
	s := testserver.Mini(t)
	err := New(s.Pool, WithRecentCapacity(math.MaxInt64)).AddRecent(ctxT(t), "l", "a")
	if want := "recent capacity 9223372036854775807: must be at most 2^53 - 1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("AddRecent on an engine with capacity MaxInt64: %v, want %q", err, want)
	}
	if ks, err := redis.Strings(s.Do("KEYS", "*")); len(ks) != 0 || err != nil {
		t.Errorf("keys written: %q, %v", ks, err)
	}
	_, err = New(s.Pool).TryAcquireSemaphore(context.Background(), "s", SemaphoreOptions{Limit: 1<<53 + 1})
	if want := `semaphore "s": limit 9007199254740993: must be at most 2^53 - 1`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Limit 2^53+1: %v, want %q", err, want)
	}
}

// Names, periods and the namespace take at most MaxName bytes: one more
// is ErrInvalid with nothing written, and the error quotes at most the
// name's first 64 bytes.
func TestObject_MaxName(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s)
		longest, tooLong := strings.Repeat("n", MaxName), strings.Repeat("n", MaxName+1)
		l, err := e.TryLock(ctx, longest, LockOptions{})
		if err != nil {
			t.Fatalf("TryLock of a name of MaxName bytes: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s.Must(t, "DEL", s.NS+"lock:{"+longest+"}")
		for _, c := range []struct {
			name string
			run  func() error
		}{
			{"TryLock", func() error { _, err := e.TryLock(ctx, tooLong, LockOptions{}); return err }},
			{"Lock", func() error { _, err := e.Lock(ctx, tooLong, LockOptions{}); return err }},
			{"TryWLock", func() error { _, err := e.TryWLock(ctx, tooLong, LockOptions{}); return err }},
			{"TryAcquireSemaphore", func() error {
				_, err := e.TryAcquireSemaphore(ctx, tooLong, SemaphoreOptions{Limit: 1})
				return err
			}},
			{"TryLockAll", func() error { _, err := e.TryLockAll(ctx, []string{"a", tooLong}, LockOptions{}); return err }},
			{"Campaign", func() error { _, err := e.Election(tooLong, ElectionOptions{}).Campaign(ctx, "v"); return err }},
			{"AddRecent", func() error { return e.AddRecent(ctx, tooLong, "x") }},
			{"AddMembers", func() error { return e.AddMembers(ctx, tooLong, "x") }},
			{"MarkActive group", func() error { return e.MarkActive(ctx, tooLong, "p", 1) }},
			{"MarkActive period", func() error { return e.MarkActive(ctx, "g", tooLong, 1) }},
			{"MarkActiveMany period", func() error { return e.MarkActiveMany(ctx, "g", tooLong, 1, 2) }},
			{"IsActive period", func() error { _, err := e.IsActive(ctx, "g", tooLong, 1); return err }},
			{"CountActive period", func() error { _, err := e.CountActive(ctx, "g", "p", tooLong); return err }},
			{"namespace", func() error {
				_, err := engine(s, WithNamespace(s.NS+tooLong)).TryLock(ctx, "a", LockOptions{})
				return err
			}},
		} {
			err := c.run()
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s of %d bytes: %v, want ErrInvalid", c.name, MaxName+1, err)
				continue
			}
			if n := len(err.Error()); n > 300 {
				t.Errorf("%s of %d bytes: an error of %d bytes (%.100s...); want the name cut to its first 64", c.name, MaxName+1, n, err)
			}
		}
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("names past MaxName wrote %q", ks)
		}
	})
}
