package atomicredis

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

// CountActive returns how many ids were active in at least one of the
// periods. It reads the periods' indexes (one round trip), then each
// partition used in any of them: its tries (one round trip), then its ids
// in scripts of a few ms each (SUNIONSTORE of sets, BITOP OR of bitmaps),
// at most 8 partitions at once, in parallel across a cluster's nodes, and
// adds up. Counts are exact. Each script's part is counted atomically;
// marks made during the count may or may not be in it. At least one period
// is required.
func (e *Engine) CountActive(ctx context.Context, group string, periods ...string) (int64, error) {
	return e.countActive(ctx, group, "OR", periods)
}

// CountActiveAll returns how many ids were active in every one of the
// periods (retention): as CountActive, with SINTERCARD and BITOP AND, over
// the partitions that every period used.
func (e *Engine) CountActiveAll(ctx context.Context, group string, periods ...string) (int64, error) {
	return e.countActive(ctx, group, "AND", periods)
}

// activeBudget is a count script's estimated server time, in µs, past
// which the engine starts another: scripts stay under about 5 ms (one unit
// alone can exceed it: docs/activity.md). A bucket costs up to 512 ids at
// ~0.2 µs an id (SUNIONSTORE into a hash table, measured 0.28 µs on a
// loaded 2-core machine), a bitmap ~0.15 ms (BITOP of 1 MiB), and a bucket
// sorted among bitmaps ~1 µs an id.
const (
	activeBudget     = 2000
	activeBucketCost = 100
	activeBitmapCost = 150
	activeMixedCost  = 512
)

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
	parts, err := redis.Int64s(e.eval(ctx, obj, scriptActParts, append(args, op)...))
	if err != nil {
		return 0, err
	}
	var total atomic.Int64
	err = e.eachShard(ctx, obj, parts, func(ctx context.Context, p int64) error {
		n, err := e.countPart(ctx, obj, op, int(p), distinct)
		total.Add(n)
		return err
	})
	if err != nil {
		return 0, err
	}
	return total.Load(), nil
}

// trie is one period's trie in a partition, as its directory tells it:
// split nodes, dense shards, and empty leaves (no key).
type trie struct {
	split, dense, empty map[trieNode]bool
}

// unitPart is one period's share of a unit: buckets' keys, and dense
// shards' bitmaps with their nodes.
type unitPart struct {
	buckets []string
	bitmaps []string
	dense   []trieNode
}

// countPart counts one partition: it reads the periods' tries, aligns
// them into units (the children of the nodes split in every period, each
// covering the same range of h in every period), and counts the units in
// scripts of at most activeBudget each.
func (e *Engine) countPart(ctx context.Context, obj object, op string, part int, periods []string) (int64, error) {
	prefix := obj.partPrefix(part)
	args := make([]any, 0, 1+len(periods))
	args = append(args, len(periods))
	for _, p := range periods {
		args = append(args, dirKey(prefix, p))
	}
	reply, err := redis.Values(e.eval(ctx, obj, scriptActDirs, args...))
	if err != nil {
		return 0, err
	}
	var tries []trie
	var present []string
	for i, r := range reply {
		nodes, ok := r.([]any)
		if !ok { // no directory: the period has no id here
			if op == "AND" {
				return 0, nil
			}
			continue
		}
		t := trie{map[trieNode]bool{}, map[trieNode]bool{}, map[trieNode]bool{}}
		for j := 0; j+1 < len(nodes); j += 2 {
			name, _ := redis.String(nodes[j], nil)
			v, _ := redis.String(nodes[j+1], nil)
			if name == "t" || strings.HasPrefix(name, "c") { // the deadline, a shard's count
				continue
			}
			n, ok := parseNode(name)
			if !ok {
				return 0, obj.errorf("partition %d, period %q: directory names %q: %w", part, periods[i], name, ErrInvalid)
			}
			switch v {
			case "d":
				t.dense[n] = true
			case "s0", "s1": // the other half holds no id
				t.split[n] = true
				t.empty[n.children()[1-int(v[1]-'0')]] = true
			default:
				t.split[n] = true
			}
		}
		tries = append(tries, t)
		present = append(present, periods[i])
	}
	if len(tries) == 0 {
		return 0, nil
	}
	var (
		total int64
		keys  = []any{0, prefix + "~"}
		argv  = []any{op}
		cost  = 0
	)
	flush := func() error {
		if cost == 0 {
			return nil
		}
		keys[0] = len(keys) - 1
		n, err := redis.Int64(e.eval(ctx, obj, scriptActCount, append(keys, argv...)...))
		total += n
		keys, argv, cost = keys[:2], argv[:1], 0
		return err
	}
	var walk func(n trieNode) error
	walk = func(n trieNode) error {
		all := n.d < 64
		for _, t := range tries {
			all = all && t.split[n]
		}
		if all {
			for _, c := range n.children() {
				if err := walk(c); err != nil {
					return err
				}
			}
			return nil
		}
		var unit []unitPart
		c, mixed, used := 0, false, 0
		for i, t := range tries {
			var u unitPart
			t.collect(n, prefix, present[i], &u)
			if len(u.buckets)+len(u.bitmaps) == 0 && op == "AND" {
				return nil // empty in one period: nothing in all
			}
			unit = append(unit, u)
			c += activeBucketCost*len(u.buckets) + activeBitmapCost*len(u.bitmaps)
			mixed = mixed || len(u.bitmaps) > 0
			used += len(u.buckets) + len(u.bitmaps)
		}
		if used == 0 { // empty in every period
			return nil
		}
		if mixed {
			for _, u := range unit {
				c += activeMixedCost * len(u.buckets)
			}
		}
		if cost > 0 && (cost+c > activeBudget || len(keys) > 1000) {
			if err := flush(); err != nil {
				return err
			}
		}
		argv = append(argv, len(unit))
		for _, u := range unit {
			argv = append(argv, len(u.buckets), len(u.bitmaps))
			for _, k := range u.buckets {
				keys = append(keys, k)
			}
			for j, k := range u.bitmaps {
				keys = append(keys, k)
				argv = append(argv, u.dense[j].base())
			}
		}
		cost += max(c, 1)
		return nil
	}
	if err := walk(trieNode{4, uint64(part)}); err != nil {
		return total, err
	}
	return total, flush()
}

// collect adds to u the keys of the period's trie under n: a dense shard's
// bitmap, the buckets under a split trieNode, or n's bucket.
func (t trie) collect(n trieNode, prefix, period string, u *unitPart) {
	switch {
	case t.dense[n]:
		u.bitmaps = append(u.bitmaps, leafKey(prefix, n, period))
		u.dense = append(u.dense, n)
	case t.split[n] && n.d < 64:
		for _, c := range n.children() {
			t.collect(c, prefix, period, u)
		}
	case t.empty[n]:
	default:
		u.buckets = append(u.buckets, leafKey(prefix, n, period))
	}
}
