package atomicredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// The cluster's rows in the verdict table (printVerdicts): the same one
// round trip on a cluster as on one node, and no redirect in steady state.
func init() {
	row := func(what, op, num, den, unit, cmp string, want float64) bench.Target {
		return bench.Row(what, [2]string{"BenchmarkCluster/" + op + "/" + num, unit}, [2]string{"BenchmarkCluster/" + op + "/" + den, unit}, cmp, want)
	}
	targets = append(targets,
		row("lock cycle p50: cluster (redisc) ÷ its primary direct", "lock", "cluster", "single", "p50-ns", "<=", 1.1),
		row("lock cycle mean: cluster (redisc) ÷ its primary direct", "lock", "cluster", "single", "ns/op", "", 0),
		row("lock cycle mean: cluster ÷ standalone server", "lock", "cluster", "standalone", "ns/op", "", 0),
		row("Suggest 1k p50: cluster (redisc) ÷ its primary direct", "suggest", "cluster", "single", "p50-ns", "<=", 1.1),
		row("Suggest 1k mean: cluster (redisc) ÷ its primary direct", "suggest", "cluster", "single", "ns/op", "", 0),
		row("Suggest 1k mean: cluster ÷ standalone server", "suggest", "cluster", "standalone", "ns/op", "", 0),
		bench.Row("cluster lock cycle: MOVED per 1,000 operations", [2]string{"BenchmarkCluster/lock/cluster", "moved/1k-ops"}, [2]string{}, "<=", 0),
		bench.Row("cluster Suggest: MOVED per 1,000 operations", [2]string{"BenchmarkCluster/suggest/cluster", "moved/1k-ops"}, [2]string{}, "<=", 0),
	)
}

// BenchmarkCluster: one client, a lock cycle (TryLock + Unlock, two
// scripts) and Suggest (1k members, a 2-letter prefix, limit 10), on 30
// names of one primary's slots of the cluster of REDIS_CLUSTER_ADDRS:
// through redisc (cluster), and through a plain pool to that primary
// (single: the same server, scripts and replication), in interleaved
// rounds; and on the bench server, a standalone redis-server without
// replica (standalone, reported only). One experiment per operation.
// moved/1k-ops counts the MOVED replies all primaries sent meanwhile (INFO
// errorstats); conns/call the connections the engine took per script call
// (a followed MOVED would take another); srv-us/op and cpu-us/op are the
// primary's (the standalone server's).
func BenchmarkCluster(b *testing.B) {
	seeds := testserver.ClusterSeeds()
	if len(seeds) == 0 {
		bench.Skip(b, "REDIS_CLUSTER_ADDRS not set: no cluster to compare with")
	}
	if benchMini {
		bench.Skip(b, "the single-node side needs redis-server, not miniredis")
	}
	// 30 names served by one primary: the single side dials it directly.
	rc := benchCluster(b, seeds)
	owners, err := testcluster.SlotOwners(rc)
	if err != nil {
		bench.Check(b, err)
	}
	primaries, err := testcluster.Primaries(rc)
	if err != nil {
		bench.Check(b, err)
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
		name   string
		server string                                          // its server, for INFO
		pool   func(b *testing.B) (Pool, string, func() int64) // pool, namespace, MOVED count
	}
	sides := []side{
		// The same primary, the same scripts and replication, through a
		// plain *redis.Pool: what the cluster side costs beyond it is
		// redisc's and the binding's.
		{"single", node, func(b *testing.B) (Pool, string, func() int64) {
			pool := bench.Limit(newPool(b, node))
			pool.MaxIdle = 128
			ns := testNamespace()
			clean(b, ns)
			return pool, ns, func() int64 { return 0 }
		}},
		{"cluster", node, func(b *testing.B) (Pool, string, func() int64) {
			ns := testNamespace()
			clean(b, ns)
			return testcluster.Pool{Cluster: benchCluster(b, seeds)}, ns, func() int64 { return movedReplies(b, primaries) }
		}},
		// The bench server (no cluster, no replica), for reference.
		{"standalone", benchAddr, func(b *testing.B) (Pool, string, func() int64) {
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
					bench.Check(b, err)
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
		x := newExperiment(b)
		x.Rounds = max(x.Rounds, opRounds())
		x.Show = []string{"ns/op", "p50-ns", "srv-us/op", "cpu-us/op"}
		for _, sd := range sides {
			pool, ns, moved := sd.pool(b)
			gets := &countingGets{Pool: pool}
			e := New(gets, WithNamespace(ns))
			op.setup(b, e)
			for _, n := range names { // warm: the scripts loaded
				if err := op.run(e, n, members[0][:2]); err != nil {
					bench.Check(b, err)
				}
			}
			admin, err := redis.Dial("tcp", sd.server)
			if err != nil {
				bench.Check(b, err)
			}
			b.Cleanup(func() { admin.Close() })
			x.Add(op.name+"/"+sd.name, func(r *bench.Round) error {
				moved0, gets0 := moved(), gets.n.Load()
				s1, err := bench.ReadServer(admin, 0)
				if err != nil {
					return err
				}
				var took []time.Duration
				for start, i := time.Now(), 0; r.Budget.More(i, start); i++ {
					name, prefix := names[i%len(names)], members[(r.Index*7919+i)%len(members)][:2]
					t0 := time.Now()
					if err := op.run(e, name, prefix); err != nil {
						return err
					}
					took = append(took, time.Since(t0))
				}
				s2, err := bench.ReadServer(admin, 0)
				if err != nil {
					return err
				}
				n := float64(len(took))
				var sum time.Duration
				for _, d := range took {
					sum += d
				}
				r.Did(len(took))
				u := s1.To(s2)
				r.Add("ns/op", float64(sum.Nanoseconds())/n)
				r.Add("p50-ns", percentile(took, 0.5)*1e6)
				r.Add("conns/call", float64(gets.n.Load()-gets0)/(n*float64(op.calls)))
				r.Add("srv-us/op", u.Usec/n)
				r.Add("cpu-us/op", u.CPU*1e6/n)
				if sd.name == "cluster" {
					r.Add("moved/1k-ops", float64(moved()-moved0)*1000/n)
				}
				return nil
			})
		}
		x.Run()
	}
}

// movedReplies sums the MOVED errors the primaries have replied.
func movedReplies(b *testing.B, primaries []string) int64 {
	n, err := testcluster.MovedReplies(primaries)
	if err != nil {
		bench.Check(b, err)
	}
	return n
}

// benchCluster is a redisc client of the cluster at seeds, as
// testcluster.Client, whose pool of each node is bounded
// (bench.PoolLimit: callers wait for a connection) and closed when b ends.
func benchCluster(b *testing.B, seeds []string) *redisc.Cluster {
	b.Helper()
	c := &redisc.Cluster{
		StartupNodes: seeds,
		DialOptions:  []redis.DialOption{redis.DialConnectTimeout(time.Second)},
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			return bench.Limit(&redis.Pool{
				MaxIdle:     64,
				IdleTimeout: time.Minute,
				Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr, opts...) },
			}), nil
		},
	}
	if err := c.Refresh(); err != nil {
		bench.Check(b, fmt.Errorf("cluster at %v: %w", seeds, err))
	}
	b.Cleanup(func() { c.Close() })
	return c
}
