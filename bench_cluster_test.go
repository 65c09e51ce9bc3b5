package atomicredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// The cluster's rows in the verdict table (printVerdicts): the same one
// round trip on a cluster as on one node, and no redirect in steady state.
func init() {
	targets = append(targets,
		target{"lock cycle p50: cluster (redisc) ÷ its primary direct", [2]string{"BenchmarkCluster/lock", "cluster-p50-ns"}, [2]string{"BenchmarkCluster/lock", "single-p50-ns"}, "<=", 1.1},
		target{"lock cycle mean: cluster (redisc) ÷ its primary direct", [2]string{"BenchmarkCluster/lock", "cluster-ns/op"}, [2]string{"BenchmarkCluster/lock", "single-ns/op"}, "", 0},
		target{"lock cycle mean: cluster ÷ standalone server", [2]string{"BenchmarkCluster/lock", "cluster-ns/op"}, [2]string{"BenchmarkCluster/lock", "standalone-ns/op"}, "", 0},
		target{"Suggest 1k p50: cluster (redisc) ÷ its primary direct", [2]string{"BenchmarkCluster/suggest", "cluster-p50-ns"}, [2]string{"BenchmarkCluster/suggest", "single-p50-ns"}, "<=", 1.1},
		target{"Suggest 1k mean: cluster (redisc) ÷ its primary direct", [2]string{"BenchmarkCluster/suggest", "cluster-ns/op"}, [2]string{"BenchmarkCluster/suggest", "single-ns/op"}, "", 0},
		target{"Suggest 1k mean: cluster ÷ standalone server", [2]string{"BenchmarkCluster/suggest", "cluster-ns/op"}, [2]string{"BenchmarkCluster/suggest", "standalone-ns/op"}, "", 0},
		target{"cluster lock cycle: MOVED per 1,000 operations", [2]string{"BenchmarkCluster/lock", "moved/1k-ops"}, [2]string{}, "<=", 0},
		target{"cluster Suggest: MOVED per 1,000 operations", [2]string{"BenchmarkCluster/suggest", "moved/1k-ops"}, [2]string{}, "<=", 0},
	)
}

// BenchmarkCluster: one client, a lock cycle (TryLock + Unlock, two
// scripts) and Suggest (1k members, a 2-letter prefix, limit 10), on 30
// names of one primary's slots of the cluster of REDIS_CLUSTER_ADDRS:
// through redisc (cluster), and through a plain pool to that primary
// (single: the same server, scripts and replication), taking turns in one
// run; and on the bench server, a standalone redis-server without replica
// (standalone, reported only). moved/1k-ops counts the MOVED replies all
// primaries sent meanwhile (INFO errorstats); conns/call the connections
// the engine took per script call (a followed MOVED would take another).
func BenchmarkCluster(b *testing.B) {
	seeds := clusterSeeds()
	if len(seeds) == 0 {
		b.Skip("REDIS_CLUSTER_ADDRS not set: no cluster to compare with")
	}
	if benchMini {
		b.Skip("the single-node side needs redis-server, not miniredis")
	}
	// 30 names served by one primary: the single side dials it directly.
	rc := newRedisc(b, seeds)
	owners, err := slotOwners(rc)
	if err != nil {
		b.Fatal(err)
	}
	primaries, err := clusterPrimaries(rc)
	if err != nil {
		b.Fatal(err)
	}
	node := owners[keySlot("bench0")]
	var names []string
	for i := 0; len(names) < 30; i++ {
		if n := fmt.Sprint("bench", i); owners[keySlot(n)] == node {
			names = append(names, n)
		}
	}
	clean := func(b *testing.B, ns string) {
		b.Cleanup(func() {
			for _, addr := range primaries {
				if c, err := redis.Dial("tcp", addr); err == nil {
					ks, _ := redis.Strings(c.Do("KEYS", ns+"*"))
					for _, k := range ks {
						c.Do("DEL", k)
					}
					c.Close()
				}
			}
		})
	}
	members := make([]string, 1000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range members {
		var sb strings.Builder
		for l := 6 + r.IntN(5); l > 0; l-- {
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
		members[i] = sb.String()
	}
	type side struct {
		name string
		pool func(b *testing.B) (Pool, string, func() int64) // pool, namespace, MOVED count
	}
	sides := []side{
		// The same primary, the same scripts and replication, through a
		// plain *redis.Pool: what the cluster side costs beyond it is
		// redisc's and the binding's.
		{"single", func(b *testing.B) (Pool, string, func() int64) {
			pool := newPool(b, node)
			pool.MaxIdle = 128
			ns := testNamespace()
			clean(b, ns)
			return pool, ns, func() int64 { return 0 }
		}},
		{"cluster", func(b *testing.B) (Pool, string, func() int64) {
			ns := testNamespace()
			clean(b, ns)
			return rediscPool{newRedisc(b, seeds)}, ns, func() int64 { return movedReplies(b, primaries) }
		}},
		// The bench server (no cluster, no replica), for reference.
		{"standalone", func(b *testing.B) (Pool, string, func() int64) {
			pool, ns := benchSetup(b)
			return pool, ns, func() int64 { return 0 }
		}},
	}
	ops := []struct {
		name  string
		calls int
		setup func(b *testing.B, e *Engine)
		run   func(e *Engine, name, prefix string) error
	}{
		{"lock", 2, func(*testing.B, *Engine) {}, func(e *Engine, name, _ string) error {
			l, err := e.TryLock(context.Background(), name, LockOptions{})
			if err != nil {
				return err
			}
			return l.Unlock(context.Background())
		}},
		{"suggest", 1, func(b *testing.B, e *Engine) {
			for _, n := range names {
				if err := e.AddMembers(context.Background(), n, members...); err != nil {
					b.Fatal(err)
				}
			}
		}, func(e *Engine, name, prefix string) error {
			got, err := e.Suggest(context.Background(), name, prefix, 10)
			if err == nil && len(got) == 0 {
				err = fmt.Errorf("no match for %q", prefix)
			}
			return err
		}},
	}
	for _, op := range ops {
		// The sides take turns, operation by operation (in a rotating
		// order), so that a busy machine slows them alike.
		b.Run(op.name, func(b *testing.B) {
			type run struct {
				e     *Engine
				gets  *countingGets
				moved func() int64
				took  []time.Duration
			}
			runs := make([]*run, len(sides))
			for i, sd := range sides {
				pool, ns, moved := sd.pool(b)
				gets := &countingGets{Pool: pool}
				runs[i] = &run{e: New(gets, WithNamespace(ns)), gets: gets, moved: moved, took: make([]time.Duration, 0, b.N)}
				op.setup(b, runs[i].e)
				for _, n := range names { // warm: the scripts loaded
					if err := op.run(runs[i].e, n, members[0][:2]); err != nil {
						b.Fatal(err)
					}
				}
			}
			before := make([]int64, len(runs))
			for i, r := range runs {
				before[i] = r.moved()
				r.gets.n.Store(0)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name, prefix := names[i%len(names)], members[i%len(members)][:2]
				for j := range runs {
					r := runs[(i+j)%len(runs)]
					start := time.Now()
					if err := op.run(r.e, name, prefix); err != nil {
						b.Fatal(err)
					}
					r.took = append(r.took, time.Since(start))
				}
			}
			b.StopTimer()
			for i, sd := range sides {
				r := runs[i]
				var sum time.Duration
				for _, d := range r.took {
					sum += d
				}
				sort.Slice(r.took, func(a, b int) bool { return r.took[a] < r.took[b] })
				reportMetric(b, float64(sum.Nanoseconds())/float64(b.N), sd.name+"-ns/op")
				reportMetric(b, float64(r.took[len(r.took)/2].Nanoseconds()), sd.name+"-p50-ns")
				reportMetric(b, float64(r.gets.n.Load())/float64(b.N*op.calls), sd.name+"-conns/call")
				if sd.name == "cluster" {
					reportMetric(b, float64(r.moved()-before[i])*1000/float64(b.N), "moved/1k-ops")
				}
			}
		})
	}
}

// movedReplies sums the MOVED errors the primaries have replied
// (INFO errorstats, Redis 6.2+).
func movedReplies(b *testing.B, primaries []string) int64 {
	var n int64
	for _, addr := range primaries {
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		info, err := redis.String(c.Do("INFO", "errorstats"))
		c.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range splitLines(info) {
			if v, ok := strings.CutPrefix(line, "errorstat_MOVED:count="); ok {
				var k int64
				fmt.Sscan(v, &k)
				n += k
			}
		}
	}
	return n
}
