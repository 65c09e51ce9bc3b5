package atomicredis

// Benchmarks of the read-write lock against the plain exclusive Lock, as
// experiments (internal/bench): interleaved rounds, so that both meet the
// same machine and server state.
// Run: go test -run '^$' -bench RW

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
)

// The read-write lock's rows in the verdict table: reported, not judged.
func init() {
	targets = append(targets,
		bench.Row("read-mostly, 16 clients: rw ops/s ÷ lock", [2]string{"BenchmarkRWReadMostly/rw", "ops/s"}, [2]string{"BenchmarkRWReadMostly/lock", "ops/s"}, "", 0),
		bench.Row("uncontended cycle: rlock time ÷ lock", [2]string{"BenchmarkRWUncontended/rlock", "ns/op"}, [2]string{"BenchmarkRWUncontended/lock", "ns/op"}, "", 0),
		bench.Row("uncontended cycle: wlock time ÷ lock", [2]string{"BenchmarkRWUncontended/wlock", "ns/op"}, [2]string{"BenchmarkRWUncontended/lock", "ns/op"}, "", 0),
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
	x.Rounds = max(x.Rounds, opRounds())
	x.Show = []string{"ns/op", "ops/s", "cpu-us/op"}
	e, ctx := x.env.engine(), context.Background()
	o := LockOptions{TTL: 10 * time.Second, Wait: time.Minute}
	variant := func(name string, take func(write bool) (*Lock, error)) {
		x.Add(name, func(r *bench.Round) error {
			var i atomic.Int64
			u, ops, err := r.Timed(func(bu bench.Budget) (int, error) {
				if bu.N > 0 {
					bu.N = max(bu.N, 4*clients)
				}
				return bench.Parallel(bu, clients, func(int) error {
					l, err := take(i.Add(1)%10 == 0)
					if err != nil {
						return err
					}
					time.Sleep(work)
					return l.Unlock(ctx)
				})
			})
			if err == nil {
				r.Add("ops/s", float64(ops)/u.Wall.Seconds())
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
	x.Run()
}

// BenchmarkRWUncontended: one goroutine, RLock+Unlock and WLock+Unlock
// cycles against Lock+Unlock.
func BenchmarkRWUncontended(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, opRounds())
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
	x.AddOps("lock", cycle(e.Lock))
	x.AddOps("rlock", cycle(e.RLock))
	x.AddOps("wlock", cycle(e.WLock))
	x.Run()
}
