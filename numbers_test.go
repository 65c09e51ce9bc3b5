package atomicredis

// Numbers: every count a script does arithmetic on is exact (at most
// 2^53 - 1, what a Lua number holds) and in range; durations and ids are
// exact up to their types' largest values.

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

// The largest values each option and argument takes are stored and read
// back exactly; one past them (and MaxInt64) is ErrInvalid, with nothing
// written.
func TestNumbersExactAndInRange(t *testing.T) {
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
				l, err := engine(s, WithFenceRetention(maxDuration)).TryLock(ctx, "ret", LockOptions{})
				if err != nil {
					return err
				}
				defer l.Unlock(ctx)
				return near(s.PTTL(t, s.NS+"lock:{ret}:fence"), maxDuration)
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
func TestNumbersErrorsNameTheValue(t *testing.T) {
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
