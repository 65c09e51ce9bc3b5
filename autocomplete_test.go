package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func TestRecentDefaultCapacity(t *testing.T) {
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
func TestRecentMemoryUsage(t *testing.T) {
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

func TestSuggestOracle(t *testing.T) {
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
func TestSuggestConcurrent(t *testing.T) {
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

func uniqueSorted(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range in {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func TestActivityManyPeriods(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		// One script reads 2,500 indexes: on miniredis under -race on a busy
		// machine that can take longer than the default call timeout.
		ctx, e := ctxT(t), engine(s, WithCallTimeout(30*time.Second))
		var periods []string
		for i := 0; i < 2500; i++ {
			periods = append(periods, "p"+strings.Repeat("x", i%7)+string(rune('0'+i%10))+string(rune('a'+i/10%26))+string(rune('A'+i/260)))
		}
		periods = uniqueSorted(periods)
		for i, p := range periods[:40] {
			if err := e.MarkActive(ctx, "many", p, int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.MarkActive(ctx, "many", periods[len(periods)-1], 1000); err != nil {
			t.Fatal(err)
		}
		if n, err := e.CountActive(ctx, "many", periods...); n != 41 || err != nil {
			t.Errorf("CountActive over %d periods = %d, %v; want 41", len(periods), n, err)
		}
		if ks := s.Keys(t); len(ks) != 4*41 {
			t.Errorf("%d keys, want 164: an index, a directory, a bucket and v3's guarded key of shard 0 for each of 41 periods", len(ks))
		}
	})
}

func TestActivityBadID(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	for _, id := range []int64{-1, math.MinInt64, -1 << 62} {
		if err := e.MarkActive(ctx, "g", "p", id); !errors.Is(err, ErrInvalid) {
			t.Errorf("MarkActive id %d: %v", id, err)
		}
		if _, err := e.IsActive(ctx, "g", "p", id); !errors.Is(err, ErrInvalid) {
			t.Errorf("IsActive id %d: %v", id, err)
		}
	}
	if _, err := e.CountActive(ctx, "g"); !errors.Is(err, ErrInvalid) {
		t.Errorf("CountActive with no periods: %v", err)
	}
}
