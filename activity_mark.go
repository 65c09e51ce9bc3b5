package atomicredis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Marks: MarkActive and MarkActiveMany, in scripts of a bounded size, and
// what a failed batch says (docs/activity.md)

// MarkActive marks id active in the group for period (any bytes, such as
// "2026-11-21"): one round trip (one script on id's partition). The first
// mark of a partition in a period by this engine puts the partition in the
// period's index first (one round trip more, to the group's slot).
func (e *Engine) MarkActive(ctx context.Context, group, period string, id int64) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectActivityGroup, group, "MarkActive"}, func(ctx context.Context) error { return e.markActive(ctx, group, period, id) })
	}
	return e.markActive(ctx, group, period, id)
}

// markActive is MarkActive.
func (e *Engine) markActive(ctx context.Context, group, period string, id int64) error {
	obj, err := e.activity(group, id)
	if err == nil {
		err = obj.period(period)
	}
	if err != nil {
		return err
	}
	pl := placeOf(id)
	if ref := (shardRef{group, period, pl.shard, refDense, 0}); e.remembers(ref) {
		key := leafKey(obj.partPrefix(pl.part()), nodeOf(pl.h, 41), period)
		n, err := redis.Int64(e.eval(ctx, obj, scriptBitsMark, key, -1, pl.offset))
		if err != nil || n >= 0 {
			return err
		}
		e.forget(ref) // the bitmap is gone: its period ended
	}
	_, err = e.markPart(ctx, obj, period, pl.part(), []place{pl}, -1)
	return err
}

// MarkActiveMany marks every id active in the group for period. If it
// fails part way, some marks may stand: the error then holds a *MarkError
// (errors.As) that says how many of the ids are marked for certain, and
// calling again with the same ids marks the rest (marking twice changes
// nothing). A negative id fails the whole call before any I/O; with no ids
// it does nothing. Its cost: "Activity" in the package doc.
func (e *Engine) MarkActiveMany(ctx context.Context, group, period string, ids ...int64) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectActivityGroup, group, "MarkActiveMany"}, func(ctx context.Context) error { return e.markActiveMany(ctx, group, period, ids...) })
	}
	return e.markActiveMany(ctx, group, period, ids...)
}

// markActiveMany is MarkActiveMany.
func (e *Engine) markActiveMany(ctx context.Context, group, period string, ids ...int64) error {
	obj, err := e.object(kindActivity, group)
	if err != nil {
		return err
	}
	if ctx == nil {
		return obj.err(errNilContext)
	}
	if err := obj.period(period); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := e.activity(group, id); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	parts := map[int64][]place{}
	dense := map[int64][]place{}
	var jobs, fresh []int64 // jobs: a partition p as -1-p, a dense shard as itself
	for _, id := range ids {
		pl := placeOf(id)
		if e.remembers(shardRef{group, period, pl.shard, refDense, 0}) {
			if dense[pl.shard] == nil {
				jobs = append(jobs, pl.shard)
			}
			dense[pl.shard] = append(dense[pl.shard], pl)
			continue
		}
		p := int64(pl.part())
		if parts[p] == nil {
			jobs = append(jobs, -1-p)
			if !e.remembers(shardRef{group, period, p, refIndexed, 0}) {
				fresh = append(fresh, p)
			}
		}
		parts[p] = append(parts[p], pl)
	}
	for _, places := range parts { // the script tries each id's leaf in the id before's first
		slices.SortFunc(places, func(a, b place) int { return cmp.Compare(a.h, b.h) })
	}
	var marked atomic.Int64
	deadline := int64(-1)
	if len(fresh) > 0 {
		if deadline, err = e.indexParts(ctx, obj, period, fresh...); err != nil {
			return markErr(obj, 0, len(ids), err)
		}
	}
	err = e.eachShard(ctx, obj, jobs, func(ctx context.Context, j int64) error {
		var n int
		var err error
		if j < 0 {
			p := -1 - j
			d := int64(-1)
			if slices.Contains(fresh, p) {
				d = deadline
			}
			n, err = e.markPart(ctx, obj, period, int(p), parts[p], d)
		} else {
			n, err = e.markDense(ctx, obj, period, dense[j])
		}
		marked.Add(int64(n))
		return err
	})
	if err != nil {
		return markErr(obj, int(marked.Load()), len(ids), err)
	}
	return nil
}

// markErr is MarkActiveMany's error when marked of its of ids are marked
// for certain: err, within a *MarkError that the object's *Error holds.
func markErr(obj object, marked, of int, err error) error {
	var oe *Error
	if errors.As(err, &oe) && oe.Object == obj.kind.noun && oe.Name == obj.name {
		err = oe.Err // the object named once
	}
	return obj.err(&MarkError{Marked: marked, Of: of, Err: err})
}

// markPart marks places in one partition, activeBatch at a time, up to
// activePipeline scripts in one round trip, and returns how many it marked
// for certain (the ids of the scripts that succeeded). deadline is the
// period's as the index just gave it (0: none), or -1 if the caller did
// not index the partition: then the engine indexes it unless it remembers
// having done so. A remembered partition is marked but not created, so
// that one that is gone (its period ended, its index was lost) is indexed
// again before it is made anew.
func (e *Engine) markPart(ctx context.Context, obj object, period string, part int, places []place, deadline int64) (int, error) {
	if deadline < 0 && !e.remembers(shardRef{obj.name, period, int64(part), refIndexed, 0}) {
		d, err := e.indexParts(ctx, obj, period, int64(part))
		if err != nil {
			return 0, err
		}
		deadline = d
	}
	prefix := obj.partPrefix(part)
	dir := dirKey(prefix, period)
	marked := 0
	for len(places) > 0 {
		var batches [][]place
		var pieces []piece
		for len(places) > 0 && len(pieces) < activePipeline {
			batch := places[:min(len(places), activeBatch)]
			places = places[len(batch):]
			args := markArgs(dir, prefix, deadline, len(batch))
			for _, pl := range batch {
				args = append(args, pl.args()...)
			}
			batches, pieces = append(batches, batch), append(pieces, piece{s: scriptActMark, args: args})
		}
		if len(pieces) == 1 { // one script: the call path, which follows a MOVED
			p := &pieces[0]
			p.reply, p.err = e.eval(ctx, obj, scriptActMark, p.args...)
		} else if c, err := e.conn(ctx, dir, e.callTimeout); err != nil {
			return marked, obj.err(err)
		} else {
			e.pipeline(c, pieces, false)
			c.close()
			for i := range pieces {
				if err := pieces[i].err; err != nil {
					pieces[i].err = obj.err(e.callErr(ctx, err))
				}
			}
		}
		var first error
		var rest []place           // the ids of scripts whose work ran out first
		for i, p := range pieces { // every script ran: count each that did
			taken, err := e.marked(ctx, obj, period, part, batches[i], p.args, p.reply, p.err)
			if err == nil {
				marked += taken
				rest = append(rest, batches[i][taken:]...)
			} else if first == nil {
				first = err
			}
		}
		if first != nil {
			return marked, first
		}
		places = append(rest, places...)
	}
	return marked, nil
}

// marked takes in one mark script's reply (of batch, sent with args) and
// returns how many of batch's ids, from the first, the script marked: if
// the partition was gone or its deadline had passed, the partition is
// indexed again and the script run again, up to 3 times; then the engine
// remembers the dense shards and guards v3's keys.
func (e *Engine) marked(ctx context.Context, obj object, period string, part int, batch []place, args []any, reply any, err error) (int, error) {
	read := func(reply any, err error) (markReply, error) {
		if err != nil {
			return markReply{}, err
		}
		m, err := decodeMark(reply)
		if err != nil {
			return m, obj.errorf("period %q: %w", period, err)
		}
		return m, nil
	}
	m, err := read(reply, err)
	for try := 0; err == nil && m.gone; try++ { // gone, or its deadline passed: index it again
		if try == 3 {
			return 0, obj.errorf("period %q: its deadline passed before the mark could run, %d times", period, try+1)
		}
		if args[2], err = e.indexParts(ctx, obj, period, int64(part)); err == nil {
			m, err = read(e.eval(ctx, obj, scriptActMark, args...))
		}
	}
	if err != nil {
		return 0, err
	}
	if m.taken < 1 || m.taken > len(batch) {
		return 0, obj.errorf("period %q: a mark script says it marked %d of %d ids", period, m.taken, len(batch))
	}
	batch = batch[:m.taken]
	dense := m.dense
	for _, i := range m.building { // a shard's bitmap being built: the rest of its steps
		switch done, err := e.build(ctx, obj, period, args[:2], batch[i-1]); {
		case err != nil:
			return 0, err
		case done:
			dense = append(dense, i)
		}
	}
	for _, i := range dense {
		e.remember(shardRef{obj.name, period, batch[i-1].shard, refDense, 0})
	}
	return m.taken, e.guardV3(ctx, obj, period, m.deadline, batch, dense)
}

// markReply is act_mark's reply: {-1} (gone: the partition is to be
// indexed again), or {deadline, taken, dense..., 0, building...}.
type markReply struct {
	gone     bool
	deadline int64   // the period's deadline, ms since the epoch (0: none)
	taken    int     // how many ids, from the first, the script marked
	dense    []int64 // positions (from 1) of ids whose shard is dense, one a shard
	building []int64 // positions of ids whose shard's bitmap is still being built
}

// decodeMark reads act_mark's reply.
func decodeMark(reply any) (markReply, error) {
	vs, err := redis.Int64s(reply, nil)
	switch {
	case err != nil:
		return markReply{}, fmt.Errorf("unexpected reply %v: %w", reply, err)
	case len(vs) == 1 && vs[0] < 0:
		return markReply{gone: true}, nil
	case len(vs) < 2:
		return markReply{}, fmt.Errorf("unexpected reply %v", vs)
	}
	m := markReply{deadline: vs[0], taken: int(vs[1]), dense: vs[2:]}
	if i := slices.Index(m.dense, 0); i >= 0 {
		m.dense, m.building = m.dense[:i], m.dense[i+1:]
	}
	return m, nil
}

// build takes the steps of the building of pl's shard's bitmap that are
// left (act_mark's, with no id), up to 8 in a round trip, until the shard
// is dense; it reports false if the shard is neither dense nor being built
// any more (its period ended). keys: the partition's directory and prefix.
func (e *Engine) build(ctx context.Context, obj object, period string, keys []any, pl place) (bool, error) {
	base := place{h: pl.h &^ (1<<23 - 1)}
	args := append(markArgs(keys[0].(string), keys[1].(string), -1, 1), base.h>>32, base.h&(1<<32-1), "~"+base.member())
	pieces := make([]piece, 8)
	steps := 1 + activeShardIDs/max(1, min(activeStepIDs.Load(), activeWork.Load()/2)) // a step copies a leaf at least
	for range 1 + steps/int64(len(pieces)) {
		for i := range pieces {
			pieces[i] = piece{s: scriptActMark, args: args}
		}
		c, err := e.conn(ctx, keys[0].(string), e.callTimeout)
		if err != nil {
			return false, obj.err(err)
		}
		e.pipeline(c, pieces, false)
		c.close()
		for _, p := range pieces {
			var m markReply
			err := p.err
			if err == nil {
				m, err = decodeMark(p.reply)
			}
			switch {
			case err != nil:
				return false, obj.err(e.callErr(ctx, err))
			case m.gone: // the directory is gone: its period ended
				return false, nil
			case slices.Contains(m.dense, 1): // dense
				return true, nil
			case len(m.building) == 0: // neither dense nor being built
				return false, nil
			}
		}
	}
	return false, obj.errorf("period %q: shard %d's bitmap still not built after %d steps", period, pl.shard, steps)
}

// activeGuardShards bounds the shards whose v3 key guardV3 makes from their
// first mark: v3 made every shard a 1 MiB bitmap a period, so its groups'
// ids lay in the first few thousand shards (ids below 3.4e10 here).
const activeGuardShards = 1 << 12

// guardV3 makes v3's key of the places' shards below activeGuardShards, and
// of the dense ones (positions in places, from 1), a hash (act_guard), so
// that a v3 engine's IsActive there fails with WRONGTYPE: once per engine,
// period's instance (its deadline) and shard. v3's other calls read the period's index first, which
// fails them.
func (e *Engine) guardV3(ctx context.Context, obj object, period string, deadline int64, places []place, dense []int64) error {
	var shards []int64
	add := func(s int64) {
		if !slices.Contains(shards, s) && !e.remembers(shardRef{obj.name, period, s, refGuarded, deadline}) {
			shards = append(shards, s)
		}
	}
	last := int64(-1)
	for _, pl := range places {
		if pl.shard < activeGuardShards && pl.shard != last {
			add(pl.shard)
			last = pl.shard
		}
	}
	for _, i := range dense {
		add(places[i-1].shard)
	}
	for _, s := range shards {
		if _, err := e.eval(ctx, obj, scriptActGuard, obj.v3ShardKey(s, period), deadline); err != nil {
			return err
		}
		e.remember(shardRef{obj.name, period, s, refGuarded, deadline})
	}
	return nil
}

// v3ShardKey is v3's bitmap key of a shard for a period,
// <ns>bits:{<group>:<shard>}:<period>, which v4 keeps a hash (guardV3).
func (o object) v3ShardKey(shard int64, period string) string {
	return o.ns + "bits:{" + o.name + ":" + strconv.FormatInt(shard, 10) + "}:" + period
}

// markDense sets places' bits in one shard that the engine remembers as
// dense: a SETBIT each (bits_mark), or one run of bytes OR-ed in with BITOP
// (bits_merge) when there are 64 or more, at least one in 8,192 bits of
// their span (a SETBIT costs the server about as much as a KiB of bytes to
// carry and OR). If the bitmap is gone, the partition's script marks them.
func (e *Engine) markDense(ctx context.Context, obj object, period string, places []place) (int, error) {
	pl := places[0]
	prefix := obj.partPrefix(pl.part())
	key := leafKey(prefix, nodeOf(pl.h, 41), period)
	offsets := make([]int64, len(places))
	for i, p := range places {
		offsets[i] = p.offset
	}
	var args []any
	script := scriptBitsMark
	lo, hi := slices.Min(offsets)/8, slices.Max(offsets)/8
	if len(offsets) >= 64 && hi-lo+1 <= 1024*int64(len(offsets)) {
		run := make([]byte, hi-lo+1)
		for _, o := range offsets {
			run[o/8-lo] |= 0x80 >> (o % 8) // SETBIT's order: bit 0 is the first byte's highest
		}
		script, args = scriptBitsMerge, []any{key, prefix + "~", -1, lo, run}
	} else {
		args = append(make([]any, 0, 2+len(offsets)), key, -1)
		for _, o := range offsets {
			args = append(args, o)
		}
	}
	n, err := redis.Int64(e.eval(ctx, obj, script, args...))
	switch {
	case err != nil:
		return 0, err
	case n >= 0:
		return len(places), nil
	}
	e.forget(shardRef{obj.name, period, pl.shard, refDense, 0})
	return e.markPart(ctx, obj, period, pl.part(), places, -1)
}
