package atomicredis

// Benchmarks of the read-write lock against the plain exclusive Lock, as
// experiments (verdict_test.go): interleaved rounds, so that both meet the
// same machine and server state.
// Run: go test -run '^$' -bench RW

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// The read-write lock's rows in the verdict table: reported, not judged.
func init() {
	targets = append(targets,
		target{"read-mostly, 16 clients: rw ops/s ÷ lock", [2]string{"BenchmarkRWReadMostly/rw", "ops/s"}, [2]string{"BenchmarkRWReadMostly/lock", "ops/s"}, "", 0},
		target{"uncontended cycle: rlock time ÷ lock", [2]string{"BenchmarkRWUncontended/rlock", "ns/op"}, [2]string{"BenchmarkRWUncontended/lock", "ns/op"}, "", 0},
		target{"uncontended cycle: wlock time ÷ lock", [2]string{"BenchmarkRWUncontended/wlock", "ns/op"}, [2]string{"BenchmarkRWUncontended/lock", "ns/op"}, "", 0},
	)
}

// BenchmarkRWReadMostly: 16 goroutines share a round's operations, 9
// reads in 10, each holding its lock for 1 ms of simulated work; the
// read-write lock (readers share, FIFO, writers never starve) against the
// plain Lock for everything. A round is at least 4 operations per client:
// fewer would measure its own start and finish more than the steady state.
func BenchmarkRWReadMostly(b *testing.B) {
	const clients, work = 16, time.Millisecond
	x := newExperiment(b)
	x.rounds = max(x.rounds, opRounds())
	x.show = []string{"ns/op", "ops/s", "cpu-us/op"}
	e, ctx := x.env.engine(), context.Background()
	o := LockOptions{TTL: 10 * time.Second, Wait: time.Minute}
	variant := func(name string, take func(write bool) (*Lock, error)) {
		x.add(name, func(r *round) error {
			var i atomic.Int64
			u, ops, err := r.timed(func(bu budget) (int, error) {
				if bu.n > 0 {
					bu.n = max(bu.n, 4*clients)
				}
				return parallel(bu, clients, func(int) error {
					l, err := take(i.Add(1)%10 == 0)
					if err != nil {
						return err
					}
					time.Sleep(work)
					return l.Unlock(ctx)
				})
			})
			if err == nil {
				r.add("ops/s", float64(ops)/u.wall.Seconds())
			}
			return err
		})
	}
	variant("rw", func(write bool) (*Lock, error) {
		if write {
			return e.WLock(ctx, "rm", o)
		}
		return e.RLock(ctx, "rm", o)
	})
	variant("lock", func(bool) (*Lock, error) { return e.Lock(ctx, "rm", o) })
	x.run()
}

// BenchmarkRWUncontended: one goroutine, RLock+Unlock and WLock+Unlock
// cycles against Lock+Unlock.
func BenchmarkRWUncontended(b *testing.B) {
	x := newExperiment(b)
	x.rounds = max(x.rounds, opRounds())
	e, ctx := x.env.engine(), context.Background()
	cycle := func(take func(context.Context, string, LockOptions) (*Lock, error)) func(int) error {
		return func(int) error {
			l, err := take(ctx, "un", LockOptions{})
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}
	}
	x.addOps("lock", cycle(e.Lock))
	x.addOps("rlock", cycle(e.RLock))
	x.addOps("wlock", cycle(e.WLock))
	x.run()
}
