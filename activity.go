package atomicredis

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Activity bitmaps: one bit per id per period, in shards of 1 MiB
// spread over a cluster; SETBIT, GETBIT, and BITOP OR or AND per shard

// MaxActiveID is the largest id a bitmap takes: any int64 >= 0 will do. Ids
// fall in shards of 8,388,096 consecutive ids, each a key of its own of 1
// MiB a period, so keep ids dense: each far-off id makes a shard of its
// own.
const MaxActiveID = 1<<63 - 1

// activeShardIDs is how many ids a shard holds: 2^23 - 512, so that a
// shard's 1,048,512 bytes and Redis's string header fill jemalloc's 1 MiB
// size class (2^23 ids would take the 1.25 MiB class). A shard is made
// whole at its first mark (a string that grows gets room for up to twice
// its length). A count's script per shard (BITOP over its periods,
// BITCOUNT) is short enough not to stall the server for others, and the
// hundred million ids of a busy day make 12 shards: enough to spread over a
// cluster's primaries, few enough that a count's round trips cost little
// beside its work. Shard and offset are computed here, not in Lua, whose
// numbers lose precision past 2^53.
const activeShardIDs = 1<<23 - 512

// activeIndexMemory bounds how many (group, period, shard) an engine
// remembers having put in their period's index; past it, each new one
// makes the engine forget another, whose next mark costs a round trip more.
const activeIndexMemory = 1 << 14

// activeParallel bounds how many shard scripts one count or MarkActiveMany
// runs at once.
const activeParallel = 8

// shardRef names one shard of a group's bitmap for one period.
type shardRef struct {
	group, period string
	shard         int64
}

// MarkActive marks id active in the group's bitmap for period (any bytes,
// such as "2026-11-21"): one round trip once the engine has indexed id's
// shard for the period. The first mark of a shard for a period puts the
// shard in the period's index first (one round trip more, to the group's
// slot).
func (e *Engine) MarkActive(ctx context.Context, group, period string, id int64) error {
	obj, err := e.activity(group, id)
	if err != nil {
		return err
	}
	return e.markShard(ctx, obj, period, id/activeShardIDs, []int64{id % activeShardIDs}, -1)
}

// MarkActiveMany marks every id active in the group's bitmap for period:
// one script per shard the ids fall in (at most 8 at once), after one that
// indexes the shards the engine has not indexed yet. A shard's ids go as a
// SETBIT each or, when there are many, as one run of bytes OR-ed in. Each
// shard's marks are atomic; if one shard's script fails the others' marks
// may stand (marking twice changes nothing: call again). A negative id
// fails the whole call before any I/O; with no ids it does nothing.
func (e *Engine) MarkActiveMany(ctx context.Context, group, period string, ids ...int64) error {
	obj, err := e.object(kindActivity, group)
	if err != nil {
		return err
	}
	if ctx == nil {
		return obj.err(errNilContext)
	}
	for _, id := range ids {
		if _, err := e.activity(group, id); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	offsets := map[int64][]int64{}
	isFresh := map[int64]bool{}
	var shards, fresh []int64
	for _, id := range ids {
		s := id / activeShardIDs
		if _, ok := offsets[s]; !ok {
			shards = append(shards, s)
			if !e.isIndexed(shardRef{group, period, s}) {
				fresh = append(fresh, s)
				isFresh[s] = true
			}
		}
		offsets[s] = append(offsets[s], id%activeShardIDs)
	}
	deadline := int64(-1)
	if len(fresh) > 0 {
		d, err := e.indexShards(ctx, obj, period, fresh...)
		if err != nil {
			return err
		}
		deadline = d
	}
	return e.eachShard(ctx, obj, shards, func(ctx context.Context, s int64) error {
		d := int64(-1)
		if isFresh[s] {
			d = deadline
		}
		return e.markShard(ctx, obj, period, s, offsets[s], d)
	})
}

// markShard sets bits at offsets in one shard of the group's bitmap for
// period. deadline is the period's as the index just gave it for this shard
// (0: none), or -1 if the caller did not index the shard: then the engine
// indexes it unless it remembers having done so. A remembered shard is
// marked but not created, so that one that is gone (its period ended, its
// index was lost) is indexed again before it is made anew.
func (e *Engine) markShard(ctx context.Context, obj object, period string, shard int64, offsets []int64, deadline int64) error {
	if deadline < 0 && !e.isIndexed(shardRef{obj.name, period, shard}) {
		d, err := e.indexShards(ctx, obj, period, shard)
		if err != nil {
			return err
		}
		deadline = d
	}
	script, args, at := shardMarks(obj, period, shard, offsets)
	args[at] = deadline
	n, err := redis.Int64(e.eval(ctx, obj, script, args...))
	if err != nil || n >= 0 {
		return err
	}
	if args[at], err = e.indexShards(ctx, obj, period, shard); err != nil {
		return err
	}
	_, err = e.eval(ctx, obj, script, args...)
	return err
}

// shardMarks is the script that sets offsets in one shard and its keys and
// arguments, the deadline's place among them left for the caller (at).
// Many offsets (64 or more, at least one in 8,192 bits of their span) go
// as one run of bytes OR-ed in with BITOP (bits_merge): a SETBIT costs the
// server about as much as a KiB of bytes to carry and OR. Others go as a
// SETBIT each (bits_mark).
func shardMarks(obj object, period string, shard int64, offsets []int64) (s *redis.Script, args []any, at int) {
	key := obj.shardKey(shard, ":"+period)
	lo, hi := slices.Min(offsets)/8, slices.Max(offsets)/8
	if len(offsets) >= 64 && hi-lo+1 <= 1024*int64(len(offsets)) {
		run := make([]byte, hi-lo+1)
		for _, o := range offsets {
			run[o/8-lo] |= 0x80 >> (o % 8) // SETBIT's order: bit 0 is the first byte's highest
		}
		return scriptBitsMerge, []any{key, obj.shardKey(shard, ""), nil, lo, run}, 2
	}
	args = make([]any, 0, 2+len(offsets))
	args = append(args, key, nil)
	for _, o := range offsets {
		args = append(args, o)
	}
	return scriptBitsMark, args, 1
}

// indexShards puts shards in the group's index for period and returns the
// period's deadline (ms since the epoch by the server's clock, 0 for none),
// which the period's first mark fixed.
func (e *Engine) indexShards(ctx context.Context, obj object, period string, shards ...int64) (int64, error) {
	args := make([]any, 0, 2+len(shards))
	args = append(args, obj.indexKey(period), e.activityTTL.Milliseconds())
	for _, s := range shards {
		args = append(args, s)
	}
	deadline, err := redis.Int64(e.eval(ctx, obj, scriptBitsIndex, args...))
	if err != nil {
		return 0, err
	}
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	if e.indexed == nil {
		e.indexed = map[shardRef]struct{}{}
	}
	for _, s := range shards {
		if len(e.indexed) >= activeIndexMemory {
			for old := range e.indexed { // an arbitrary one: map order is random
				delete(e.indexed, old)
				break
			}
		}
		e.indexed[shardRef{obj.name, period, s}] = struct{}{}
	}
	return deadline, nil
}

func (e *Engine) isIndexed(r shardRef) bool {
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	_, ok := e.indexed[r]
	return ok
}

// shardKey builds <ns>bits:{<group>:<shard>}<suffix> for an activity
// group. The shard number after the tag's last colon keeps the tag
// unambiguous whatever colons the group holds, and the key word keeps it
// apart from the period's index.
func (o object) shardKey(shard int64, suffix string) string {
	return o.ns + "bits:{" + o.name + ":" + strconv.FormatInt(shard, 10) + "}" + suffix
}

// indexKey builds <ns>bitindex:{<group>}:<period>, the shards an activity
// group's period has used.
func (o object) indexKey(period string) string {
	return o.ns + "bitindex:{" + o.name + "}:" + period
}

// IsActive reports whether id was marked active in the group for period:
// one round trip (GETBIT on id's shard).
func (e *Engine) IsActive(ctx context.Context, group, period string, id int64) (bool, error) {
	obj, err := e.activity(group, id)
	if err != nil {
		return false, err
	}
	n, err := redis.Int64(e.eval(ctx, obj, scriptBitsIs, obj.shardKey(id/activeShardIDs, ":"+period), id%activeShardIDs))
	return n == 1, err
}

// CountActive returns how many ids were active in at least one of the
// periods. It reads the periods' indexes (one round trip), then counts each
// shard used in any of them with BITOP OR and BITCOUNT on the server (one
// script a shard, at most 8 at once, in parallel across a cluster's nodes)
// and adds up. Each shard is counted atomically; marks made during the
// count may or may not be in it. At least one period is required.
func (e *Engine) CountActive(ctx context.Context, group string, periods ...string) (int64, error) {
	return e.countActive(ctx, group, "OR", periods)
}

// CountActiveAll returns how many ids were active in every one of the
// periods (BITOP AND: retention). As CountActive, but it counts only the
// shards that every period used.
func (e *Engine) CountActiveAll(ctx context.Context, group string, periods ...string) (int64, error) {
	return e.countActive(ctx, group, "AND", periods)
}

func (e *Engine) countActive(ctx context.Context, group, op string, periods []string) (int64, error) {
	obj, err := e.object(kindActivity, group)
	if err != nil {
		return 0, err
	}
	if len(periods) == 0 {
		return 0, obj.errorf("no periods: %w", ErrInvalid)
	}
	var distinct []string // a period named twice changes neither OR nor AND
	seen := make(map[string]bool, len(periods))
	for _, p := range periods {
		if !seen[p] {
			seen[p] = true
			distinct = append(distinct, p)
		}
	}
	args := make([]any, 0, len(distinct)+2)
	args = append(args, len(distinct))
	for _, p := range distinct {
		args = append(args, obj.indexKey(p))
	}
	shards, err := redis.Int64s(e.eval(ctx, obj, scriptBitsShards, append(args, op)...))
	if err != nil {
		return 0, err
	}
	var total atomic.Int64
	err = e.eachShard(ctx, obj, shards, func(ctx context.Context, s int64) error {
		args := make([]any, 0, len(distinct)+3)
		args = append(args, len(distinct)+1, obj.shardKey(s, "")) // the scratch key: no ':' after the tag
		for _, p := range distinct {
			args = append(args, obj.shardKey(s, ":"+p))
		}
		n, err := redis.Int64(e.eval(ctx, obj, scriptBitsCount, append(args, op)...))
		total.Add(n)
		return err
	})
	if err != nil {
		return 0, err
	}
	return total.Load(), nil
}

// eachShard runs f for every shard, up to activeParallel at once (fewer on
// a *redis.Pool whose MaxActive is small, so that one call cannot exhaust
// it), and returns the first error, which ends the other calls' contexts.
func (e *Engine) eachShard(ctx context.Context, obj object, shards []int64, f func(context.Context, int64) error) error {
	if len(shards) == 1 {
		return f(ctx, shards[0])
	}
	limit := activeParallel
	if p, ok := e.pool.(*redis.Pool); ok && p.MaxActive > 0 {
		limit = max(1, min(limit, p.MaxActive/2))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	slots := make(chan struct{}, limit)
	for i, s := range shards {
		slots <- struct{}{}
		if err := ctx.Err(); err != nil {
			once.Do(func() {
				first = obj.errorf("%d of %d shards not run: %w", len(shards)-i, len(shards), err)
			})
			break
		}
		wg.Add(1)
		go func(s int64) {
			defer func() { <-slots; wg.Done() }()
			if err := f(ctx, s); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(s)
	}
	wg.Wait()
	return first
}

// activity checks a group's name and an id.
func (e *Engine) activity(group string, id int64) (object, error) {
	obj, err := e.object(kindActivity, group)
	if err == nil && id < 0 {
		err = obj.errorf("id %d: must be at least 0: %w", id, ErrInvalid)
	}
	return obj, err
}
