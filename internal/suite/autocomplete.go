package suite

import (
	"testing"

	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

func recentList(t *testing.T, s *server) {
	ctx, e := ctxT(t), s.engine(atomicredis.WithRecentCapacity(4))
	for _, item := range []string{"alice", "Bob", "ALBERT", "carol", "alice", "ålborg", "Alfred"} {
		if err := e.AddRecent(ctx, "u1", item); err != nil {
			t.Fatal(err)
		}
	}
	// Newest first, deduplicated, 4 kept: Alfred ålborg alice carol.
	got, err := redis.Strings(s.Do("LRANGE", s.ns+"recent:{u1}", 0, -1))
	if want := []string{"Alfred", "ålborg", "alice", "carol"}; err != nil || !sameStrings(got, want) {
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
		{"c", 10, []string{"carol"}},
		{"b", 10, nil}, // Bob fell off the end
	} {
		got, err := e.SuggestRecent(ctx, "u1", c.prefix, c.limit)
		if err != nil || !sameStrings(got, c.want) {
			t.Errorf("SuggestRecent(%q, %d) = %q, %v; want %q", c.prefix, c.limit, got, err, c.want)
		}
	}
	if err := e.RemoveRecent(ctx, "u1", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveRecent(ctx, "u1", "nobody"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.SuggestRecent(ctx, "u1", "a", 10); err != nil || !sameStrings(got, []string{"Alfred"}) {
		t.Errorf("after RemoveRecent: %q, %v", got, err)
	}
	if err := e.AddRecent(ctx, "u1", "carol"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.SuggestRecent(ctx, "u1", "", 10); err != nil || !sameStrings(got, []string{"carol", "Alfred", "ålborg"}) {
		t.Errorf("after carol again: %q, %v; want carol moved to the front", got, err)
	}
	if got, err := e.SuggestRecent(ctx, "nobody", "a", 10); err != nil || len(got) != 0 {
		t.Errorf("missing list: %q, %v", got, err)
	}
}

// Members of awkward bytes (the book's markers break on '{' and '`'):
// exact prefix matches, in byte order.
func suggestExact(t *testing.T, s *server) {
	ctx, e := ctxT(t), s.engine()
	members := []string{"", "a", "ab", "abb{", "abc", "abc{", "abd", "ab\xff", "ab\xff\xff", "ac", "b", "\xff", "\xff\xff",
		"{", "`", "\x00", "a\x00", "é", "éa", "z{", "a b", "a\r\n"}
	if err := e.AddMembers(ctx, "g", members...); err != nil {
		t.Fatal(err)
	}
	before := s.snapshot(t)
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
		if err != nil || !sameStrings(got, c.want) {
			t.Errorf("Suggest(%q, %d) = %q, %v; want %q", c.prefix, c.limit, got, err, c.want)
		}
	}
	if after := s.snapshot(t); !sameMap(before, after) {
		t.Errorf("queries changed the set")
	}
	if err := e.RemoveMembers(ctx, "g", "abc", "nope"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Suggest(ctx, "g", "abc", 10); err != nil || !sameStrings(got, []string{"abc{"}) {
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

func activity(t *testing.T, s *server) {
	ctx, e := ctxT(t), s.engine()
	marks := map[string][]int64{
		"2026-11-19": {1, 5, 9},
		"2026-11-20": {5, 7, atomicredis.MaxActiveID >> 12},
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
		{"2026-11-19", 5, true}, {"2026-11-19", 7, false}, {"2026-11-20", atomicredis.MaxActiveID >> 12, true},
		{"", 0, true}, {"", 1, false}, {"none", 1, false}, {"a{b}:c", 3, true},
	} {
		if got, err := e.IsActive(ctx, "daily", c.period, c.id); got != c.want || err != nil {
			t.Errorf("IsActive(%q, %d) = %v, %v", c.period, c.id, got, err)
		}
	}
	for _, c := range []struct {
		periods []string
		want    int64
	}{
		{[]string{"2026-11-19"}, 3},
		{[]string{"2026-11-19", "2026-11-20"}, 5},
		{[]string{"2026-11-19", "2026-11-20", "", "a{b}:c", "missing"}, 7},
		{[]string{"missing"}, 0},
		{[]string{"2026-11-19", "2026-11-19"}, 3},
	} {
		if got, err := e.CountActive(ctx, "daily", c.periods...); got != c.want || err != nil {
			t.Errorf("CountActive(%q) = %d, %v; want %d", c.periods, got, err, c.want)
		}
	}
	want := []string{s.ns + "active:{daily}:", s.ns + "active:{daily}:2026-11-19", s.ns + "active:{daily}:2026-11-20", s.ns + "active:{daily}:a{b}:c"}
	if got := s.keys(t); !sameStrings(got, want) {
		t.Errorf("keys %q, want %q (one a period, no scratch key left)", got, want)
	}
}
