package atomicredis

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

// v3's activity bitmaps (one 1 MiB bitmap a shard of 8,388,096 ids from
// its first mark, an index of shards a period), kept as the baseline the
// benchmarks measure v4 against, as v2's scripts are: its scripts are in
// testdata/v3_bits_*.lua, and bits_mark and bits_merge, which v4 still
// runs on dense shards.
var (
	v3BitsIndex  = redis.NewScript(1, mustRead("testdata/v3_bits_index.lua"))
	v3BitsShards = redis.NewScript(-1, mustRead("testdata/v3_bits_shards.lua"))
	v3BitsCount  = redis.NewScript(-1, mustRead("testdata/v3_bits_count.lua"))
	v3BitsIs     = redis.NewScript(1, mustRead("testdata/v3_bits_is.lua"))
)

// v3 is a v3 engine's activity over e's connections.
type v3 struct{ e *Engine }

// shardKey is v3's <ns>bits:{<group>:<shard>}<suffix>.
func (v v3) shardKey(group string, shard int64, suffix string) string {
	return v.e.ns + "bits:{" + group + ":" + strconv.FormatInt(shard, 10) + "}" + suffix
}

// index puts shards in the period's index, as v3's first mark of a shard.
func (v v3) index(ctx context.Context, group, period string, shards ...int64) (int64, error) {
	args := []any{v.e.group(group).indexKey(period), v.e.activityTTL.Milliseconds()}
	for _, s := range shards {
		args = append(args, s)
	}
	return redis.Int64(v.e.eval(ctx, v.e.group(group), v3BitsIndex, args...))
}

// mark is v3's MarkActive in the steady state (the shard indexed and
// made): one bits_mark script, -1 for "indexed before".
func (v v3) mark(ctx context.Context, group, period string, id int64) error {
	_, err := v.e.eval(ctx, v.e.group(group), scriptBitsMark, v.shardKey(group, id/activeShardIDs, ":"+period), -1, id%activeShardIDs)
	return err
}

// isActive is v3's IsActive: GETBIT on the id's shard.
func (v v3) isActive(ctx context.Context, group, period string, id int64) (bool, error) {
	n, err := redis.Int64(v.e.eval(ctx, v.e.group(group), v3BitsIs, v.shardKey(group, id/activeShardIDs, ":"+period), id%activeShardIDs))
	return n == 1, err
}

// count is v3's CountActive (OR) or CountActiveAll (AND).
func (v v3) count(ctx context.Context, group, op string, periods ...string) (int64, error) {
	obj := v.e.group(group)
	args := []any{len(periods)}
	for _, p := range periods {
		args = append(args, obj.indexKey(p))
	}
	shards, err := redis.Int64s(v.e.eval(ctx, obj, v3BitsShards, append(args, op)...))
	if err != nil {
		return 0, err
	}
	var total atomic.Int64
	err = v.e.eachShard(ctx, obj, shards, func(ctx context.Context, s int64) error {
		args := []any{len(periods) + 1, v.shardKey(group, s, "")}
		for _, p := range periods {
			args = append(args, v.shardKey(group, s, ":"+p))
		}
		n, err := redis.Int64(v.e.eval(ctx, obj, v3BitsCount, append(args, op)...))
		total.Add(n)
		return err
	})
	return total.Load(), err
}
