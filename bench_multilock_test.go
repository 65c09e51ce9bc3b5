package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func init() {
	targets = append(targets,
		bench.Row("LockAll of 4 names, p50 ÷ one Lock's", [2]string{"BenchmarkLockAll/lockall-4", "p50-ms"}, [2]string{"BenchmarkLockAll/lock", "p50-ms"}, "<=", 1.3).Aim(),
		bench.Row("a bare script setting 4 keys, p50 ÷ one setting 1 key: the floor of one script over 4 names on this machine", [2]string{"BenchmarkLockAll/bare-4", "p50-ms"}, [2]string{"BenchmarkLockAll/bare-1", "p50-ms"}, "", 0),
		bench.Row("LockAll of 4 names and its Unlock: server µs ÷ one Lock and Unlock's", [2]string{"BenchmarkLockAll/lockall-4-cycle", "srv-us/op"}, [2]string{"BenchmarkLockAll/lock-cycle", "srv-us/op"}, "", 0),
		bench.Row("LockAll of 4 names and its Unlock: server CPU ÷ one Lock and Unlock's", [2]string{"BenchmarkLockAll/lockall-4-cycle", "cpu-us/op"}, [2]string{"BenchmarkLockAll/lock-cycle", "cpu-us/op"}, "", 0),
		bench.Row("LockAll of 4 names on 3 primaries, p50 ÷ 4 Locks in a row", [2]string{"BenchmarkLockAll/cluster-lockall-4", "p50-ms"}, [2]string{"BenchmarkLockAll/cluster-4-locks", "p50-ms"}, "<=", 0.6),
		bench.Row("4 Locks on 3 primaries at once (no order), p50 ÷ 4 Locks in a row: the floor of trying the nodes together", [2]string{"BenchmarkLockAll/cluster-4-locks-at-once", "p50-ms"}, [2]string{"BenchmarkLockAll/cluster-4-locks", "p50-ms"}, "", 0),
	)
}

// BenchmarkLockAll: how long an uncontended LockAll of 4 names takes to
// return, against one Lock, on the bench server; and on the cluster of
// REDIS_CLUSTER_ADDRS, with the 4 names on 3 primaries, against 4 Lock
// calls in a row. The locks are released outside the timing. And where a
// cycle's time goes: the server's script µs and CPU of LockAll and its
// Unlock against one Lock and Unlock.
func BenchmarkLockAll(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, opRounds())
	ctx := context.Background()
	e := x.env.engine()
	defer closeAll(e)()
	const n = 200
	timed := func(acquire func() (func() error, error)) func(r *bench.Round) error {
		return func(r *bench.Round) error {
			ds := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				start := time.Now()
				release, err := acquire()
				if err != nil {
					return err
				}
				ds = append(ds, time.Since(start))
				if err := release(); err != nil {
					return err
				}
			}
			addLatencies(r, ds)
			return nil
		}
	}
	names := []string{"all-a", "all-b", "all-c", "all-d"}
	lockAll := func(e *Engine, names []string) func() (func() error, error) {
		return func() (func() error, error) {
			m, err := e.LockAll(ctx, names, LockOptions{TTL: benchLease})
			if err != nil {
				return nil, err
			}
			return func() error { return m.Unlock(ctx) }, nil
		}
	}
	locks := func(e *Engine, names []string) func() (func() error, error) {
		return func() (func() error, error) {
			ls := make([]*Lock, 0, len(names))
			for _, name := range names {
				l, err := e.Lock(ctx, name, LockOptions{TTL: benchLease})
				if err != nil {
					return nil, err
				}
				ls = append(ls, l)
			}
			return func() error {
				for _, l := range ls {
					if err := l.Unlock(ctx); err != nil {
						return err
					}
				}
				return nil
			}, nil
		}
	}
	x.Add("lock", timed(locks(e, names[:1])))
	x.Add("lockall-4", timed(lockAll(e, names)))
	// The floor under the ratio: a bare script that sets 4 keys (SET NX PX,
	// no fence, no queue) against one that sets 1, through the same pool.
	// On a machine whose idle wake-ups are slow, a round trip's time moves
	// between rounds by more than the script's work, and so does this.
	bare := func(n int) func() (func() error, error) {
		keys := make([]any, 0, n+1)
		for i := range n {
			keys = append(keys, x.env.ns+"bare:{all}:"+strconv.Itoa(i))
		}
		s := redis.NewScript(n, "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) end return 1")
		args := append(slices.Clone(keys), "token", benchLease.Milliseconds())
		return func() (func() error, error) {
			c, err := x.env.Pool.GetContext(ctx)
			if err != nil {
				return nil, err
			}
			_, err = s.DoContext(ctx, c, args...)
			c.Close()
			return func() error {
				c, err := x.env.Pool.GetContext(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = redis.DoContext(c, ctx, "DEL", keys...)
				return err
			}, err
		}
	}
	x.Add("bare-1", timed(bare(1)))
	x.Add("bare-4", timed(bare(4)))
	// Where the time goes: the server's script time and the client's CPU
	// of a whole cycle (taken and released: one script for LockAll's
	// taking, one a name for its Unlock).
	cycle := func(acquire func() (func() error, error)) func(int) error {
		return func(int) error {
			release, err := acquire()
			if err != nil {
				return err
			}
			return release()
		}
	}
	x.AddOps("lock-cycle", cycle(locks(e, names[:1])))
	x.AddOps("lockall-4-cycle", cycle(lockAll(e, names)))
	seeds := testserver.ClusterSeeds()
	switch {
	case len(seeds) == 0:
		x.Skip("cluster-lockall-4", "REDIS_CLUSTER_ADDRS not set")
		x.Skip("cluster-4-locks", "REDIS_CLUSTER_ADDRS not set")
		x.Skip("cluster-4-locks-at-once", "REDIS_CLUSTER_ADDRS not set")
	case benchMini:
		x.Skip("cluster-lockall-4", "the main job runs on miniredis")
		x.Skip("cluster-4-locks", "the main job runs on miniredis")
		x.Skip("cluster-4-locks-at-once", "the main job runs on miniredis")
	default:
		rc := benchCluster(b, seeds)
		owners, err := testcluster.SlotOwners(rc)
		if err != nil {
			bench.Check(b, err)
		}
		// 4 names on 3 primaries: two on one, one on each other.
		byNode := map[string][]string{}
		var spread []string
		for i := 0; len(spread) < 4 && i < 10000; i++ {
			name := fmt.Sprint("spread", i)
			node := owners[keySlot(name)]
			if len(byNode[node]) < 1 || len(byNode) == 3 && len(byNode[node]) < 2 && len(spread) == 3 {
				byNode[node] = append(byNode[node], name)
				spread = append(spread, name)
			}
		}
		if len(byNode) != 3 {
			b.Fatalf("names on %d primaries, want 3", len(byNode))
		}
		ce := New(testcluster.Pool{Cluster: rc}, WithNamespace(testNamespace()))
		defer closeAll(ce)()
		x.Add("cluster-lockall-4", timed(lockAll(ce, spread)))
		x.Add("cluster-4-locks", timed(locks(ce, spread)))
		// The floor of trying the nodes at once: 4 Lock calls in 4
		// goroutines, no order kept (it could deadlock against another
		// caller; LockAll cannot).
		x.Add("cluster-4-locks-at-once", timed(func() (func() error, error) {
			ls := make([]*Lock, len(spread))
			errs := make([]error, len(spread))
			var wg sync.WaitGroup
			for i, name := range spread {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ls[i], errs[i] = ce.Lock(ctx, name, LockOptions{TTL: benchLease})
				}()
			}
			wg.Wait()
			return func() error {
				for _, l := range ls {
					if l != nil {
						if err := l.Unlock(ctx); err != nil {
							return err
						}
					}
				}
				return nil
			}, errors.Join(errs...)
		}))
	}
	x.Run()
}
