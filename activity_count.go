package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

// CountActive returns how many ids were active in at least one of the
// periods, exactly: every id marked before the count began is in it; marks
// made during the count may or may not be. At least one period is
// required. Its cost: "Activity" in the package doc.
func (e *Engine) CountActive(ctx context.Context, group string, periods ...string) (int64, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectActivityGroup, group, "CountActive"}, func(ctx context.Context) (int64, error) { return e.countActive(ctx, group, "OR", periods) })
	}
	return e.countActive(ctx, group, "OR", periods)
}

// CountActiveAll returns how many ids were active in every one of the
// periods (retention): as CountActive, with SINTERCARD and BITOP AND, over
// the partitions that every period used.
func (e *Engine) CountActiveAll(ctx context.Context, group string, periods ...string) (int64, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectActivityGroup, group, "CountActiveAll"}, func(ctx context.Context) (int64, error) { return e.countActive(ctx, group, "AND", periods) })
	}
	return e.countActive(ctx, group, "AND", periods)
}

// activeBudget is a count script's estimated server time, in µs, past
// which the engine starts another: scripts stay under about 5 ms (one unit
// alone can exceed it: docs/activity.md). A bucket costs up to 512 ids at
// ~0.2 µs an id (SUNIONSTORE into a hash table, measured 0.28 µs on a
// loaded 2-core machine), a bitmap ~0.15 ms (BITOP of 1 MiB), and a bucket
// sorted among bitmaps ~1 µs an id; a bucket above a unit divided in parts,
// read once a script, is filtered to each part's range in ~0.2 µs an id.
const (
	activeBudget     = 2000
	activeBucketCost = 100
	activeBitmapCost = 150
	activeMixedCost  = 512
	activeFilterCost = 100
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
		if err := obj.period(p); err != nil {
			return 0, err
		}
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
	jobs := make([]countJob, len(parts))
	for i, p := range parts {
		jobs[i].part = int(p)
	}
	return e.runCount(ctx, obj, op, distinct, jobs)
}

// activeReplans bounds how many times in a row a count plans the same
// units again because marks changed them under it (or because one of
// their keys is of another type).
const activeReplans = 8

// runCount runs a count's jobs, and the jobs they make, up to
// activeParallel at once, and adds up the scripts' counts. A script whose
// units a mark changed after the plan (a bucket split, a shard made dense:
// act_count replies -1 and counts nothing) has its units planned again.
func (e *Engine) runCount(ctx context.Context, obj object, op string, periods []string, jobs []countJob) (int64, error) {
	var total atomic.Int64
	err := eachJob(ctx, e, obj, jobs, func(ctx context.Context, j countJob) ([]countJob, error) {
		if j.script == nil {
			return e.planPart(ctx, obj, op, j.part, periods, j.units, j.plans)
		}
		n, err := redis.Int64(e.eval(ctx, obj, scriptActCount, j.script...))
		var re redis.Error
		if n < 0 || errors.As(err, &re) && strings.HasPrefix(string(re), "WRONGTYPE ") {
			// A mark split a planned bucket or made its shard dense (so a
			// bucket's key may be a bitmap's now): plan the units again.
			if j.plans < activeReplans {
				return []countJob{{part: j.part, units: j.units, plans: j.plans}}, nil
			}
			if err == nil {
				err = obj.errorf("partition %d: a key the count planned to read was gone %d plans in a row (marks split its sets faster than it counts, or a key was evicted or deleted)", j.part, j.plans)
			}
		}
		if err != nil {
			return nil, err
		}
		total.Add(n)
		return nil, nil
	})
	if err != nil {
		return 0, err
	}
	return total.Load(), nil
}

// countJob is a partition's units to plan (script nil; units nil for the
// whole partition), or one of the count scripts a plan makes: act_count's
// key count, keys and arguments, the units it counts, and its estimated
// server time in µs.
type countJob struct {
	part   int
	script []any
	units  []trieNode
	cost   int
	plans  int // how many times these units were planned
}

// planPart reads one partition's tries in the periods and returns the
// scripts that count the ids under roots (nil: the whole partition): the
// tries are aligned into units (the children of the nodes split in every
// period, each covering the same range of h in every period), divided
// further where one would take a script past activeBudget, and packed
// into scripts of at most activeBudget each.
func (e *Engine) planPart(ctx context.Context, obj object, op string, part int, periods []string, roots []trieNode, plans int) ([]countJob, error) {
	prefix := obj.partPrefix(part)
	args := make([]any, 0, 1+len(periods))
	args = append(args, len(periods))
	for _, p := range periods {
		args = append(args, dirKey(prefix, p))
	}
	reply, err := redis.Values(e.eval(ctx, obj, scriptActDirs, args...))
	if err != nil {
		return nil, err
	}
	plan := countPlan{op: op, part: part, prefix: prefix, plans: plans + 1}
	for i, r := range reply {
		fields, ok := r.([]any)
		if !ok { // no directory: the period has no id here
			if op == "AND" {
				return nil, nil
			}
			continue
		}
		t, err := readTrie(fields)
		if err != nil {
			return nil, obj.errorf("partition %d, period %q: %w", part, periods[i], err)
		}
		plan.tries = append(plan.tries, t)
		plan.periods = append(plan.periods, periods[i])
	}
	if len(plan.tries) == 0 {
		return nil, nil
	}
	if roots == nil {
		roots = []trieNode{{4, uint64(part)}}
	}
	for _, n := range roots {
		plan.walk(n)
	}
	plan.flush()
	return plan.jobs, nil
}

// trie is one period's trie in a partition, as its directory tells it:
// split nodes, dense shards, and empty leaves (no key).
type trie struct {
	split, dense, empty map[trieNode]bool
}

// readTrie reads a directory as act_dirs returns it: every field, or '*'
// and the dense shards alone, whose paths are then the whole trie.
func readTrie(fields []any) (trie, error) {
	t := trie{map[trieNode]bool{}, map[trieNode]bool{}, map[trieNode]bool{}}
	if s, _ := redis.String(fields[0], nil); s == "*" {
		dense, _ := redis.String(fields[1], nil)
		return t, t.paths(strings.Fields(dense))
	}
	for j := 0; j+1 < len(fields); j += 2 {
		name, _ := redis.String(fields[j], nil)
		v, _ := redis.String(fields[j+1], nil)
		switch name {
		case "t", "b", "D": // the deadline, the buckets, the dense shards
			continue
		}
		if strings.HasPrefix(name, "c") || strings.HasPrefix(name, "v") { // a shard's count, a building's cursor
			continue
		}
		n, ok := parseNode(name)
		if !ok {
			return trie{}, fmt.Errorf("directory names %q: %w", name, ErrInvalid)
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
	return t, nil
}

// paths makes t the trie of a directory with no bucket: the dense shards,
// their ancestors split, and every other child of those empty.
func (t trie) paths(dense []string) error {
	for _, name := range dense {
		n, ok := parseNode(name)
		if !ok || n.d != 41 {
			return fmt.Errorf("directory names dense shard %q: %w", name, ErrInvalid)
		}
		t.dense[n] = true
		for d := 4; d < n.d; d++ {
			t.split[trieNode{d, n.p >> (n.d - d)}] = true
		}
	}
	for n := range t.split {
		for _, c := range n.children() {
			if !t.split[c] && !t.dense[c] {
				t.empty[c] = true
			}
		}
	}
	return nil
}

// unitPart is one period's share of a unit: buckets' keys, buckets above
// the unit whose members are filtered to its range, and dense shards'
// bitmaps with their nodes (a shard above the unit is counted in its range).
type unitPart struct {
	buckets  []string
	filtered []string
	bitmaps  []string
	dense    []trieNode
}

// countPlan packs a partition's units into act_count scripts of at most
// activeBudget of estimated server time each.
type countPlan struct {
	op, prefix string
	part       int
	plans      int
	tries      []trie   // the periods with a directory here
	periods    []string // their names
	jobs       []countJob
	keys, argv []any // the script being packed
	units      []trieNode
	cost       int
}

// walk adds the units under n: n's children if n is split in every period,
// else n itself, or its children again while n would take a script past
// activeBudget and some period splits it (the periods whose leaf holds n
// then count that leaf in each child's range).
func (c *countPlan) walk(n trieNode) {
	all, some := n.d < 64, false
	for _, t := range c.tries {
		all = all && t.split[n]
		some = some || t.split[n]
	}
	if !all {
		unit := make([]unitPart, len(c.tries))
		for i, t := range c.tries {
			t.collect(n, c.prefix, c.periods[i], &unit[i])
		}
		cost := c.costOf(unit)
		if cost == 0 {
			return
		}
		if cost <= activeBudget || !some || n.d == 64 {
			c.add(n, unit, cost)
			return
		}
	}
	for _, ch := range n.children() {
		c.walk(ch)
	}
}

// costOf is a unit's estimated server time in µs, 0 if it has nothing to
// count (no id in any period, or for AND in one).
func (c *countPlan) costOf(unit []unitPart) int {
	cost, mixed, used := 0, false, 0
	for _, u := range unit {
		n := len(u.buckets) + len(u.filtered) + len(u.bitmaps)
		if n == 0 && c.op == "AND" {
			return 0 // empty in one period: nothing in all
		}
		cost += activeBucketCost*len(u.buckets) + activeFilterCost*len(u.filtered) + activeBitmapCost*len(u.bitmaps)
		mixed = mixed || len(u.bitmaps) > 0
		used += n
	}
	if used == 0 { // empty in every period
		return 0
	}
	if mixed {
		for _, u := range unit {
			cost += activeMixedCost * (len(u.buckets) + len(u.filtered))
		}
	}
	return max(cost, 1)
}

// add packs unit n into the script being packed, after flushing it if the
// unit would take it past the budget.
func (c *countPlan) add(n trieNode, unit []unitPart, cost int) {
	if c.cost > 0 && (c.cost+cost > activeBudget || len(c.keys) > 1000) {
		c.flush()
	}
	if c.cost == 0 {
		c.keys, c.argv = []any{0, c.prefix + "~"}, []any{c.op}
	}
	ranged := false
	for _, u := range unit {
		ranged = ranged || len(u.filtered) > 0 || n.d > 41 && len(u.bitmaps) > 0
	}
	if ranged { // the unit's range: its least and greatest members, and its bits in its shard
		low := n.p << (64 - n.d)
		high := low | (1<<(64-n.d) - 1)
		from, size := uint64(0), uint64(0)
		if n.d > 41 {
			from, size = low&(1<<23-1), 1<<(64-n.d)
		}
		c.argv = append(c.argv, "r", int64(low^1<<63), int64(high^1<<63), from, size)
	}
	c.argv = append(c.argv, len(unit))
	for _, u := range unit {
		c.argv = append(c.argv, len(u.buckets), len(u.filtered), len(u.bitmaps))
		for _, k := range u.buckets {
			c.keys = append(c.keys, k)
		}
		for _, k := range u.filtered {
			c.keys = append(c.keys, k)
		}
		for j, k := range u.bitmaps {
			c.keys = append(c.keys, k)
			c.argv = append(c.argv, u.dense[j].base())
		}
	}
	c.units = append(c.units, n)
	c.cost += cost
}

// flush ends the script being packed.
func (c *countPlan) flush() {
	if c.cost == 0 {
		return
	}
	c.keys[0] = len(c.keys) - 1
	c.jobs = append(c.jobs, countJob{part: c.part, script: append(c.keys, c.argv...), units: c.units, cost: c.cost, plans: c.plans})
	c.keys, c.argv, c.units, c.cost = nil, nil, nil, 0
}

// collect adds to u the keys of the period's trie under n: a dense shard's
// bitmap, the buckets under a split trieNode, or n's bucket; or, where n
// lies under one of the trie's leaves (a plan of a unit that a mark has
// changed since, or a unit divided for the budget), that leaf: a dense
// shard, or a bucket to filter.
func (t trie) collect(n trieNode, prefix, period string, u *unitPart) {
	if n.d > 4 && !t.split[trieNode{n.d - 1, n.p >> 1}] {
		a := trieNode{4, n.p >> (n.d - 4)}
		for a.d < n.d && t.split[a] {
			a = trieNode{a.d + 1, n.p >> (n.d - a.d - 1)}
		}
		switch {
		case t.dense[a]:
			u.bitmaps = append(u.bitmaps, leafKey(prefix, a, period))
			u.dense = append(u.dense, a)
		case t.empty[a]:
		default:
			u.filtered = append(u.filtered, leafKey(prefix, a, period))
		}
		return
	}
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
