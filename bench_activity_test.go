package atomicredis

// Activity benchmarks: marks, batches and counts at the seed's scale
// against v2's one key a period (testdata/v2_active_*.lua).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func init() {
	targets = append(targets,
		target{"MarkActive: sharded time ÷ v2's one key", [2]string{"BenchmarkActivityMark/sharded", "ns/op"}, [2]string{"BenchmarkActivityMark/v2", "ns/op"}, "<=", 1.1},
		target{"MarkActive: sharded commands per mark", [2]string{"BenchmarkActivityMark/sharded", "cmds/op"}, [2]string{}, "<=", 1},
		target{"MarkActiveMany of 100,000 ids: round trips", [2]string{"BenchmarkActivityMarkMany/batch", "trips/batch"}, [2]string{}, "", 0},
		target{"a day of 10^8 ids: MB, sharded", [2]string{"BenchmarkActivitySeedDay/memory", "sharded-MB/day"}, [2]string{}, "<=", 13},
		target{"7 days of 10^8 ids: CountActive time ÷ v2's BITOP OR", [2]string{"BenchmarkActivitySeedDay/or", "ns/op"}, [2]string{"BenchmarkActivitySeedDay/v2-or", "ns/op"}, "<=", 1.2},
		target{"7 days of 10^8 ids: CountActiveAll time ÷ v2's BITOP AND", [2]string{"BenchmarkActivitySeedDay/and", "ns/op"}, [2]string{"BenchmarkActivitySeedDay/v2-and", "ns/op"}, "<=", 1.2},
		target{"7 days of 10^8 ids, cluster: CountActive ÷ v2 on one primary", [2]string{"BenchmarkActivitySeedDayCluster/or", "ns/op"}, [2]string{"BenchmarkActivitySeedDayCluster/v2-or", "ns/op"}, "<=", 1.2},
	)
}

// v2's bitmap scripts (one key per group and period), the baselines the
// sharded bitmaps are measured against: MarkActive's SETBIT, and
// CountActive's BITOP OR + BITCOUNT (and the same with AND).
var (
	activeV2Mark     = redis.NewScript(1, mustRead("testdata/v2_active_mark.lua"))
	activeV2CountOR  = redis.NewScript(-1, mustRead("testdata/v2_active_count.lua"))
	activeV2CountAND = redis.NewScript(-1, strings.ReplaceAll(mustRead("testdata/v2_active_count.lua"), "'OR'", "'AND'"))
)

// v2Key is v2's key for a group's bitmap for a period.
func (e *Engine) v2Key(group, period string) string { return e.group(group).key(":" + period) }

// group is an activity group's object, for its keys.
func (e *Engine) group(name string) object { return object{kind: kindActivity, name: name, ns: e.ns} }

// BenchmarkActivityMark: MarkActive in the steady state (the engine has
// indexed the shard) against v2's MarkActive (one SETBIT script on one key
// a period), ids below 2^20, in interleaved rounds; cmds/op counts the
// round trips.
func BenchmarkActivityMark(b *testing.B) {
	x := newExperiment(b)
	x.rounds = max(x.rounds, opRounds())
	e, ctx := x.env.engine(), context.Background()
	if err := e.MarkActive(ctx, "g", "d", 0); err != nil { // the shard's first mark indexes it
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	ids := make([]int64, 1024)
	for i := range ids {
		ids[i] = r.Int64N(1 << 20)
	}
	x.addOps("sharded", func(i int) error { return e.MarkActive(ctx, "g", "d", ids[i%len(ids)]) })
	x.addOps("v2", func(i int) error {
		_, err := e.eval(ctx, e.group("g"), activeV2Mark, e.v2Key("g", "d"), ids[i%len(ids)])
		return err
	})
	x.run()
}

// BenchmarkActivityMarkMany: MarkActiveMany of 100,000 random ids below
// 100 million (12 shards) into a fresh period each time, so that every
// batch indexes its shards: ms and round trips (commands sent) per batch.
// Not on miniredis, whose SETBIT copies the whole bitmap.
func BenchmarkActivityMarkMany(b *testing.B) {
	x := newExperiment(b)
	if benchMini {
		x.skip("batch", "miniredis copies a bitmap on every SETBIT: MarkActiveMany of 100,000 ids runs on redis-server")
		x.run()
		return
	}
	e, ctx := x.env.engine(), context.Background()
	r := rand.New(rand.NewPCG(100_000, 1))
	ids := make([]int64, 100_000)
	for i := range ids {
		ids[i] = r.Int64N(100_000_000)
	}
	x.add("batch", func(rd *round) error {
		sent := x.env.sent.Load()
		start := time.Now()
		if err := e.MarkActiveMany(ctx, "g", "batch"+strconv.Itoa(rd.i), ids...); err != nil {
			return err
		}
		rd.add("ms/batch", float64(time.Since(start).Microseconds())/1000)
		rd.add("trips/batch", float64(x.env.sent.Load()-sent))
		rd.did(1)
		return nil
	})
	x.run()
}

// seedDay is the seed's day: 100 million ids, a bitmap of 12.5 MB.
const seedDay = 100_000_000

// seedScale says whether the benchmarks at the seed's scale run
// (BENCH_SEED_SCALE=1), and skips b with the reason when they do not.
func seedScale(b *testing.B) {
	if os.Getenv("BENCH_SEED_SCALE") != "1" {
		msg := b.Name() + " skipped: the seed's scale (7 days of 100 million ids, about 180 MB on the server) runs with BENCH_SEED_SCALE=1"
		fmt.Println(msg)
		b.Skip(msg)
	}
}

// fillSeedDays writes days days of the seed's day for group: random bits
// (about half set) for ids 0 to 99,999,999. The sharded bitmaps are filled
// by MarkActiveMany of one id per shard (which indexes the shards, as real
// marks would) and then SETRANGE of each shard's bytes; v2's single keys
// (when v2Too) by SETRANGE of the same bytes. It returns MEMORY USAGE of
// one day: the shards plus the index, and v2's key.
func fillSeedDays(b *testing.B, e *Engine, admin func(cmd string, args ...any) (any, error), group string, days int, v2Too bool) (v3Bytes, v2Bytes int64) {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(days), 3))
	day := make([]byte, (seedDay+7)/8)
	shardBytes := activeShardIDs / 8
	for d := 0; d < days; d++ {
		for i := range day {
			day[i] = byte(r.Uint32())
		}
		period := "day" + strconv.Itoa(d)
		var firsts []int64
		for id := int64(0); id < seedDay; id += activeShardIDs {
			firsts = append(firsts, id)
		}
		if err := e.MarkActiveMany(ctx, group, period, firsts...); err != nil {
			b.Fatal(err)
		}
		for s := 0; s*shardBytes < len(day); s++ {
			part := day[s*shardBytes : min(len(day), (s+1)*shardBytes)]
			if _, err := admin("SETRANGE", e.group(group).shardKey(int64(s), ":"+period), 0, part); err != nil {
				b.Fatal(err)
			}
		}
		if v2Too {
			if _, err := admin("SETRANGE", e.v2Key(group, period), 0, day); err != nil {
				b.Fatal(err)
			}
		}
	}
	usage := func(key string) int64 {
		n, err := redis.Int64(admin("MEMORY", "USAGE", key, "SAMPLES", 0))
		if err != nil {
			b.Fatalf("MEMORY USAGE %s: %v", key, err)
		}
		return n
	}
	for s := int64(0); s*int64(shardBytes) < int64(len(day)); s++ {
		v3Bytes += usage(e.group(group).shardKey(s, ":day0"))
	}
	v3Bytes += usage(e.group(group).indexKey("day0"))
	if v2Too {
		v2Bytes = usage(e.v2Key(group, "day0"))
	}
	return v3Bytes, v2Bytes
}

// BenchmarkActivitySeedDay: the seed's 7 days of 100 million ids on one
// redis-server. MEMORY USAGE of a day (the seed: 12 MB), then CountActive
// (OR) and CountActiveAll (AND) over the 7 days against v2's count over
// one key a day (one BITOP + BITCOUNT script) with OR and with AND, in
// interleaved rounds. Opt-in: BENCH_SEED_SCALE=1.
func BenchmarkActivitySeedDay(b *testing.B) {
	seedScale(b)
	x := newExperiment(b)
	if benchMini {
		x.skip("or", "the seed's scale runs on redis-server")
		x.run()
		return
	}
	const days = 7
	e := x.env.engine()
	admin := func(cmd string, args ...any) (any, error) {
		c := x.env.pool.Get()
		defer c.Close()
		return c.Do(cmd, args...)
	}
	v3Bytes, v2Bytes := fillSeedDays(b, e, admin, "seed", days, true)
	x.add("memory", func(r *round) error {
		r.add("sharded-MB/day", float64(v3Bytes)/1e6)
		r.add("v2-MB/day", float64(v2Bytes)/1e6)
		return nil
	})
	seedCounts(b, x, e, "seed", days)
	x.run()
}

// seedCounts checks that CountActive and CountActiveAll over the group's
// days agree with v2's count over its single keys, then adds them and v2's
// to x as contenders.
func seedCounts(b *testing.B, x *experiment, e *Engine, group string, days int) {
	ctx := context.Background()
	var periods []string
	v2Keys := []any{days + 1, e.group(group).key("")}
	for d := 0; d < days; d++ {
		periods = append(periods, "day"+strconv.Itoa(d))
		v2Keys = append(v2Keys, e.v2Key(group, periods[d]))
	}
	for _, c := range []struct {
		name string
		v3   func(context.Context, string, ...string) (int64, error)
		v2   *redis.Script
	}{{"or", e.CountActive, activeV2CountOR}, {"and", e.CountActiveAll, activeV2CountAND}} {
		v3 := func() (int64, error) { return c.v3(ctx, group, periods...) }
		v2 := func() (int64, error) { return redis.Int64(e.eval(ctx, e.group(group), c.v2, v2Keys...)) }
		got, err := v3()
		want, err2 := v2()
		if err != nil || err2 != nil || got != want {
			b.Fatalf("%s: v3 counts %d (%v), v2 %d (%v)", c.name, got, err, want, err2)
		}
		x.addOps(c.name, func(int) error { _, err := v3(); return err })
		x.addOps("v2-"+c.name, func(int) error { _, err := v2(); return err })
	}
}

// BenchmarkActivitySeedDayCluster: the seed's 7 days on the multi-node
// cluster of REDIS_CLUSTER_ADDRS, through redisc: how a day's 12 shards
// spread over the primaries, then CountActive and CountActiveAll over the 7
// days against v2's count over one key a day (all on one primary), as
// BenchmarkActivitySeedDay. Opt-in: BENCH_SEED_SCALE=1.
func BenchmarkActivitySeedDayCluster(b *testing.B) {
	seedScale(b)
	seeds := testserver.ClusterSeeds()
	if len(seeds) == 0 {
		msg := b.Name() + " skipped: REDIS_CLUSTER_ADDRS not set"
		fmt.Println(msg)
		b.Skip(msg)
	}
	const days = 7
	s := testcluster.New(b, seeds)
	e := engine(s)
	fillSeedDays(b, e, s.Do, "seed", days, true)
	owners, err := testcluster.SlotOwners(testcluster.Of(s))
	if err != nil {
		b.Fatal(err)
	}
	spread := map[string]int{}
	for shard := int64(0); shard*activeShardIDs < seedDay; shard++ {
		spread[owners[keySlot(e.group("seed").shardKey(shard, ":day0"))]]++
	}
	var parts []string
	for addr, n := range spread {
		parts = append(parts, fmt.Sprintf("%s: %d", addr, n))
	}
	sort.Strings(parts)
	fmt.Printf("%s: a day's 12 shards by primary: %s; v2's keys all on %s\n", b.Name(), strings.Join(parts, ", "),
		owners[keySlot(e.v2Key("seed", "day0"))])
	x := newExperiment(b)
	x.rounds = max(x.rounds, opRounds())
	seedCounts(b, x, e, "seed", days)
	x.run()
}
