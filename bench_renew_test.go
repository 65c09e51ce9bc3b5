package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// The renewal's rows in the verdict table (printVerdicts): one goroutine
// and a few round trips renew thousands of watchdog holdings, for less
// server time each than one call per holding.
func init() {
	b := func(side, unit string) [2]string { return [2]string{"BenchmarkRenew/" + side, unit} }
	targets = append(targets,
		bench.Row("10k watchdog locks: goroutines the engine adds", b("batched", "goroutines"), [2]string{}, "<=", 10),
		bench.Row("10k watchdog locks: goroutines, one watchdog each (before v4)", b("per-holding", "goroutines"), [2]string{}, "", 0),
		bench.Row("10k watchdog locks: round trips per renewal period, % of holdings", b("batched", "rt/period%"), [2]string{}, "<=", 1),
		bench.Row("10k watchdog locks: server CPU per extension, batched ÷ one call each", b("batched", "cpu-us/ext"), b("per-holding", "cpu-us/ext"), "<=", 0.5),
		bench.Row("10k watchdog locks: script time per extension, batched ÷ one call each", b("batched", "srv-us/ext"), b("per-holding", "srv-us/ext"), "<=", 0.5),
		bench.Row("10k watchdog locks: server time per batch script (µs)", b("batched", "us/script"), [2]string{}, "<=", 1000),
		bench.Row("10k watchdog locks, 3+3 cluster: round trips per period per 1,000 holdings per node", b("cluster", "rt/period/1k/node"), [2]string{}, "<=", 3),
	)
}

// renewTTL is the benchmark's lease: a renewal period is a third of it.
const renewTTL = 3 * time.Second

// BenchmarkRenew: 10,000 watchdog locks (1,000 on miniredis), TTL 3 s, on
// one engine, held for four renewal periods; the last two are measured.
// batched: this engine's renewer. per-holding: what v3 did, in this run
// (a goroutine per lock calling the one-lock extend script every TTL/3,
// as the old watchdog did, on the same engine and server). cluster: the
// renewer on the 3+3 cluster of REDIS_CLUSTER_ADDRS (round trips only).
// goroutines: what the holdings added to the process; rt/period%: round
// trips (connections taken from the pool: one per pipeline) per renewal
// period, in % of the holdings; srv-us/ext and cpu-us/ext: the server's
// time in the extend scripts (INFO commandstats) and its CPU (INFO cpu) per
// lock extended (one SET each, in both scripts); us/script: the server's
// time per batch script.
func BenchmarkRenew(b *testing.B) {
	x := newExperiment(b)
	n := 10000
	if benchMini {
		n = 1000
	}
	pool := &countingPool{Pool: x.env.Pool}
	pool.MaxIdle = 1024 // the per-holding side has up to thousands of extensions in flight
	x.Add("batched", func(r *bench.Round) error {
		return renewRound(r, New(pool, WithNamespace(x.env.ns)), pool.gets.Load, x.env.Read, n, 1, true)
	})
	x.Add("per-holding", func(r *bench.Round) error {
		return renewRound(r, New(pool, WithNamespace(x.env.ns)), pool.gets.Load, x.env.Read, n, 1, false)
	})
	if seeds := testserver.ClusterSeeds(); len(seeds) == 0 || benchMini {
		x.Skip("cluster", "REDIS_CLUSTER_ADDRS not set, or miniredis")
	} else {
		cp := &countingCluster{Pool: testcluster.Pool{Cluster: benchCluster(b, seeds)}}
		primaries, err := testcluster.Primaries(cp.Pool.Cluster)
		if err != nil {
			bench.Check(b, err)
		}
		ns := testNamespace()
		b.Cleanup(func() {
			for _, addr := range primaries {
				if c, err := redis.Dial("tcp", addr); err == nil {
					for cursor := 0; ; {
						v, err := redis.Values(c.Do("SCAN", cursor, "MATCH", ns+"*", "COUNT", 10000))
						if err != nil {
							break
						}
						cursor, _ = redis.Int(v[0], nil)
						if ks, _ := redis.Values(v[1], nil); len(ks) > 0 {
							c.Do("UNLINK", ks...)
						}
						if cursor == 0 {
							break
						}
					}
					c.Close()
				}
			}
		})
		x.Add("cluster", func(r *bench.Round) error {
			return renewRound(r, New(cp, WithNamespace(ns)), cp.gets.Load, nil, n, len(primaries), true)
		})
	}
	x.Rounds = 3
	x.Run()
}

// countingCluster counts the connections a cluster pool hands out.
type countingCluster struct {
	testcluster.Pool
	gets atomic.Int64
}

func (p *countingCluster) GetContext(ctx context.Context) (redis.Conn, error) {
	p.gets.Add(1)
	return p.Pool.GetContext(ctx)
}

// renewRound takes n locks on e (with the watchdog if batched, else each
// with a goroutine extending it as the old watchdog did), waits two
// renewal periods, measures two, and releases them. read, if not nil,
// reads the server's counts; gets counts round trips; nodes divides them.
func renewRound(r *bench.Round, e *Engine, gets func() int64, read func() (bench.ServerCounts, error), n, nodes int, batched bool) error {
	ctx := context.Background()
	defer e.Close(ctx)
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	var failed atomic.Int64
	// v3's watchdog: a goroutine per lock from its grant on, an extension
	// every TTL/3.
	watch := func(h *holding) {
		defer watchers.Done()
		t := time.NewTicker(renewTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			h.mu.Lock()
			seq := h.e.renew.extensions.Add(1)
			h.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, renewTTL)
			sent := time.Now()
			held, err := h.extendLease(cctx, renewTTL, seq)
			cancel()
			if err != nil || !held {
				failed.Add(1) // late (the machine too busy for 10,000 goroutines) or failed
				continue
			}
			h.extendedAt(sent)
		}
	}
	locks := make([]*Lock, n)
	if err := each(n, func(i int) (err error) {
		locks[i], err = e.TryLock(ctx, fmt.Sprint("renew", i), LockOptions{TTL: renewTTL, Watchdog: batched})
		if err == nil && !batched {
			watchers.Add(1)
			go watch(&locks[i].holding)
		}
		return err
	}); err != nil {
		return err
	}
	time.Sleep(2 * renewTTL / 3) // the first renewals, which merge batches
	added := runtime.NumGoroutine() - before
	const periods = 2
	var s1, s2 bench.ServerCounts
	var err error
	if read != nil {
		if s1, err = read(); err != nil {
			return err
		}
	}
	g1 := gets()
	time.Sleep(periods * renewTTL / 3)
	g2 := gets()
	if read != nil {
		if s2, err = read(); err != nil {
			return err
		}
	}
	close(stop)
	watchers.Wait()
	lost := 0
	for _, l := range locks {
		select {
		case <-l.Lost():
			lost++
		default:
		}
	}
	if err := each(n, func(i int) error {
		if err := locks[i].Unlock(ctx); err != nil && (batched || !errors.Is(err, ErrNotHeld)) {
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	if lost > 0 {
		return fmt.Errorf("%d of %d watchdog locks lost", lost, n)
	}
	// The old watchdog's extensions that found their lock gone: it ran out
	// before a late one (on a machine too busy for n goroutines).
	r.Add("late-ext", float64(failed.Load()))
	r.Did(n)
	r.Add("goroutines", float64(added))
	rts := float64(g2 - g1)
	r.Add("rt/period%", 100*rts/periods/float64(n))
	r.Add("rt/period/1k/node", rts/periods/float64(nodes)/(float64(n)/float64(nodes)/1000))
	if read != nil && !benchMini {
		exts := s2.Calls["set"] - s1.Calls["set"]
		if exts == 0 {
			return bench.NotMeasurable("no extension in the measured periods")
		}
		script := s2.Usec["evalsha"] - s1.Usec["evalsha"]
		r.Add("exts/period", exts/periods)
		r.Add("srv-us/ext", script/exts)
		r.Add("cpu-us/ext", (s2.CPU-s1.CPU)*1e6/exts)
		if calls := s2.Calls["evalsha"] - s1.Calls["evalsha"]; calls > 0 {
			r.Add("us/script", script/calls)
		}
	}
	return nil
}

// each calls f for 0 ≤ i < n on 32 goroutines, and returns the first
// error.
func each(n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for c := 0; c < 32; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
