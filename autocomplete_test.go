package atomicredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func TestAutocomplete_RecentDefaultCapacity(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		for i := 0; i < 150; i++ {
			if err := e.AddRecent(ctx, "cap", "name"+string(rune('A'+i%26))+strings.Repeat("x", i/26)); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := redis.Int(s.Do("LLEN", s.NS+"recent:{cap}")); n != 100 {
			t.Errorf("LLEN %d, want the default 100", n)
		}
	})
}

// On a real server, the memory the book chose lists to save: 100 names of
// ten bytes. The figure goes in the README.
func TestAutocomplete_RecentMemoryUsage(t *testing.T) {
	addr := testserver.RedisAddr()
	if addr == "" {
		t.Skip("REDIS_ADDR not set: MEMORY USAGE is measured on a real server")
	}
	s := testserver.Real(t, "redis", addr)
	ctx, e := ctxT(t), engine(s)
	for i := 0; i < 100; i++ {
		if err := e.AddRecent(ctx, "mem", "contact"+string(rune('0'+i/10))+string(rune('0'+i%10))+"x"); err != nil {
			t.Fatal(err)
		}
	}
	n, err := redis.Int(s.Do("MEMORY", "USAGE", s.NS+"recent:{mem}", "SAMPLES", 0))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := redis.String(s.Do("OBJECT", "ENCODING", s.NS+"recent:{mem}"))
	t.Logf("MEMORY USAGE of a recent list of 100 ten-byte names: %d bytes (%s encoding)", n, enc)
	if n <= 1000 || n > 100*100 {
		t.Errorf("%d bytes for 1000 bytes of names", n)
	}
}

// oracle is what Suggest must return: the sorted members starting with
// prefix, at most limit.
func oracle(sorted []string, prefix string, limit int) []string {
	i := sort.SearchStrings(sorted, prefix)
	var out []string
	for ; i < len(sorted) && strings.HasPrefix(sorted[i], prefix) && len(out) < limit; i++ {
		out = append(out, sorted[i])
	}
	return out
}

// awkward is an alphabet of the bytes that break the book's markers.
var awkward = []string{"a", "b", "z", "{", "`", "\x00", "\xff", "é", "A", "|"}

func randomMember(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(5); n > 0; n-- {
		b.WriteString(awkward[r.IntN(len(awkward))])
	}
	return b.String()
}

func TestAutocomplete_SuggestOracle(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		r := rand.New(rand.NewPCG(1, 2))
		set := map[string]bool{}
		// The book's own markers as members: a query must not remove them.
		for _, m := range []string{"abb{", "ab{", "a{", "{", "`", "ab`{"} {
			set[m] = true
		}
		for len(set) < 400 {
			set[randomMember(r)] = true
		}
		var sorted []string
		for m := range set {
			sorted = append(sorted, m)
		}
		sort.Strings(sorted)
		if err := e.AddMembers(ctx, "o", sorted...); err != nil {
			t.Fatal(err)
		}
		key := s.NS + "members:{o}"
		before, err := redis.Strings(s.Do("ZRANGE", key, 0, -1, "WITHSCORES"))
		if err != nil || len(before) != 2*len(sorted) {
			t.Fatalf("ZRANGE WITHSCORES: %d entries, %v", len(before), err)
		}
		queries := 300
		if testing.Short() {
			queries = 100
		}
		for i := 0; i < queries; i++ {
			prefix := randomMember(r)
			if i%3 == 0 { // often a member's own prefix, so results are not all empty
				m := sorted[r.IntN(len(sorted))]
				prefix = m[:r.IntN(len(m)+1)]
			}
			for _, limit := range []int{1, 10, 1000} {
				got, err := e.Suggest(ctx, "o", prefix, limit)
				if want := oracle(sorted, prefix, limit); err != nil || !slices.Equal(got, want) {
					t.Fatalf("Suggest(%q, %d) = %q, %v; want %q", prefix, limit, got, err, want)
				}
			}
		}
		// Every member with its score, not just their number: a query that
		// left a marker behind and removed a member would keep ZCARD.
		after, err := redis.Strings(s.Do("ZRANGE", key, 0, -1, "WITHSCORES"))
		if err != nil || !slices.Equal(after, before) {
			t.Errorf("the set after %d queries: %d entries, %v; first difference: %s", queries*3, len(after), err, firstDiff(before, after))
		}
	})
}

// firstDiff shows where two lists first differ, with an entry either side.
func firstDiff(a, b []string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-1, 0)
	return fmt.Sprintf("at %d: %q -> %q", i, a[from:min(i+2, len(a))], b[from:min(i+2, len(b))])
}

// Readers and writers at once: every result is sorted, matches the prefix,
// and holds every member that was never removed.
func TestAutocomplete_SuggestConcurrent(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s)
		stable := []string{"ab", "ab{", "abb{", "abc", "ab\xff"}
		if err := e.AddMembers(ctx, "c", stable...); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 9))
				for !stop.Load() {
					m := "ab" + randomMember(r) + "#" // never equal to a stable member
					if err := e.AddMembers(ctx, "c", m); err != nil {
						t.Error(err)
						return
					}
					if err := e.RemoveMembers(ctx, "c", m); err != nil {
						t.Error(err)
						return
					}
				}
			}(w)
		}
		reads := 300
		if testing.Short() {
			reads = 100
		}
		for i := 0; i < reads; i++ {
			got, err := e.Suggest(ctx, "c", "ab", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if !sort.StringsAreSorted(got) {
				t.Fatalf("unsorted: %q", got)
			}
			seen := map[string]bool{}
			for _, m := range got {
				seen[m] = true
				if !strings.HasPrefix(m, "ab") {
					t.Fatalf("%q does not start with ab", m)
				}
			}
			for _, m := range stable {
				if !seen[m] {
					t.Fatalf("stable member %q missing from %q", m, got)
				}
			}
		}
		stop.Store(true)
		wg.Wait()
		if got, _ := redis.Strings(s.Do("ZRANGE", s.NS+"members:{c}", 0, -1)); !slices.Equal(got, []string{"ab", "abb{", "abc", "ab{", "ab\xff"}) {
			t.Errorf("set after the run: %q", got)
		}
	})
}

// FuzzSuggest checks Suggest against the oracle on miniredis; go test runs
// the seeds, go test -fuzz FuzzSuggest explores.
func FuzzSuggest(f *testing.F) {
	f.Add("ab\x00abb{\x00abc\x00ab\xff", "ab", 3)
	f.Add("{\x00`\x00\xff\xff\x00", "\xff", 10)
	f.Add("\x00a\x00", "", 1)
	s := testserver.Mini(f)
	e := engine(s)
	f.Fuzz(func(t *testing.T, joined, prefix string, limit int) {
		limit = 1 + abs(limit)%50
		ctx := context.Background()
		key := s.NS + "members:{f}"
		s.Mini.Del(key)
		members := strings.Split(joined, "\x00")
		if err := e.AddMembers(ctx, "f", members...); err != nil {
			t.Fatal(err)
		}
		sorted := uniqueSorted(members)
		got, err := e.Suggest(ctx, "f", prefix, limit)
		if want := oracle(sorted, prefix, limit); err != nil || !slices.Equal(got, want) {
			t.Fatalf("Suggest(%q, %d) over %q = %q, %v; want %q", prefix, limit, sorted, got, err, want)
		}
		if after, _ := redis.Strings(s.Do("ZRANGE", key, 0, -1)); !slices.Equal(after, sorted) {
			t.Fatalf("the query changed the set: %q -> %q", sorted, after)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// majorVersion is the server's major version, from INFO server.
func majorVersion(s *testserver.Server, t testing.TB) int {
	t.Helper()
	text, err := redis.String(s.Do("INFO", "server"))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := testserver.InfoField(text, "redis_version")
	if !ok {
		t.Fatal("INFO server has no redis_version")
	}
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		t.Fatalf("redis_version %q", v)
	}
	return n
}

// At maxmemory under noeviction every write is refused, and Suggest's
// markers are writes; yet Suggest must answer, as ZRANGEBYLEX does: on
// Redis 7 its script carries the allow-oom flag. The markers come and go
// within the script, so the set is unchanged afterwards.
func TestAutocomplete_SuggestAtMaxmemory(t *testing.T) {
	s := privateServer(t, "private redis")
	ctx, e := ctxT(t), engine(s)
	members := []string{"", "a", "ab", "abb{", "abc", "abd", "ab\xff", "b", "\xff", "{"}
	if err := e.AddMembers(ctx, "oom", members...); err != nil {
		t.Fatal(err)
	}
	key := s.NS + "members:{oom}"
	before, _ := redis.Strings(s.Do("ZRANGE", key, 0, -1, "WITHSCORES"))

	limit := limitMemory(s, t, "noeviction", 1<<20)
	n, err := fill(s, t, 0, 10000)
	if !isOOM(err) {
		t.Fatalf("%d filler writes, then %v: want an OOM error", n, err)
	}
	t.Logf("maxmemory %d, used_memory %d after %d filler writes: %v", limit, info(s, t, "used_memory"), n, err)
	if _, err := s.Do("SET", s.NS+"one-more", "x"); !isOOM(err) {
		t.Fatalf("SET at maxmemory: %v, want OOM", err)
	}
	if got, err := redis.Strings(s.Do("ZRANGEBYLEX", key, "[ab", "(ac")); err != nil || !slices.Equal(got, []string{"ab", "abb{", "abc", "abd", "ab\xff"}) {
		t.Errorf("ZRANGEBYLEX at maxmemory: %q, %v", got, err)
	}

	// The plain script, the only one before Redis 7, is refused at its
	// first marker.
	c := s.Pool.Get()
	_, err = scriptSuggest.Do(c, key, "ab", 10)
	c.Close()
	if !isOOM(err) {
		t.Errorf("the plain suggest script at maxmemory: %v, want OOM", err)
	}

	flagged := majorVersion(s, t) >= 7
	sorted := uniqueSorted(members)
	for _, c := range []struct {
		prefix string
		limit  int
	}{{"ab", 10}, {"ab", 2}, {"abc", 10}, {"abz", 10}, {"", 3}, {"\xff", 10}, {"\xff\xff", 10}, {"{", 5}} {
		got, err := e.Suggest(ctx, "oom", c.prefix, c.limit)
		want := oracle(sorted, c.prefix, c.limit)
		switch {
		case !flagged && c.prefix != "": // no markers for the empty prefix
			if !isOOM(err) {
				t.Errorf("Suggest(%q, %d) at maxmemory before Redis 7 = %q, %v; want OOM", c.prefix, c.limit, got, err)
			}
		case err != nil || !slices.Equal(got, want):
			t.Errorf("Suggest(%q, %d) at maxmemory = %q, %v; want %q", c.prefix, c.limit, got, err, want)
		}
	}
	if e.plainSuggest.Load() == flagged {
		t.Errorf("Redis %d: the engine fell back to the plain script: %v", majorVersion(s, t), e.plainSuggest.Load())
	}
	if after, _ := redis.Strings(s.Do("ZRANGE", key, 0, -1, "WITHSCORES")); !slices.Equal(after, before) {
		t.Errorf("Suggest at maxmemory changed the set: %q -> %q", before, after)
	}
	if _, err := s.Do("SET", s.NS+"one-more", "x"); !isOOM(err) {
		t.Errorf("SET after the queries: %v, want OOM still", err)
	}
}

// Where the server refuses the allow-oom shebang (miniredis here, Redis
// before 7), Suggest falls back to the plain script, once per engine, even
// when the first queries race; elsewhere it keeps the flagged one, and no
// other error (WRONGTYPE) makes it fall back.
func TestAutocomplete_SuggestShebangFallback(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		wantPlain := s.Mini != nil || majorVersion(s, t) < 7
		s.Must(t, "RPUSH", s.NS+"members:{list}", "x")
		if _, err := e.Suggest(ctx, "list", "x", 1); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Suggest on a list: %v, want WRONGTYPE", err)
		}
		if got := e.plainSuggest.Load(); got != wantPlain {
			t.Errorf("%s: after a WRONGTYPE query plainSuggest = %v, want %v", s.Name, got, wantPlain)
		}

		e = engine(s)
		if err := e.AddMembers(ctx, "f", "ab", "abc", "b"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := e.Suggest(ctx, "f", "ab", 10)
				if err != nil || !slices.Equal(got, []string{"ab", "abc"}) {
					t.Errorf("Suggest = %q, %v", got, err)
				}
			}()
		}
		wg.Wait()
		if got := e.plainSuggest.Load(); got != wantPlain {
			t.Errorf("%s: plainSuggest = %v, want %v", s.Name, got, wantPlain)
		}
		if got, err := e.Suggest(ctx, "f", "b", 10); err != nil || !slices.Equal(got, []string{"b"}) {
			t.Errorf("a later Suggest = %q, %v", got, err)
		}
	})
}

// SuggestRecent's tiers (exact, prefix, then suffix and contains
// merged), each most recent first, cut at the limit.
func TestAutocomplete_SuggestRecentTiers(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		// Added oldest first, so the list reads newest first:
		// Salvador AL alba Kalinda Al ALEX al Natalia xyz a.
		for _, item := range []string{"a", "xyz", "Natalia", "al", "ALEX", "Al", "Kalinda", "alba", "AL", "Salvador"} {
			if err := e.AddRecent(ctx, "tiers", item); err != nil {
				t.Fatal(err)
			}
		}
		all := []string{"Salvador", "AL", "alba", "Kalinda", "Al", "ALEX", "al", "Natalia", "xyz", "a"}
		for _, c := range []struct {
			query string
			limit int
			want  []string
		}{
			{"aL", 10, []string{"AL", "Al", "al", "alba", "ALEX", "Salvador", "Kalinda", "Natalia"}},
			{"al", 2, []string{"AL", "Al"}},               // the limit falls inside the exact tier
			{"AL", 4, []string{"AL", "Al", "al", "alba"}}, // ... inside the prefix tier
			{"Al", 6, []string{"AL", "Al", "al", "alba", "ALEX", "Salvador"}},
			{"", 100, all}, // every item starts with the empty query
			{"ALBA", 10, []string{"alba"}},
			{"z", 10, []string{"xyz"}},
			{"x", 10, []string{"xyz", "ALEX"}},
			{"A", 3, []string{"a", "AL", "alba"}}, // one exact match, then the prefix tier from the newest
			{"lind", 10, []string{"Kalinda"}},
			{"nope", 10, nil},
			{"al%", 10, nil}, // Lua pattern characters are plain bytes
			{".", 10, nil},
		} {
			got, err := e.SuggestRecent(ctx, "tiers", c.query, c.limit)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("SuggestRecent(%q, %d) = %q, %v; want %q", c.query, c.limit, got, err, c.want)
			}
		}
	})
}

// foldASCII lowers A-Z only, as the script does.
func foldASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// recentOracle is what SuggestRecent must return for a list read newest
// first.
func recentOracle(list []string, query string, limit int) []string {
	q := foldASCII(query)
	var tiers [3][]string
	for _, item := range list {
		switch f := foldASCII(item); {
		case f == q:
			tiers[0] = append(tiers[0], item)
		case strings.HasPrefix(f, q):
			tiers[1] = append(tiers[1], item)
		case strings.Contains(f, q):
			tiers[2] = append(tiers[2], item)
		}
	}
	out := append(append(tiers[0], tiers[1]...), tiers[2]...)
	return out[:min(limit, len(out))]
}

// recentAlphabet mixes cases, multi-byte letters whose bytes fold to nothing
// (é, Å), and Lua's pattern characters.
var recentAlphabet = []string{"a", "A", "b", "B", "z", "é", "Å", "å", "%", ".", "[", "^", "-", " "}

func randomItem(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	for n := r.IntN(maxLen + 1); n > 0; n-- {
		b.WriteString(recentAlphabet[r.IntN(len(recentAlphabet))])
	}
	return b.String()
}

// SuggestRecent against the oracle over random lists and queries.
func TestAutocomplete_SuggestRecentOracle(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s, WithRecentCapacity(40))
		r := rand.New(rand.NewPCG(19, 1))
		lists, queries := 12, 25
		if testing.Short() {
			lists = 4
		}
		for l := 0; l < lists; l++ {
			name := "o" + string(rune('a'+l))
			for i := 0; i < 60; i++ {
				if item := randomItem(r, 5); item != "" {
					if err := e.AddRecent(ctx, name, item); err != nil {
						t.Fatal(err)
					}
				}
			}
			list, err := redis.Strings(s.Do("LRANGE", s.NS+"recent:{"+name+"}", 0, -1))
			if err != nil {
				t.Fatal(err)
			}
			for q := 0; q < queries; q++ {
				query := randomItem(r, 3)
				if q%3 == 0 { // often a piece of an item, so that tiers fill
					item := list[r.IntN(len(list))]
					i := r.IntN(len(item) + 1)
					query = item[i:min(len(item), i+1+r.IntN(3))]
				}
				for _, limit := range []int{1, 3, 100} {
					got, err := e.SuggestRecent(ctx, name, query, limit)
					if want := recentOracle(list, query, limit); err != nil || !slices.Equal(got, want) {
						t.Fatalf("SuggestRecent(%q, %d) over %q = %q, %v; want %q", query, limit, list, got, err, want)
					}
				}
			}
		}
	})
}
