package atomicredis

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// SuggestRecent's tiers (exact, prefix, then suffix and contains
// merged), each most recent first, cut at the limit.
func TestSuggestRecentTiers(t *testing.T) {
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
func TestSuggestRecentOracle(t *testing.T) {
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
