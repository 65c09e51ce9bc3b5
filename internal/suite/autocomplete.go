package suite

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func recentList(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s, atomicredis.WithRecentCapacity(4))
	for _, item := range []string{"alice", "Bob", "ALBERT", "carol", "alice", "ålborg", "Alfred"} {
		if err := e.AddRecent(ctx, "u1", item); err != nil {
			t.Fatal(err)
		}
	}
	// Newest first, deduplicated, 4 kept: Alfred ålborg alice carol.
	got, err := redis.Strings(s.Do("LRANGE", s.NS+"recent:{u1}", 0, -1))
	if want := []string{"Alfred", "ålborg", "alice", "carol"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("list %q, %v; want %q", got, err, want)
	}
	for _, c := range []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"", 10, []string{"Alfred", "ålborg", "alice", "carol"}},
		{"al", 10, []string{"Alfred", "alice"}},
		{"AL", 10, []string{"Alfred", "alice"}},
		{"aL", 1, []string{"Alfred"}},
		{"", 2, []string{"Alfred", "ålborg"}},
		{"Å", 10, nil}, // ASCII case only: Å and å differ
		{"å", 10, []string{"ålborg"}},
		{"alicex", 10, nil},
		{"c", 10, []string{"carol", "alice"}}, // a prefix match, then one that contains it
		{"b", 10, []string{"ålborg"}},         // Bob fell off the end
		{"LI", 10, []string{"alice"}},
		{"alfred", 10, []string{"Alfred"}},
	} {
		got, err := e.SuggestRecent(ctx, "u1", c.prefix, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("SuggestRecent(%q, %d) = %q, %v; want %q", c.prefix, c.limit, got, err, c.want)
		}
	}
	if err := e.RemoveRecent(ctx, "u1", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveRecent(ctx, "u1", "nobody"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.SuggestRecent(ctx, "u1", "a", 10); err != nil || !slices.Equal(got, []string{"Alfred", "carol"}) {
		t.Errorf("after RemoveRecent: %q, %v", got, err)
	}
	if err := e.AddRecent(ctx, "u1", "carol"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.SuggestRecent(ctx, "u1", "", 10); err != nil || !slices.Equal(got, []string{"carol", "Alfred", "ålborg"}) {
		t.Errorf("after carol again: %q, %v; want carol moved to the front", got, err)
	}
	if got, err := e.SuggestRecent(ctx, "nobody", "a", 10); err != nil || len(got) != 0 {
		t.Errorf("missing list: %q, %v", got, err)
	}
}

// Members of awkward bytes (the book's markers break on '{' and '`'):
// exact prefix matches, in byte order.
func suggestExact(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	members := []string{"", "a", "ab", "abb{", "abc", "abc{", "abd", "ab\xff", "ab\xff\xff", "ac", "b", "\xff", "\xff\xff",
		"{", "`", "\x00", "a\x00", "é", "éa", "z{", "a b", "a\r\n"}
	if err := e.AddMembers(ctx, "g", members...); err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot(t)
	for _, c := range []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"ab", 100, []string{"ab", "abb{", "abc", "abc{", "abd", "ab\xff", "ab\xff\xff"}},
		{"abc", 100, []string{"abc", "abc{"}},
		{"abb{", 100, []string{"abb{"}},
		{"ab\xff", 100, []string{"ab\xff", "ab\xff\xff"}},
		{"\xff", 100, []string{"\xff", "\xff\xff"}},
		{"\xff\xff\xff", 100, nil},
		{"", 3, []string{"", "\x00", "`"}},
		{"a", 2, []string{"a", "a\x00"}},
		{"a", 4, []string{"a", "a\x00", "a\r\n", "a b"}},
		{"{", 100, []string{"{"}},
		{"é", 100, []string{"é", "éa"}},
		{"\x00", 100, []string{"\x00"}},
		{"zz", 100, nil},
	} {
		got, err := e.Suggest(ctx, "g", c.prefix, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Suggest(%q, %d) = %q, %v; want %q", c.prefix, c.limit, got, err, c.want)
		}
	}
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("queries changed the set")
	}
	if err := e.RemoveMembers(ctx, "g", "abc", "nope"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Suggest(ctx, "g", "abc", 10); err != nil || !slices.Equal(got, []string{"abc{"}) {
		t.Errorf("after RemoveMembers: %q, %v", got, err)
	}
	if err := e.AddMembers(ctx, "g"); err != nil {
		t.Errorf("AddMembers with none: %v", err)
	}
	if err := e.RemoveMembers(ctx, "g"); err != nil {
		t.Errorf("RemoveMembers with none: %v", err)
	}
	if got, err := e.Suggest(ctx, "empty", "a", 10); err != nil || len(got) != 0 {
		t.Errorf("missing set: %q, %v", got, err)
	}
}

func activity(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	far := int64(atomicredis.MaxActiveID >> 12) // 2^51 - 1: bit 511 of shard 268,451,841 (8,388,096 ids a shard)
	marks := map[string][]int64{
		"2026-11-19": {1, 5, 9},
		"2026-11-20": {5, 7, far},
		"":           {0}, // the empty period is a period too
		"a{b}:c":     {3},
	}
	for period, ids := range marks {
		for _, id := range ids {
			if err := e.MarkActive(ctx, "daily", period, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		period string
		id     int64
		want   bool
	}{
		{"2026-11-19", 5, true}, {"2026-11-19", 7, false}, {"2026-11-20", far, true}, {"2026-11-20", far - 1, false},
		{"", 0, true}, {"", 1, false}, {"none", 1, false}, {"a{b}:c", 3, true},
	} {
		if got, err := e.IsActive(ctx, "daily", c.period, c.id); got != c.want || err != nil {
			t.Errorf("IsActive(%q, %d) = %v, %v", c.period, c.id, got, err)
		}
	}
	for _, c := range []struct {
		periods  []string
		any, all int64
	}{
		{[]string{"2026-11-19"}, 3, 3},
		{[]string{"2026-11-19", "2026-11-20"}, 5, 1},
		{[]string{"2026-11-19", "2026-11-20", "", "a{b}:c", "missing"}, 7, 0},
		{[]string{"missing"}, 0, 0},
		{[]string{"2026-11-20", "2026-11-20"}, 3, 3},
	} {
		if got, err := e.CountActive(ctx, "daily", c.periods...); got != c.any || err != nil {
			t.Errorf("CountActive(%q) = %d, %v; want %d", c.periods, got, err, c.any)
		}
		if got, err := e.CountActiveAll(ctx, "daily", c.periods...); got != c.all || err != nil {
			t.Errorf("CountActiveAll(%q) = %d, %v; want %d", c.periods, got, err, c.all)
		}
	}
	// One index a period; in a partition a directory and a bucket a period
	// (ids 0 to 9 share one, far is in another); v3's key of shard 0 a
	// period, guarded; no scratch key left.
	var indexes, parts, guards []string
	for _, k := range s.Keys(t) {
		switch {
		case strings.HasPrefix(k, s.NS+"bitindex:{daily}:"):
			indexes = append(indexes, strings.TrimPrefix(k, s.NS))
		case strings.HasPrefix(k, s.NS+"act:{daily:") && !strings.Contains(k, "}~"):
			parts = append(parts, k)
		case strings.HasPrefix(k, s.NS+"bits:{daily:0}:"):
			guards = append(guards, k)
		default:
			t.Errorf("key %q: not an index, a directory or a bucket", k)
		}
	}
	if want := []string{"bitindex:{daily}:", "bitindex:{daily}:2026-11-19", "bitindex:{daily}:2026-11-20", "bitindex:{daily}:a{b}:c"}; !slices.Equal(indexes, want) {
		t.Errorf("indexes %q, want %q", indexes, want)
	}
	if len(parts) != 2*4+2 {
		t.Errorf("partitions' keys %q, want 10: a directory and a bucket for each period, and for far's", parts)
	}
	if len(guards) != 4 {
		t.Errorf("v3's keys %q, want shard 0's for each of 4 periods", guards)
	}
}

// A key of the wrong type at a bucket, at a partition's directory or at a
// period's index: an error carrying the server's reply, and nothing
// changed. (The engine has indexed the partition already: a first mark
// writes the index before the partition, and a partition that then fails
// leaves the index naming it.)
func activityWrongType(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	for _, p := range []string{"a", "p"} {
		if err := e.MarkActive(ctx, "w", p, 3); err != nil {
			t.Fatal(err)
		}
	}
	var bucket, dir string // id 3's, for period p
	for _, k := range s.Keys(t) {
		switch {
		case strings.HasPrefix(k, s.NS+"act:{w:") && strings.HasSuffix(k, "}:p"):
			dir = k
		case strings.HasPrefix(k, s.NS+"act:{w:") && strings.HasSuffix(k, ":p"):
			bucket = k
		}
	}
	index := s.NS + "bitindex:{w}:p"
	if bucket == "" || dir == "" {
		t.Fatalf("keys %q: no bucket or directory for period p", s.Keys(t))
	}
	dense := make([]int64, 300)
	for i := range dense {
		dense[i] = int64(i)
	}
	for _, c := range []struct {
		name, key string
		run       func() error
	}{
		{"MarkActive, the bucket a list", bucket, func() error { return e.MarkActive(ctx, "w", "p", 1) }},
		{"MarkActiveMany, the bucket a list", bucket, func() error { return e.MarkActiveMany(ctx, "w", "p", 1, 2) }},
		{"MarkActiveMany (many), the bucket a list", bucket, func() error { return e.MarkActiveMany(ctx, "w", "p", dense...) }},
		{"IsActive, the bucket a list", bucket, func() error { _, err := e.IsActive(ctx, "w", "p", 1); return err }},
		{"CountActive, the bucket a list", bucket, func() error { _, err := e.CountActive(ctx, "w", "p"); return err }},
		{"CountActive, a later period's bucket a list", bucket, func() error { _, err := e.CountActive(ctx, "w", "a", "p"); return err }},
		{"CountActiveAll, a later period's bucket a list", bucket, func() error { _, err := e.CountActiveAll(ctx, "w", "a", "p"); return err }},
		{"MarkActive, the directory a list", dir, func() error { return e.MarkActive(ctx, "w", "p", 1) }},
		{"IsActive, the directory a list", dir, func() error { _, err := e.IsActive(ctx, "w", "p", 1); return err }},
		{"CountActive, the directory a list", dir, func() error { _, err := e.CountActive(ctx, "w", "a", "p"); return err }},
		{"MarkActive by a new engine, the index a list", index, func() error { return engine(s).MarkActive(ctx, "w", "p", 1<<23) }},
		{"CountActive, the index a list", index, func() error { _, err := e.CountActive(ctx, "w", "a", "p"); return err }},
	} {
		kept := c.key + "#" // same slot
		s.Must(t, "RENAME", c.key, kept)
		s.Must(t, "RPUSH", c.key, "x", "y\xff")
		wantWrongType(t, s, c.name, c.run)
		s.Must(t, "DEL", c.key)
		s.Must(t, "RENAME", kept, c.key)
	}
}
