package atomicredis

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// shardOf is where a test expects an id's bit: the shard's key and the
// offset in it, 8,388,096 ids a shard.
func shardOf(s *testserver.Server, group, period string, id int64) (key string, offset int64) {
	return s.NS + "bits:{" + group + ":" + strconv.FormatInt(id/8388096, 10) + "}:" + period, id % 8388096
}

// Ids past 2^32 and past 2^53 (where Lua's numbers lose precision) land in
// their own shard at their own bit, through MarkActive and MarkActiveMany.
func TestActivityIDs(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		ids := []int64{0, 1<<32 - 1, 1 << 32, 5_000_000_000, 1 << 62, 1<<53 + 1, MaxActiveID}
		if err := e.MarkActiveMany(ctx, "ids", "many", ids...); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := e.MarkActive(ctx, "ids", "one", id); err != nil {
				t.Fatal(err)
			}
		}
		shards := map[string]bool{}
		for _, period := range []string{"one", "many"} {
			for _, id := range ids {
				key, off := shardOf(s, "ids", period, id)
				shards[strconv.FormatInt(id/8388096, 10)] = true
				if bit, err := redis.Int(s.Do("GETBIT", key, off)); bit != 1 || err != nil {
					t.Errorf("%s: id %d: GETBIT %s %d = %d, %v; want 1", period, id, key, off, bit, err)
				}
				for _, near := range []int64{id - 1, id + 1} {
					if near < 0 || near == 1<<32 || near == 1<<32-1 { // the neighbours that are marked themselves
						continue
					}
					if got, err := e.IsActive(ctx, "ids", period, near); got || err != nil {
						t.Errorf("%s: IsActive(%d) = %v, %v next to %d; want false", period, near, got, err, id)
					}
				}
				if got, err := e.IsActive(ctx, "ids", period, id); !got || err != nil {
					t.Errorf("%s: IsActive(%d) = %v, %v", period, id, got, err)
				}
			}
			if n, err := e.CountActive(ctx, "ids", period); n != int64(len(ids)) || err != nil {
				t.Errorf("%s: CountActive = %d, %v; want %d", period, n, err, len(ids))
			}
			var want []string
			for sh := range shards {
				want = append(want, sh)
			}
			sort.Strings(want)
			got, err := redis.Strings(s.Do("ZRANGE", s.NS+"bitindex:{ids}:"+period, 0, -1))
			sort.Strings(got)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s: index %q, %v; want shards %q", period, got, err, want)
			}
		}
		if n, err := e.CountActiveAll(ctx, "ids", "one", "many"); n != int64(len(ids)) || err != nil {
			t.Errorf("CountActiveAll = %d, %v; want %d", n, err, len(ids))
		}
	})
}

// CountActive (OR) and CountActiveAll (AND) against an in-memory oracle,
// over random ids in shards near and far, marked by two engines through
// both MarkActive and MarkActiveMany, and random sets of periods.
func TestActivityOracle(t *testing.T) {
	testserver.Parallel(t) // slow, and reads nothing the process or server shares
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		engines := []*Engine{engine(s), engine(s)}
		r := rand.New(rand.NewPCG(3, 19))
		shards := []int64{0, 1, 511, 512, 596, 1 << 39, MaxActiveID / activeShardIDs}
		periods := []string{"d1", "d2", "d3", "d4", "d5"}
		marked := map[string]map[int64]bool{}
		for _, p := range periods {
			marked[p] = map[int64]bool{}
		}
		id := func() int64 {
			shard := shards[r.IntN(len(shards))]
			if r.IntN(4) != 0 {
				return shard*activeShardIDs + r.Int64N(4096)
			}
			top := int64(MaxActiveID) // the last shard ends early
			if shard < MaxActiveID/activeShardIDs {
				top = shard*activeShardIDs + activeShardIDs - 1
			}
			return top - r.Int64N(64)
		}
		rounds := 80
		if testing.Short() {
			rounds = 40
		}
		for i := 0; i < rounds; i++ {
			e, p := engines[r.IntN(2)], periods[r.IntN(len(periods))]
			if r.IntN(3) == 0 {
				batch := make([]int64, 1+r.IntN(20))
				for j := range batch {
					batch[j] = id()
					marked[p][batch[j]] = true
				}
				if err := e.MarkActiveMany(ctx, "o", p, batch...); err != nil {
					t.Fatal(err)
				}
				continue
			}
			v := id()
			marked[p][v] = true
			if err := e.MarkActive(ctx, "o", p, v); err != nil {
				t.Fatal(err)
			}
		}
		for q := 0; q < 40; q++ {
			var ps []string
			for n := 1 + r.IntN(4); n > 0; n-- {
				if r.IntN(8) == 0 {
					ps = append(ps, "never")
				} else {
					ps = append(ps, periods[r.IntN(len(periods))])
				}
			}
			var union, inter int64
			seen := map[int64]int{}
			distinct := map[string]bool{}
			for _, p := range ps {
				if distinct[p] {
					continue
				}
				distinct[p] = true
				for v := range marked[p] {
					seen[v]++
				}
			}
			for _, n := range seen {
				union++
				if n == len(distinct) {
					inter++
				}
			}
			e := engines[q%2]
			if got, err := e.CountActive(ctx, "o", ps...); got != union || err != nil {
				t.Errorf("CountActive(%q) = %d, %v; want %d", ps, got, err, union)
			}
			if got, err := e.CountActiveAll(ctx, "o", ps...); got != inter || err != nil {
				t.Errorf("CountActiveAll(%q) = %d, %v; want %d", ps, got, err, inter)
			}
		}
		for q := 0; q < 60; q++ {
			p, v := periods[r.IntN(len(periods))], id()
			if got, err := engines[q%2].IsActive(ctx, "o", p, v); got != marked[p][v] || err != nil {
				t.Errorf("IsActive(%q, %d) = %v, %v; want %v", p, v, got, err, marked[p][v])
			}
		}
	})
}

// A shard the engine remembers having indexed but that is gone, with its
// index (its period ended, or the keys were lost), is indexed again before
// it is made anew: counts see it.
func TestActivityReindexes(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		if err := e.MarkActive(ctx, "re", "p", 5); err != nil {
			t.Fatal(err)
		}
		shard, _ := shardOf(s, "re", "p", 5)
		s.Must(t, "DEL", shard)
		s.Must(t, "DEL", s.NS+"bitindex:{re}:p")
		if err := e.MarkActive(ctx, "re", "p", 6); err != nil {
			t.Fatal(err)
		}
		if err := e.MarkActiveMany(ctx, "re", "p", 7, 8); err != nil {
			t.Fatal(err)
		}
		if n, err := e.CountActive(ctx, "re", "p"); n != 3 || err != nil {
			t.Errorf("CountActive = %d, %v; want 3", n, err)
		}
	})
}

// The engine's memory of indexed shards stays bounded.
func TestActivityIndexMemory(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	shards := make([]int64, activeIndexMemory+100)
	for i := range shards {
		shards[i] = int64(i)
	}
	if _, err := e.indexShards(ctx, e.group("mem"), "p", shards...); err != nil {
		t.Fatal(err)
	}
	if n := len(e.indexed); n != activeIndexMemory {
		t.Errorf("%d shards remembered, want the bound %d", n, activeIndexMemory)
	}
}

// On a multi-node cluster one group's shards spread over every primary,
// each in its slot's owner, and a count visits them all.
func TestActivityShardsSpread(t *testing.T) {
	s := clusterServer(t)
	ctx, e := ctxT(t), engine(s)
	const n = 24
	var ids []int64
	for k := int64(0); k < n; k++ {
		ids = append(ids, k*activeShardIDs+k)
	}
	for _, p := range []string{"d1", "d2"} {
		if err := e.MarkActiveMany(ctx, "spread", p, ids...); err != nil {
			t.Fatal(err)
		}
	}
	owners, err := testcluster.SlotOwners(testcluster.Of(s))
	if err != nil {
		t.Fatal(err)
	}
	perNode, err := testcluster.NodeKeys(testcluster.Of(s), s.NS+"bits:*")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for addr, ks := range perNode {
		if len(ks) == 0 {
			t.Errorf("primary %s holds none of the group's shards", addr)
		}
		for _, k := range ks {
			if owner := owners[keySlot(k)]; owner != addr {
				t.Errorf("%s on %s; its slot's owner is %s", k, addr, owner)
			}
		}
		total += len(ks)
		t.Logf("primary %s: %d shard bitmaps", addr, len(ks))
	}
	if total != 2*n {
		t.Errorf("%d shard bitmaps, want %d", total, 2*n)
	}
	if got, err := e.CountActive(ctx, "spread", "d1", "d2"); got != n || err != nil {
		t.Errorf("CountActive = %d, %v; want %d", got, err, n)
	}
	if got, err := e.CountActiveAll(ctx, "spread", "d1", "d2"); got != n || err != nil {
		t.Errorf("CountActiveAll = %d, %v; want %d", got, err, n)
	}
}

// serverMs is the server's TIME in ms.
func serverMs(s *testserver.Server, t *testing.T) int64 {
	t.Helper()
	v, err := redis.Int64s(s.Do("TIME"))
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v, %v", v, err)
	}
	return v[0]*1000 + v[1]/1000
}

// WithActivityTTL: a period's index and every one of its shards expire at
// the deadline its first mark set, whichever engine (and TTL) marks later
// and whichever shard it marks; after it the period starts anew.
func TestActivityTTL(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		const ttl, step = 1500 * time.Millisecond, 500 * time.Millisecond
		if s.Mini != nil {
			// A whole ms: s.advance moves TIME from its µs, and PEXPIRETIME
			// would otherwise read the ns it drops as a ms less.
			s.Mini.SetTime(time.UnixMilli(time.Now().UnixMilli()))
		}
		ctx, e := ctxT(t), engine(s, WithActivityTTL(ttl))
		later, forever := engine(s, WithActivityTTL(time.Hour)), engine(s)
		expireAt := func(key string) int64 {
			t.Helper()
			ms, err := redis.Int64(s.Do("PEXPIRETIME", key))
			if err != nil {
				t.Fatalf("PEXPIRETIME %s: %v", key, err)
			}
			return ms
		}
		index := s.NS + "bitindex:{ttl}:p"
		shard := func(n int) string { return s.NS + "bits:{ttl:" + strconv.Itoa(n) + "}:p" }

		before := serverMs(s, t)
		if err := e.MarkActive(ctx, "ttl", "p", 1); err != nil {
			t.Fatal(err)
		}
		after := serverMs(s, t)
		deadline := expireAt(index)
		if deadline < before+ttl.Milliseconds() || deadline > after+ttl.Milliseconds() {
			t.Fatalf("the index expires at %d, want the first mark's time + %v, in [%d, %d]", deadline, ttl, before+ttl.Milliseconds(), after+ttl.Milliseconds())
		}

		s.Advance(step)
		marks := []struct {
			e  *Engine
			id int64
		}{{e, 2}, {e, activeShardIDs}, {later, 2 * activeShardIDs}, {forever, 3*activeShardIDs + 5}, {forever, 1}}
		for _, m := range marks {
			if err := m.e.MarkActive(ctx, "ttl", "p", m.id); err != nil {
				t.Fatal(err)
			}
		}
		if err := later.MarkActiveMany(ctx, "ttl", "p", 4*activeShardIDs, 5*activeShardIDs, 3); err != nil {
			t.Fatal(err)
		}
		dense := make([]int64, 300) // a batch that goes as one BITOP, into a new shard
		for i := range dense {
			dense[i] = 6*activeShardIDs + int64(i)
		}
		if err := forever.MarkActiveMany(ctx, "ttl", "p", dense...); err != nil {
			t.Fatal(err)
		}
		if err := e.MarkActive(ctx, "ttl", "q", 1); err != nil { // another period: a deadline of its own
			t.Fatal(err)
		}
		for _, k := range []string{index, shard(0), shard(1), shard(2), shard(3), shard(4), shard(5), shard(6)} {
			if got := expireAt(k); got != deadline {
				t.Errorf("%s expires at %d, want the period's deadline %d (%+d ms)", k, got, deadline, got-deadline)
			}
		}
		if q := expireAt(s.NS + "bitindex:{ttl}:q"); q < deadline+step.Milliseconds() {
			t.Errorf("period q expires at %d, want its own first mark's time + %v (after %d)", q, ttl, deadline+step.Milliseconds())
		}
		if n, err := e.CountActive(ctx, "ttl", "p"); n != 308 || err != nil {
			t.Errorf("CountActive before the deadline = %d, %v; want 308", n, err)
		}

		s.Advance(ttl - step + 50*time.Millisecond)
		for _, k := range s.Keys(t) {
			if strings.Contains(k, "}:p") {
				t.Errorf("%s outlived the period's deadline", k)
			}
		}
		if n, err := e.CountActive(ctx, "ttl", "p"); n != 0 || err != nil {
			t.Errorf("CountActive after the deadline = %d, %v; want 0", n, err)
		}
		// The engine remembers shard 0 as indexed; the period starts anew,
		// with a new deadline for its index and its shard alike.
		if err := e.MarkActive(ctx, "ttl", "p", 9); err != nil {
			t.Fatal(err)
		}
		extended := expireAt(index)
		if extended <= deadline || expireAt(shard(0)) != extended {
			t.Errorf("after the deadline: index expires at %d, shard 0 at %d; want one new deadline after %d", extended, expireAt(shard(0)), deadline)
		}
		if n, err := e.CountActive(ctx, "ttl", "p"); n != 1 || err != nil {
			t.Errorf("CountActive of the new period = %d, %v; want 1", n, err)
		}
	})
}

func TestActivityTTLOption(t *testing.T) {
	s := testserver.Mini(t)
	for _, d := range []time.Duration{-time.Second, time.Microsecond} {
		if err := New(s.Pool, WithActivityTTL(d)).MarkActive(ctxT(t), "g", "p", 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("WithActivityTTL(%v): %v, want ErrInvalid", d, err)
		}
	}
	if ks := s.Keys(t); len(ks) != 0 {
		t.Errorf("keys written: %q", ks)
	}
}

// MarkActiveMany's dense batches (one BITOP a shard) and sparse ones (a
// SETBIT an id) against an oracle, over bits marked before, at both ends of
// shards near and far, by an engine that has indexed the shards and by one
// that has not.
func TestActivityMarkManyDense(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e, fresh := ctxT(t), engine(s), engine(s)
		r := rand.New(rand.NewPCG(5, 5))
		marked := map[int64]bool{}
		mark := func(e *Engine, ids []int64) {
			t.Helper()
			if err := e.MarkActiveMany(ctx, "dense", "p", ids...); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				marked[id] = true
			}
		}
		mark(e, []int64{3, 4095, MaxActiveID, activeShardIDs + 17})
		batch := func(base, span int64, n int) []int64 {
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = base + r.Int64N(span)
			}
			return ids
		}
		mark(e, batch(0, 4096, 600))                                     // dense, over bits set before
		mark(fresh, batch(MaxActiveID-8191, 8192, 400))                  // dense, at the last shard's top, by an engine that did not index it
		mark(e, append(batch(5*activeShardIDs, activeShardIDs, 300), 7)) // 300 spread over a shard: sparse; and one more in shard 0
		mark(fresh, batch(9*activeShardIDs+1000, 2000, 256))             // dense at the threshold, in a shard new to the period
		if n, err := e.CountActive(ctx, "dense", "p"); n != int64(len(marked)) || err != nil {
			t.Errorf("CountActive = %d, %v; want %d", n, err, len(marked))
		}
		for i := 0; i < 40; i++ {
			id := []int64{r.Int64N(4200), MaxActiveID - r.Int64N(9000), 9*activeShardIDs + 990 + r.Int64N(2020)}[i%3]
			if got, err := e.IsActive(ctx, "dense", "p", id); got != marked[id] || err != nil {
				t.Errorf("IsActive(%d) = %v, %v; want %v", id, got, err, marked[id])
			}
		}
		if ks := s.Keys(t); len(ks) != 6 { // the index and shards 0, 1, 5, 9 and the last
			t.Errorf("keys %q: want the index and 5 shards, no scratch key", ks)
		}
	})
}

// The scripts that make a shard make it whole: their last bit is the
// engine's last offset in a shard.
func TestActivityShardSizeInScripts(t *testing.T) {
	for _, name := range []string{"bits_mark", "bits_merge"} {
		src, _ := scriptFS.ReadFile("scripts/" + name + ".lua")
		if want := "'SETBIT', KEYS[1], " + strconv.Itoa(activeShardIDs-1) + ", 0)"; !strings.Contains(string(src), want) {
			t.Errorf("%s does not make a new shard whole with %s", name, want)
		}
	}
}

// Counts over more periods than one BITOP takes (16): every period counts,
// the 17th too.
func TestActivityManyPeriodsChunked(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		var periods []string
		for i := 1; i <= 33; i++ {
			p := "d" + strconv.Itoa(i)
			periods = append(periods, p)
			ids := []int64{7} // in every period
			// Each of 9 to 13 is missing from one period at the edge of a
			// BITOP's 16 keys: 16 | 17 ... 31 | 32 33.
			for id, missing := range map[int64]int{9: 16, 10: 17, 11: 31, 12: 32, 13: 33} {
				if i != missing {
					ids = append(ids, id)
				}
			}
			if i == 33 {
				ids = append(ids, 8, activeShardIDs+8) // in the last only, one in another shard
			}
			if err := e.MarkActiveMany(ctx, "chunks", p, ids...); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := e.CountActiveAll(ctx, "chunks", periods...); n != 1 || err != nil {
			t.Errorf("CountActiveAll over 33 periods = %d, %v; want 1", n, err)
		}
		if n, err := e.CountActive(ctx, "chunks", periods...); n != 8 || err != nil {
			t.Errorf("CountActive over 33 periods = %d, %v; want 8", n, err)
		}
	})
}
