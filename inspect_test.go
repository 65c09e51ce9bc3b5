package atomicredis

// Inspection: the calls that only look write nothing.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// Every inspection call (IsLocked, LockInfo, SemaphoreHolders,
// SemaphoreInfo, the TTL and Held of confirmed holdings, SuggestRecent,
// IsActive) sends no write, with permits past their deadline present,
// which a purge would remove. The server's rdb_changes_since_last_save
// counts every write, also one undone later in the same script, which a
// keyspace snapshot would miss. miniredis has no such counter, so the
// check runs on a redis-server of the test's own (nothing else writes
// there).
func TestInspectionWritesNothing(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		t.Skip("miniredis has no rdb_changes_since_last_save in INFO: the check runs on redis-server")
	})
	t.Run("redis", func(t *testing.T) {
		testserver.Parallel(t)
		s := privateServer(t, "private redis")
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "l", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.TryRLock(ctx, "rw", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 3, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// Two permits past their deadline, as crashed holders leave them
		// (written by hand: an acquisition would purge the earlier one).
		past := serverMicros(s, t)/1000 - 1000
		for i, token := range []string{"crashed-1", "crashed-2"} {
			s.Must(t, "ZADD", s.NS+"sem:{s}", past+int64(i), token)
			s.Must(t, "ZADD", s.NS+"sem:{s}:owner", p.Fence()-int64(i)-1, token)
		}
		if err := e.AddRecent(ctx, "r", "alice"); err != nil {
			t.Fatal(err)
		}
		if err := e.MarkActive(ctx, "g", "p", 7); err != nil {
			t.Fatal(err)
		}
		changes := func() int64 {
			info, err := redis.String(s.Do("INFO", "persistence"))
			if err != nil {
				t.Fatal(err)
			}
			v, ok := testserver.InfoField(info, "rdb_changes_since_last_save")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				t.Fatalf("INFO persistence: no rdb_changes_since_last_save: %q", info)
			}
			return n
		}
		for _, c := range []struct {
			name string
			run  func(ctx context.Context) (any, error)
		}{
			{"IsLocked", func(ctx context.Context) (any, error) { return e.IsLocked(ctx, "l") }},
			{"LockInfo", func(ctx context.Context) (any, error) { return e.LockInfo(ctx, "l") }},
			{"Lock.TTL", func(ctx context.Context) (any, error) { return l.TTL(ctx) }},
			{"Lock.Held", func(ctx context.Context) (any, error) { return l.Held(ctx) }},
			{"Lock.TTL of a read hold", func(ctx context.Context) (any, error) { return r.TTL(ctx) }},
			{"SemaphoreHolders", func(ctx context.Context) (any, error) { return e.SemaphoreHolders(ctx, "s") }},
			{"SemaphoreInfo", func(ctx context.Context) (any, error) { return e.SemaphoreInfo(ctx, "s") }},
			{"Permit.TTL", func(ctx context.Context) (any, error) { return p.TTL(ctx) }},
			{"Permit.Held", func(ctx context.Context) (any, error) { return p.Held(ctx) }},
			{"SuggestRecent", func(ctx context.Context) (any, error) { return e.SuggestRecent(ctx, "r", "al", 5) }},
			{"IsActive", func(ctx context.Context) (any, error) { return e.IsActive(ctx, "g", "p", 7) }},
		} {
			before := changes()
			got, err := c.run(ctx)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if after := changes(); after != before {
				t.Errorf("%s (%v) wrote: rdb_changes_since_last_save %d -> %d", c.name, got, before, after)
			}
		}
		// What they saw: the timed-out permits are not counted, and still
		// there for the next write to purge.
		if n, err := e.SemaphoreHolders(ctx, "s"); n != 1 || err != nil {
			t.Errorf("SemaphoreHolders = %d, %v; want 1 (two timed out)", n, err)
		}
		if info, err := e.SemaphoreInfo(ctx, "s"); semCounts(info) != (semInfoCounts{Limit: 3, Holders: 1}) || err != nil {
			t.Errorf("SemaphoreInfo = %+v, %v", info, err)
		}
		if n, err := redis.Int(s.Do("ZCARD", s.NS+"sem:{s}")); n != 3 || err != nil {
			t.Errorf("permits stored: %d, %v; want 3 (the timed-out ones left for the next write)", n, err)
		}
	})
}
