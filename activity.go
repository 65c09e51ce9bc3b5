package atomicredis

import (
	"context"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Activity: which ids were active in a period, for ids of any scheme. The
// layout and its costs are in docs/activity.md: an id's shard is hashed to
// one of 16 partitions (a hash tag each); in a partition a period's ids
// are a trie of sets of at most 512 ids, and a shard with 32,768 ids or
// more is v3's bitmap.

// MaxActiveID is the largest id activity takes: any int64 >= 0 will do.
const MaxActiveID = 1<<63 - 1

// activeShardIDs is how many ids a dense shard holds: 2^23 - 512, so that
// its 1,048,512 bytes and Redis's string header fill jemalloc's 1 MiB size
// class (2^23 ids would take the 1.25 MiB class). Shard and offset are
// computed here, not in Lua, whose numbers lose precision past 2^53.
const activeShardIDs = 1<<23 - 512

// activePartitions is how many hash tags a group's activity spreads over.
const activePartitions = 16

// activeLeafIDs is the most ids a bucket holds: Redis keeps a set of at
// most 512 integers (set-max-intset-entries) as a sorted intset, 8 bytes
// an id. activeDenseIDs is the count at which a shard becomes a bitmap,
// built activeStepIDs ids a script (docs/activity.md). Variables so that
// tests can make tries deep with few ids; the layout stays valid whatever
// they were when each id was marked.
var activeLeafIDs, activeDenseIDs, activeStepIDs atomic.Int64

// activeWork is the most work one mark script does, in commands and the
// members a split or a step reads (act_mark's count): past it, the
// script takes no further id and the engine sends the rest in another
// (docs/activity.md).
var activeWork atomic.Int64

func init() {
	activeLeafIDs.Store(512)
	activeDenseIDs.Store(1 << 15)
	activeStepIDs.Store(512)
	activeWork.Store(2000)
}

// markArgs are a mark script's keys and arguments before its ids: the
// partition's directory and prefix, the period's deadline as the index
// gave it (-1: not indexed just now), and the trie's sizes.
func markArgs(dir, prefix string, deadline int64, ids int) []any {
	args := make([]any, 0, 7+3*ids)
	return append(args, dir, prefix, deadline, activeLeafIDs.Load(), activeDenseIDs.Load(), activeStepIDs.Load(), activeWork.Load())
}

// activeIndexMemory bounds how many (group, period, partition) indexed,
// (group, period, shard) dense and (group, period's instance, shard) with
// v3's key guarded an engine remembers; past it, each new one makes the
// engine forget another, whose next mark costs a round trip more (indexed,
// guarded) or a few µs more (dense).
const activeIndexMemory = 1 << 14

// activeParallel bounds how many scripts one count or MarkActiveMany runs
// at once.
const activeParallel = 8

// activeBatch is the most ids one mark script takes: with its splits, a
// few ms of the server's time (docs/activity.md). activePipeline is how
// many of a partition's scripts go in one round trip.
const (
	activeBatch    = 250
	activePipeline = 40
)

// shardRef is what an engine remembers of a group's period: partition n
// is in its index (refIndexed), shard n is a bitmap (refDense), or v3's
// key of shard n is guarded (refGuarded) in the period's instance that
// ends at deadline (a period that ended and started anew has another).
type shardRef struct {
	group, period string
	n             int64
	kind          refKind
	deadline      int64
}

type refKind uint8

const (
	refIndexed refKind = iota
	refDense
	refGuarded
)

// place is where an id lives: h = perm(shard) << 23 | offset, whose top 4
// bits are the partition.
type place struct {
	h             uint64
	shard, offset int64
}

func placeOf(id int64) place {
	s, o := id/activeShardIDs, id%activeShardIDs
	return place{h: permShard(uint64(s))<<23 | uint64(o), shard: s, offset: o}
}

// permShard is a bijection of 41-bit numbers that spreads neighbouring
// shards (a day of snowflake ids, a dense range) over the partitions and
// the trie: xor-shifts and multiplications by odd numbers, each invertible
// modulo 2^41.
func permShard(s uint64) uint64 {
	const mask = 1<<41 - 1
	s ^= s >> 21
	s = s * 0x9e3779b97f4a7c15 & mask
	s ^= s >> 19
	s = s * 0xbf58476d1ce4e5b9 & mask
	s ^= s >> 23
	return s
}

func (p place) part() int { return int(p.h >> 60) }

// member is what a bucket stores for the id: h - 2^63 as a signed integer,
// so that it fits an intset.
func (p place) member() string { return strconv.FormatInt(int64(p.h^1<<63), 10) }

// args are the id's three values for act_mark and act_is.
func (p place) args() []any { return []any{p.h >> 32, p.h & (1<<32 - 1), p.member()} }

// trieNode is a node of a partition's trie: depth d and h's top d bits.
type trieNode struct {
	d int
	p uint64
}

func nodeOf(h uint64, d int) trieNode { return trieNode{d, h >> (64 - d)} }

func (n trieNode) children() [2]trieNode {
	return [2]trieNode{{n.d + 1, n.p << 1}, {n.d + 1, n.p<<1 | 1}}
}

// name is the node's name in Lua's terms (lib/act.lua's act_node).
func (n trieNode) name() string {
	if n.d <= 32 {
		return strconv.Itoa(n.d) + "." + strconv.FormatUint(n.p, 10)
	}
	lowBits := n.d - 32
	return strconv.Itoa(n.d) + "." + strconv.FormatUint(n.p>>lowBits, 10) + "." + strconv.FormatUint(n.p&(1<<lowBits-1), 10)
}

// parseNode reads a node's name; ok is false for anything else.
func parseNode(s string) (n trieNode, ok bool) {
	var f [3]uint64
	i := 0
	for _, c := range []byte(s) {
		switch {
		case c == '.' && i < 2:
			i++
		case c >= '0' && c <= '9':
			hi, lo := bits.Mul64(f[i], 10)
			if hi != 0 {
				return trieNode{}, false
			}
			f[i] = lo + uint64(c-'0')
		default:
			return trieNode{}, false
		}
	}
	n.d = int(f[0])
	switch {
	case i == 1 && n.d >= 1 && n.d <= 32:
		n.p = f[1]
	case i == 2 && n.d > 32 && n.d <= 64:
		n.p = f[1]<<(n.d-32) | f[2]
	default:
		return trieNode{}, false
	}
	return n, true
}

// base is the member of a dense shard's offset 0 (n at depth 41).
func (n trieNode) base() string { return strconv.FormatInt(int64(n.p<<23^1<<63), 10) }

// partPrefix builds <ns>act:{<tag>}, the start of every key of one of a
// group's partitions, whose tag is partTag's.
func (o object) partPrefix(part int) string { return o.ns + "act:{" + partTag(o.name, part) + "}" }

// partTag is partition part's hash tag: <group>:<part>, or <group>:<part>.<k>
// with the least k that puts it in the part'th sixteenth of the 16,384
// slots (about 16 tries), so that a cluster whose primaries own ranges of
// slots, as they do by default, spreads a group's partitions evenly (with
// 3 primaries, 5 or 6 of 16 each), whatever the group's name. The number
// after the tag's last colon keeps it unambiguous whatever colons the
// group holds.
func partTag(group string, part int) string {
	tag := group + ":" + strconv.Itoa(part)
	for k := 1; k < 1000 && int(tagSlot(tag))*activePartitions/16384 != part; k++ {
		tag = group + ":" + strconv.Itoa(part) + "." + strconv.Itoa(k)
	}
	return tag
}

// tagSlot is Redis Cluster's slot for a hash tag: CRC-16/XMODEM mod 16384.
func tagSlot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^tag[i]]
	}
	return crc % 16384
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// dirKey is a partition's directory for a period (prefix: partPrefix's);
// a leaf's key puts its node (which starts with a digit) where the
// directory has ':'.
func dirKey(prefix, period string) string { return prefix + ":" + period }

func leafKey(prefix string, n trieNode, period string) string {
	return prefix + n.name() + ":" + period
}

// indexKey builds <ns>bitindex:{<group>}:<period>, the partitions an
// activity group's period has used (v3's name for its index of shards, a
// sorted set: the versions meet each other with WRONGTYPE).
func (o object) indexKey(period string) string {
	return o.ns + "bitindex:{" + o.name + "}:" + period
}

// indexParts puts partitions in the group's index for period and returns
// the period's deadline (ms since the epoch by the server's clock, 0 for
// none), which the period's first mark fixed.
func (e *Engine) indexParts(ctx context.Context, obj object, period string, parts ...int64) (int64, error) {
	args := make([]any, 0, 2+len(parts))
	args = append(args, obj.indexKey(period), e.activityTTL.Milliseconds())
	for _, p := range parts {
		args = append(args, p)
	}
	deadline, err := redis.Int64(e.eval(ctx, obj, scriptActIndex, args...))
	if err != nil {
		return 0, err
	}
	for _, p := range parts {
		e.remember(shardRef{obj.name, period, p, refIndexed, 0})
	}
	return deadline, nil
}

// remember notes r, forgetting an arbitrary other when the engine
// remembers activeIndexMemory already.
func (e *Engine) remember(r shardRef) {
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	if e.indexed == nil {
		e.indexed = map[shardRef]struct{}{}
	}
	if _, ok := e.indexed[r]; !ok && len(e.indexed) >= activeIndexMemory {
		for old := range e.indexed { // an arbitrary one: map order is random
			delete(e.indexed, old)
			break
		}
	}
	e.indexed[r] = struct{}{}
}

func (e *Engine) forget(r shardRef) {
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	delete(e.indexed, r)
}

func (e *Engine) remembers(r shardRef) bool {
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	_, ok := e.indexed[r]
	return ok
}

// IsActive reports whether id was marked active in the group for period:
// one round trip (one script on id's partition).
func (e *Engine) IsActive(ctx context.Context, group, period string, id int64) (bool, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectActivityGroup, group, "IsActive"}, func(ctx context.Context) (bool, error) { return e.isActive(ctx, group, period, id) })
	}
	return e.isActive(ctx, group, period, id)
}

// isActive is IsActive.
func (e *Engine) isActive(ctx context.Context, group, period string, id int64) (bool, error) {
	obj, err := e.activity(group, id)
	if err == nil {
		err = obj.period(period)
	}
	if err != nil {
		return false, err
	}
	pl := placeOf(id)
	prefix := obj.partPrefix(pl.part())
	args := append([]any{dirKey(prefix, period), prefix}, pl.args()...)
	n, err := redis.Int64(e.eval(ctx, obj, scriptActIs, args...))
	return n == 1, err
}

// activity checks a group's name and an id.
func (e *Engine) activity(group string, id int64) (object, error) {
	obj, err := e.object(kindActivity, group)
	if err == nil && id < 0 {
		err = obj.errorf("id %d: must be at least 0: %w", id, ErrInvalid)
	}
	return obj, err
}

// eachShard runs f for every job, up to activeParallel at once (fewer on a
// *redis.Pool whose MaxActive is small, so that one call cannot exhaust
// it), and returns the first error, which ends the other calls' contexts.
func (e *Engine) eachShard(ctx context.Context, obj object, jobs []int64, f func(context.Context, int64) error) error {
	return eachJob(ctx, e, obj, jobs, func(ctx context.Context, j int64) ([]int64, error) { return nil, f(ctx, j) })
}

// eachJob runs f for every job and every job f returns, as eachShard: a
// count's partitions plan the scripts that count them, and these run
// beside the other partitions' planning and scripts.
func eachJob[J any](ctx context.Context, e *Engine, obj object, jobs []J, f func(context.Context, J) ([]J, error)) error {
	if len(jobs) == 1 { // the common mark: no goroutine
		more, err := f(ctx, jobs[0])
		if err != nil || len(more) == 0 {
			return err
		}
		jobs = more
	}
	limit := activeParallel
	if p, ok := e.pool.(*redis.Pool); ok && p.MaxActive > 0 {
		limit = max(1, min(limit, p.MaxActive/2))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		changed = sync.NewCond(&mu)
		queue   = slices.Clone(jobs)
		running int
		first   error
		wg      sync.WaitGroup
	)
	work := func() {
		defer wg.Done()
		mu.Lock()
		defer mu.Unlock()
		for {
			for len(queue) == 0 && running > 0 && first == nil {
				changed.Wait()
			}
			if first == nil && len(queue) > 0 {
				if err := ctx.Err(); err != nil {
					first = obj.errorf("%d scripts not run: %w", len(queue), err)
				}
			}
			if first != nil || len(queue) == 0 {
				changed.Broadcast()
				return
			}
			j := queue[0]
			queue = queue[1:]
			running++
			mu.Unlock()
			more, err := f(ctx, j)
			mu.Lock()
			running--
			if len(more) > 0 { // first: a plan's scripts run soon after it read the tries
				queue = append(more, queue...)
			}
			if err != nil && first == nil {
				first = err
				cancel()
			}
			changed.Broadcast()
		}
	}
	wg.Add(limit)
	for range limit {
		go work()
	}
	wg.Wait()
	return first
}
