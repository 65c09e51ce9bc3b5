package atomicredis

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// idsInPart returns n random ids whose place is in partition part.
func idsInPart(r *rand.Rand, part, n int) []int64 {
	var ids []int64
	for len(ids) < n {
		if v := r.Int64(); placeOf(v).part() == part {
			ids = append(ids, v)
		}
	}
	return ids
}

// A count counts every id marked before it began, even when marks split
// the buckets it planned to read, or made their shard dense, between its
// plan and its scripts: the scripts find the keys gone and the engine
// plans those units again (here once, between planPart and runCount).
// (Before, the scripts read the split buckets as empty sets: the review's
// live run had 17 of 40 counts short, by up to 1,850.)
func TestActivityCount_ReplansWhatAMarkChanged(t *testing.T) {
	smallTries(t, 4, 32)
	const shard = 3
	part := placeOf(shard * activeShardIDs).part()
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		obj, err := e.object(kindActivity, "re")
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, 7))
		o := activeOracle{}
		mark := func(p string, ids ...int64) {
			t.Helper()
			o.mark(p, ids...)
			if err := e.MarkActiveMany(ctx, "re", p, ids...); err != nil {
				t.Fatal(err)
			}
		}
		periods := []string{"a", "b"}
		mark("a", shardIDs(shard, 0, 1, 12)...) // buckets of 4 ids at depth 62, in both
		mark("a", idsInPart(r, part, 20)...)
		mark("b", shardIDs(shard, 2, 1, 10)...)
		mark("b", idsInPart(r, part, 10)...)
		union, inter := o.counts(periods)
		plans := map[string][]countJob{}
		for _, op := range []string{"OR", "AND"} {
			if plans[op], err = e.planPart(ctx, obj, op, part, periods, nil, 0); err != nil || len(plans[op]) == 0 {
				t.Fatalf("planPart(%s) = %v, %v", op, plans[op], err)
			}
		}
		mark("a", shardIDs(shard, 100, 1, 40)...) // the shard turns dense in a
		mark("a", idsInPart(r, part, 30)...)      // buckets split
		mark("b", idsInPart(r, part, 30)...)
		mark("b", shardIDs(shard, 2, 3, 9)...)
		unionAfter, interAfter := o.counts(periods)
		for op, want := range map[string][2]int64{"OR": {union, unionAfter}, "AND": {inter, interAfter}} {
			n, err := e.runCount(ctx, obj, op, periods, plans[op])
			if err != nil || n < want[0] || n > want[1] {
				t.Errorf("%s planned before the marks = %d, %v; want %d to %d", op, n, err, want[0], want[1])
			}
		}
		if n, err := e.CountActive(ctx, "re", periods...); n != unionAfter || err != nil {
			t.Errorf("CountActive = %d, %v; want %d", n, err, unionAfter)
		}
		if n, err := e.CountActiveAll(ctx, "re", periods...); n != interAfter || err != nil {
			t.Errorf("CountActiveAll = %d, %v; want %d", n, err, interAfter)
		}
	})
}

// A unit that would take one script past the budget is divided: where one
// period's leaf (a bucket, or a dense shard) holds the range of many of
// another period's buckets, each part counts that leaf in its own range
// (a bucket's members filtered, a bitmap's bits counted in the range, down
// to ranges of one bit). Every script stays within activeBudget, and the
// counts stay exact. (Before, such a unit was one script: 141 ms for
// 300,000 ids beside a period of one bucket.)
func TestActivityCount_DividesABigUnit(t *testing.T) {
	smallTries(t, 4, 32)
	const shard = 5
	part := placeOf(shard * activeShardIDs).part()
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		obj, err := e.object(kindActivity, "big")
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(9, 9))
		o := activeOracle{}
		mark := func(p string, ids ...int64) {
			t.Helper()
			o.mark(p, ids...)
			if err := e.MarkActiveMany(ctx, "big", p, ids...); err != nil {
				t.Fatal(err)
			}
		}
		many := idsInPart(r, part, 1500)
		mark("y", many...)                               // hundreds of buckets
		mark("y", shardIDs(shard, 0, 2, 31)...)          // the shard split in y, ...
		mark("t", many[0], many[700], many[1499], 1<<62) // ... one bucket in t ...
		mark("d", shardIDs(shard, 0, 1, 40)...)          // ... dense in d
		mark("d", many[3])
		inPart := o.in(part)
		for _, ps := range [][]string{{"t", "y"}, {"y", "d"}, {"t", "y", "d"}, {"d", "t"}} {
			union, inter := inPart.counts(ps)
			for op, want := range map[string]int64{"OR": union, "AND": inter} {
				jobs, err := e.planPart(ctx, obj, op, part, ps, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range jobs {
					if j.cost > activeBudget {
						t.Errorf("%s %q: a script of %d µs estimated, over the budget of %d", op, ps, j.cost, activeBudget)
					}
				}
				if n, err := e.runCount(ctx, obj, op, ps, jobs); n != want || err != nil {
					t.Errorf("%s %q in partition %d = %d, %v; want %d", op, ps, part, n, err, want)
				}
			}
		}
		// The whole group (ids of other partitions: 1<<62's) as the engine counts it.
		for _, ps := range [][]string{{"t", "y"}, {"y", "d"}, {"t", "y", "d"}} {
			union, inter := o.counts(ps)
			if n, err := e.CountActive(ctx, "big", ps...); n != union || err != nil {
				t.Errorf("CountActive(%q) = %d, %v; want %d", ps, n, err, union)
			}
			if n, err := e.CountActiveAll(ctx, "big", ps...); n != inter || err != nil {
				t.Errorf("CountActiveAll(%q) = %d, %v; want %d", ps, n, err, inter)
			}
		}
	})
}

// A count of a partition whose set was taken away (evicted, or deleted by
// hand) fails, saying so, rather than counting it as empty: its scripts
// find the key gone, and so do the plans after them.
func TestActivityCount_OfADeletedSet(t *testing.T) {
	smallTries(t, 4, 1<<30)
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		ids := idsInPart(rand.New(rand.NewPCG(3, 3)), 2, 40)
		if err := e.MarkActiveMany(ctx, "gone", "p", ids...); err != nil {
			t.Fatal(err)
		}
		for _, k := range s.Keys(t) {
			if tag, rest, ok := strings.Cut(k, "}"); ok && strings.Contains(tag, "act:{gone:") && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
				s.Must(t, "DEL", k)
				break
			}
		}
		n, err := e.CountActive(ctx, "gone", "p")
		if err == nil || !strings.Contains(err.Error(), "was gone 8 plans in a row") {
			t.Errorf("CountActive with a set deleted = %d, %v; want an error saying a key was gone", n, err)
		}
	})
}

// A count that meets a bucket of the wrong type fails with a WRONGTYPE
// reply, changes no key and leaves no scratch key, wherever the bucket
// lies in its script: after unions of other units (OR), intersections
// (AND), or bitmaps made from buckets (a unit with a dense shard in one
// period).
func TestActivityCount_FailsCleanly(t *testing.T) {
	smallTries(t, 4, 8)
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		r := rand.New(rand.NewPCG(5, 6))
		ids := randomIDs(r, 300)
		for _, p := range []string{"a", "b"} {
			if err := e.MarkActiveMany(ctx, "wt", p, ids...); err != nil {
				t.Fatal(err)
			}
		}
		base := int64(9 * activeShardIDs) // a shard dense in c, sparse in d
		for i := int64(0); i < 8; i++ {
			if err := e.MarkActiveMany(ctx, "wt", "c", base+2*i); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.MarkActiveMany(ctx, "wt", "d", base+1, base+3, base+5, base+7, base+9, base+11, base+13); err != nil {
			t.Fatal(err)
		}
		// In each partition, the bucket of b (or d) that sorts last.
		last := map[string]string{}
		for _, k := range s.Keys(t) {
			tag, rest, ok := strings.Cut(k, "}")
			if ok && strings.Contains(tag, "act:{wt:") && rest != "" && rest[0] >= '0' && rest[0] <= '9' &&
				(strings.HasSuffix(rest, ":b") || strings.HasSuffix(rest, ":d")) && s.Must(t, "TYPE", k) == "set" {
				if key := tag + rest[len(rest)-2:]; k > last[key] {
					last[key] = k
				}
			}
		}
		if len(last) < 8 {
			t.Fatalf("buckets of b and d in %d partitions, want more", len(last))
		}
		for _, k := range last {
			s.Must(t, "DEL", k)
			s.Must(t, "SET", k, "not a set")
		}
		for _, ps := range [][]string{{"a", "b"}, {"c", "d"}} {
			for name, count := range map[string]func(context.Context, string, ...string) (int64, error){"CountActive": e.CountActive, "CountActiveAll": e.CountActiveAll} {
				before := s.Snapshot(t)
				n, err := count(ctx, "wt", ps...)
				var re redis.Error
				if !errors.As(err, &re) || !strings.HasPrefix(string(re), "WRONGTYPE ") {
					t.Errorf("%s(%q) = %d, %v; want a WRONGTYPE reply", name, ps, n, err)
				}
				if after := s.Snapshot(t); !maps.Equal(before, after) {
					t.Errorf("%s(%q): the keys changed:\n%v\n%v", name, ps, before, after)
				}
				for _, k := range s.Keys(t) {
					if strings.Contains(k, "}~") {
						t.Errorf("%s(%q): scratch key %q left behind", name, ps, k)
					}
				}
			}
		}
	})
}

// A count whose unit holds more buckets than Lua's unpack takes at once
// (about 8,000: here 9,000 buckets of one id, one partition, beside a
// period of one bucket) unions them 4,000 keys a command. (Before, OR and
// AND failed with "too many results to unpack"; with 512-id buckets that
// is about 3 million ids in one partition, the seed's scale.)
func TestActivityCount_AHugeUnit(t *testing.T) {
	smallTries(t, 1, 1<<30)
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s, WithCallTimeout(time.Minute)) // 9,000 buckets: miniredis's Lua under -race takes seconds
		r := rand.New(rand.NewPCG(1, 1))
		var ids []int64
		for len(ids) < 9000 {
			if v := r.Int64(); placeOf(v).part() == 0 {
				ids = append(ids, v)
			}
		}
		if err := e.MarkActiveMany(ctx, "huge", "y", ids...); err != nil {
			t.Fatal(err)
		}
		if err := e.MarkActive(ctx, "huge", "t", ids[0]); err != nil {
			t.Fatal(err)
		}
		if n, err := e.CountActive(ctx, "huge", "t", "y"); n != 9000 || err != nil {
			t.Errorf("CountActive(t, y) = %d, %v; want 9000", n, err)
		}
		if n, err := e.CountActiveAll(ctx, "huge", "t", "y"); n != 1 || err != nil {
			t.Errorf("CountActiveAll(t, y) = %d, %v; want 1", n, err)
		}
		if n, err := e.CountActiveAll(ctx, "huge", "y", "y"); n != 9000 || err != nil {
			t.Errorf("CountActiveAll(y, y) = %d, %v; want 9000", n, err)
		}
	})
}
