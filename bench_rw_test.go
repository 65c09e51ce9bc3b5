package atomicredis

// Benchmarks of the read-write lock against the plain exclusive Lock, in
// interleaved rounds so that both meet the same machine and server state.
// Run: go test -run '^$' -bench RW

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rwInterleave runs each variant for n operations per round, rounds times,
// alternating which goes first, and returns each variant's median time per
// operation and, for each variant, the median over rounds of its time per
// operation over the first variant's in the same round.
func rwInterleave(b *testing.B, rounds, n int, variants ...func(n int) (time.Duration, error)) (medians []time.Duration, ratios []float64) {
	b.Helper()
	per := make([][]float64, len(variants)) // ns per op, by variant, by round
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for j := range variants {
			v := j
			if r%2 == 1 {
				v = len(variants) - 1 - j
			}
			d, err := variants[v](n)
			if err != nil {
				b.Fatal(err)
			}
			per[v] = append(per[v], float64(d)/float64(n))
		}
	}
	b.StopTimer()
	for v := range variants {
		rs := make([]float64, rounds)
		for r := range rs {
			rs[r] = per[v][r] / per[0][r]
		}
		medians = append(medians, time.Duration(rwMedian(per[v])))
		ratios = append(ratios, rwMedian(rs))
	}
	return medians, ratios
}

func rwMedian(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkRWReadMostly: 16 goroutines share n operations, 9 reads in 10,
// each holding its lock for 1 ms of simulated work; the read-write lock
// (readers share, FIFO, writers never starve) against the plain Lock for
// everything. b.N operations of each kind (at least 9×64) in 9
// interleaved rounds; reported as median operations/s and the median of
// the rounds' ratios (rw/lock).
func BenchmarkRWReadMostly(b *testing.B) {
	const clients, rounds, work = 16, 9, time.Millisecond
	pool, ns := benchSetup(b)
	e, ctx := New(pool, WithNamespace(ns)), context.Background()
	o := LockOptions{TTL: 10 * time.Second, Wait: time.Minute}
	run := func(take func(write bool) (*Lock, error)) func(n int) (time.Duration, error) {
		return func(n int) (time.Duration, error) {
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			start := time.Now()
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= int64(n); i = next.Add(1) {
						l, err := take(i%10 == 0)
						if err != nil {
							errs <- err
							return
						}
						time.Sleep(work)
						if err := l.Unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			return elapsed, <-errs
		}
	}
	rw := run(func(write bool) (*Lock, error) {
		if write {
			return e.WLock(ctx, "rm", o)
		}
		return e.RLock(ctx, "rm", o)
	})
	plain := run(func(bool) (*Lock, error) { return e.Lock(ctx, "rm", o) })
	// A round of fewer than 4 operations per client would measure its own
	// start and finish more than the steady state.
	m, ratio := rwInterleave(b, rounds, max(b.N/rounds, 4*clients), rw, plain)
	b.ReportMetric(float64(time.Second)/float64(m[0]), "rw-ops/s")
	b.ReportMetric(float64(time.Second)/float64(m[1]), "lock-ops/s")
	b.ReportMetric(ratio[1], "rw/lock")
}

// BenchmarkRWUncontended: one goroutine, RLock+Unlock and WLock+Unlock
// cycles against Lock+Unlock, in 15 interleaved rounds; reported as median
// ns per cycle and the medians of the rounds' ratios to Lock (rlock/lock,
// wlock/lock).
func BenchmarkRWUncontended(b *testing.B) {
	const rounds = 15
	pool, ns := benchSetup(b)
	e, ctx := New(pool, WithNamespace(ns)), context.Background()
	cycle := func(take func(context.Context, string, LockOptions) (*Lock, error)) func(n int) (time.Duration, error) {
		return func(n int) (time.Duration, error) {
			start := time.Now()
			for i := 0; i < n; i++ {
				l, err := take(ctx, "un", LockOptions{})
				if err != nil {
					return 0, err
				}
				if err := l.Unlock(ctx); err != nil {
					return 0, err
				}
			}
			return time.Since(start), nil
		}
	}
	m, ratio := rwInterleave(b, rounds, max(b.N/rounds, 1), cycle(e.Lock), cycle(e.RLock), cycle(e.WLock))
	b.ReportMetric(float64(m[0]), "lock-ns/cycle")
	b.ReportMetric(float64(m[1]), "rlock-ns/cycle")
	b.ReportMetric(float64(m[2]), "wlock-ns/cycle")
	b.ReportMetric(ratio[1], "rlock/lock")
	b.ReportMetric(ratio[2], "wlock/lock")
}
