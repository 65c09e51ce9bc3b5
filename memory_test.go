package atomicredis

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gomodule/redigo/redis"
)

// privateRedis starts a redis-server of the test's own, for tests that
// change its configuration (maxmemory), which the shared server must never
// see. It skips the test when no redis-server is on PATH.
func privateRedis(t *testing.T) *server {
	t.Helper()
	path, err := execLookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH: maxmemory tests need a private server")
	}
	addr, stop, err := startRedis(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &server{name: "private redis", pool: newPool(t, addr), ns: testNamespace()}
}

// info reads one integer field of INFO.
func (s *server) info(t testing.TB, field string) int64 {
	t.Helper()
	text, err := redis.String(s.do("INFO"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range splitLines(text) {
		if v, ok := cutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO has no %s", field)
	return 0
}

// majorVersion is the server's major version, from INFO server.
func (s *server) majorVersion(t testing.TB) int {
	t.Helper()
	text, err := redis.String(s.do("INFO", "server"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range splitLines(text) {
		if v, ok := cutPrefix(line, "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			n, err := strconv.Atoi(major)
			if err != nil {
				t.Fatalf("redis_version %q", v)
			}
			return n
		}
	}
	t.Fatal("INFO server has no redis_version")
	return 0
}

// limitMemory sets maxmemory a little above what the server uses now, with
// the given policy, and returns the limit.
func (s *server) limitMemory(t testing.TB, policy string, headroom int64) int64 {
	t.Helper()
	limit := s.info(t, "used_memory") + headroom
	s.must(t, "CONFIG", "SET", "maxmemory-policy", policy)
	s.must(t, "CONFIG", "SET", "maxmemory", limit)
	return limit
}

const fillerSize = 16 << 10

// fill writes filler strings (without TTL) under the test's namespace, from
// number from on, until a write fails or n were written: first of 16 KiB,
// then, once a big one is refused, of 16 bytes, so the server ends up at
// its limit rather than one big value short of it. It returns how many
// writes succeeded and the error that stopped it. The filler is never
// read, so LRU evicts older keys first.
func (s *server) fill(t testing.TB, from, n int) (int, error) {
	t.Helper()
	c := s.pool.Get()
	defer c.Close()
	value := strings.Repeat("x", fillerSize)
	var err error
	for i := 0; i < n; i++ {
		if _, err = c.Do("SET", s.ns+"filler:"+strconv.Itoa(from+i), value); err != nil {
			if len(value) == fillerSize && isOOM(err) {
				value = value[:16] // top up with small values
				continue
			}
			return i, err
		}
	}
	return n, nil
}

func isOOM(err error) bool { return err != nil && strings.Contains(err.Error(), "OOM") }

// At maxmemory under noeviction every write is refused, and Suggest's
// markers are writes; yet Suggest must answer, as ZRANGEBYLEX does: on
// Redis 7 its script carries the allow-oom flag. The markers come and go
// within the script, so the set is unchanged afterwards.
func TestSuggestAtMaxmemory(t *testing.T) {
	s := privateRedis(t)
	ctx, e := ctxT(t), s.engine()
	members := []string{"", "a", "ab", "abb{", "abc", "abd", "ab\xff", "b", "\xff", "{"}
	if err := e.AddMembers(ctx, "oom", members...); err != nil {
		t.Fatal(err)
	}
	key := s.ns + "members:{oom}"
	before, _ := redis.Strings(s.do("ZRANGE", key, 0, -1, "WITHSCORES"))

	limit := s.limitMemory(t, "noeviction", 1<<20)
	n, err := s.fill(t, 0, 10000)
	if !isOOM(err) {
		t.Fatalf("%d filler writes, then %v: want an OOM error", n, err)
	}
	t.Logf("maxmemory %d, used_memory %d after %d filler writes: %v", limit, s.info(t, "used_memory"), n, err)
	if _, err := s.do("SET", s.ns+"one-more", "x"); !isOOM(err) {
		t.Fatalf("SET at maxmemory: %v, want OOM", err)
	}
	if got, err := redis.Strings(s.do("ZRANGEBYLEX", key, "[ab", "(ac")); err != nil || !sameStrings(got, []string{"ab", "abb{", "abc", "abd", "ab\xff"}) {
		t.Errorf("ZRANGEBYLEX at maxmemory: %q, %v", got, err)
	}

	// The plain script, the only one before Redis 7, is refused at its
	// first marker.
	c := s.pool.Get()
	_, err = scriptSuggest.Do(c, key, "ab", 10)
	c.Close()
	if !isOOM(err) {
		t.Errorf("the plain suggest script at maxmemory: %v, want OOM", err)
	}

	flagged := s.majorVersion(t) >= 7
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
		case err != nil || !sameStrings(got, want):
			t.Errorf("Suggest(%q, %d) at maxmemory = %q, %v; want %q", c.prefix, c.limit, got, err, want)
		}
	}
	if e.plainSuggest.Load() == flagged {
		t.Errorf("Redis %d: the engine fell back to the plain script: %v", s.majorVersion(t), e.plainSuggest.Load())
	}
	if after, _ := redis.Strings(s.do("ZRANGE", key, 0, -1, "WITHSCORES")); !sameStrings(after, before) {
		t.Errorf("Suggest at maxmemory changed the set: %q -> %q", before, after)
	}
	if _, err := s.do("SET", s.ns+"one-more", "x"); !isOOM(err) {
		t.Errorf("SET after the queries: %v, want OOM still", err)
	}
}

// Where the server refuses the allow-oom shebang (miniredis here, Redis
// before 7), Suggest falls back to the plain script, once per engine, even
// when the first queries race; elsewhere it keeps the flagged one, and no
// other error (WRONGTYPE) makes it fall back.
func TestSuggestShebangFallback(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		wantPlain := s.mini != nil || s.majorVersion(t) < 7
		s.must(t, "RPUSH", s.ns+"members:{list}", "x")
		if _, err := e.Suggest(ctx, "list", "x", 1); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Suggest on a list: %v, want WRONGTYPE", err)
		}
		if got := e.plainSuggest.Load(); got != wantPlain {
			t.Errorf("%s: after a WRONGTYPE query plainSuggest = %v, want %v", s.name, got, wantPlain)
		}

		e = s.engine()
		if err := e.AddMembers(ctx, "f", "ab", "abc", "b"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := e.Suggest(ctx, "f", "ab", 10)
				if err != nil || !sameStrings(got, []string{"ab", "abc"}) {
					t.Errorf("Suggest = %q, %v", got, err)
				}
			}()
		}
		wg.Wait()
		if got := e.plainSuggest.Load(); got != wantPlain {
			t.Errorf("%s: plainSuggest = %v, want %v", s.name, got, wantPlain)
		}
		if got, err := e.Suggest(ctx, "f", "b", 10); err != nil || !sameStrings(got, []string{"b"}) {
			t.Errorf("a later Suggest = %q, %v", got, err)
		}
	})
}
