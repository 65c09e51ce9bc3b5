package atomicredis

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// info reads one integer field of INFO.
func info(s *testserver.Server, t testing.TB, field string) int64 {
	t.Helper()
	text, err := redis.String(s.Do("INFO"))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := testserver.InfoField(text, field)
	if !ok {
		t.Fatalf("INFO has no %s", field)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		t.Fatalf("INFO %s: %q", field, v)
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

// limitMemory sets maxmemory a little above what the server uses now, with
// the given policy, and returns the limit.
func limitMemory(s *testserver.Server, t testing.TB, policy string, headroom int64) int64 {
	t.Helper()
	limit := info(s, t, "used_memory") + headroom
	s.Must(t, "CONFIG", "SET", "maxmemory-policy", policy)
	s.Must(t, "CONFIG", "SET", "maxmemory", limit)
	return limit
}

const fillerSize = 16 << 10

// fill writes filler strings (without TTL) under the test's namespace, from
// number from on, until a write fails or n were written: first of 16 KiB,
// then, once a big one is refused, of 16 bytes, so the server ends up at
// its limit rather than one big value short of it. It returns how many
// writes succeeded and the error that stopped it. The filler is never
// read, so LRU evicts older keys first.
func fill(s *testserver.Server, t testing.TB, from, n int) (int, error) {
	t.Helper()
	c := s.Pool.Get()
	defer c.Close()
	value := strings.Repeat("x", fillerSize)
	written := 0
	for written < n {
		_, err := c.Do("SET", s.NS+"filler:"+strconv.Itoa(from+written), value)
		switch {
		case err == nil:
			written++
		case len(value) == fillerSize && isOOM(err):
			value = value[:16] // top up with small values
		default:
			return written, err
		}
	}
	return written, nil
}

func isOOM(err error) bool { return err != nil && strings.Contains(err.Error(), "OOM") }

// At maxmemory under noeviction every write is refused, and Suggest's
// markers are writes; yet Suggest must answer, as ZRANGEBYLEX does: on
// Redis 7 its script carries the allow-oom flag. The markers come and go
// within the script, so the set is unchanged afterwards.
func TestSuggestAtMaxmemory(t *testing.T) {
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
func TestSuggestShebangFallback(t *testing.T) {
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

// present reports whether key exists, with TYPE, which unlike EXISTS does
// not count as an access: it leaves the key's LRU clock alone.
func present(s *testserver.Server, t testing.TB, key string) bool {
	t.Helper()
	typ, err := redis.String(s.Do("TYPE", key))
	if err != nil {
		t.Fatal(err)
	}
	return typ != "none"
}

// Locks need maxmemory-policy noeviction. Under any other policy Redis may
// evict the lock key (volatile-* policies pick exactly the keys with a TTL,
// and every lock and fence counter has one) and the fence counter too: a
// second holder then takes the lock while the first still holds it. With
// the counter gone the next fence starts from the server's clock, so the
// second holder's fence is still the higher: a resource that checks fences
// turns the first away. Under noeviction the lock survives and the writes
// fail with OOM instead.
func TestEvictionAndLocks(t *testing.T) {
	const maxFiller = 20000 // 320 MB through a 1 MB headroom
	lockKey := func(s *testserver.Server) string { return s.NS + "lock:{job}" }
	fenceKey := func(s *testserver.Server) string { return s.NS + "lock:{job}:fence" }

	t.Run("allkeys-lru", func(t *testing.T) {
		s := privateServer(t, "private redis")
		ctx, e := ctxT(t), engine(s)
		first, err := e.TryLock(ctx, "job", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		limit := limitMemory(s, t, "allkeys-lru", 1<<20)
		written, lockGone, fenceGone := 0, 0, 0
		for written < maxFiller && (lockGone == 0 || fenceGone == 0) {
			n, err := fill(s, t, written, 10)
			written += n
			if err != nil {
				t.Fatalf("filler write %d under allkeys-lru: %v", written, err)
			}
			if lockGone == 0 && !present(s, t, lockKey(s)) {
				lockGone = written
			}
			if fenceGone == 0 && !present(s, t, fenceKey(s)) {
				fenceGone = written
			}
		}
		evicted := info(s, t, "evicted_keys")
		t.Logf("maxmemory %d (used_memory + 1 MiB), %d-byte filler: lock key evicted within %d writes, fence counter within %d; evicted_keys %d",
			limit, fillerSize, lockGone, fenceGone, evicted)
		if lockGone == 0 || fenceGone == 0 || evicted == 0 {
			t.Fatalf("after %d filler writes: lock evicted at %d, fence at %d, evicted_keys %d; want both evicted", written, lockGone, fenceGone, evicted)
		}
		second, err := e.TryLock(ctx, "job", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatalf("TryLock after the eviction: %v", err)
		}
		if second.Fence() <= first.Fence() {
			t.Errorf("fences %d then %d: with the counter evicted the next fence must still be higher (the server's clock)", first.Fence(), second.Fence())
		}
		if held, err := first.Held(ctx); held || err != nil {
			t.Errorf("the first holder's Held = %v, %v; want false (its key was evicted)", held, err)
		}
	})

	t.Run("volatile-lru", func(t *testing.T) {
		s := privateServer(t, "private redis")
		ctx, e := ctxT(t), engine(s)
		first, err := e.TryLock(ctx, "job", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		limitMemory(s, t, "volatile-lru", 1<<20)
		// The filler has no TTL: the lock is the only key the policy may take.
		n, err := fill(s, t, 0, maxFiller)
		if !isOOM(err) {
			t.Fatalf("%d filler writes, then %v: want OOM once nothing with a TTL is left", n, err)
		}
		evicted := info(s, t, "evicted_keys")
		t.Logf("volatile-lru: %d filler writes, then OOM; evicted_keys %d", n, evicted)
		if present(s, t, lockKey(s)) || present(s, t, fenceKey(s)) || evicted != 2 {
			t.Fatalf("lock key present %v, fence counter present %v, evicted_keys %d: want both evicted, and nothing else",
				present(s, t, lockKey(s)), present(s, t, fenceKey(s)), evicted)
		}
		s.Must(t, "DEL", s.NS+"filler:0", s.NS+"filler:1", s.NS+"filler:2", s.NS+"filler:3") // room for one more lock
		second, err := e.TryLock(ctx, "job", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatalf("TryLock after the eviction: %v", err)
		}
		if second.Fence() <= first.Fence() {
			t.Errorf("fences %d then %d: the next fence must be higher", first.Fence(), second.Fence())
		}
		if held, err := first.Held(ctx); held || err != nil {
			t.Errorf("the first holder's Held = %v, %v; want false (its key was evicted)", held, err)
		}
	})

	t.Run("noeviction", func(t *testing.T) {
		s := privateServer(t, "private redis")
		ctx, e := ctxT(t), engine(s)
		first, err := e.TryLock(ctx, "job", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		limitMemory(s, t, "noeviction", 1<<20)
		n, err := fill(s, t, 0, maxFiller)
		if !isOOM(err) {
			t.Fatalf("%d filler writes, then %v: want OOM", n, err)
		}
		t.Logf("noeviction: %d filler writes, then %v; evicted_keys %d", n, err, info(s, t, "evicted_keys"))
		if !present(s, t, lockKey(s)) || !present(s, t, fenceKey(s)) || info(s, t, "evicted_keys") != 0 {
			t.Fatalf("lock key present %v, fence present %v, evicted_keys %d: want nothing evicted",
				present(s, t, lockKey(s)), present(s, t, fenceKey(s)), info(s, t, "evicted_keys"))
		}
		if held, err := first.Held(ctx); !held || err != nil {
			t.Errorf("Held at maxmemory = %v, %v; want true", held, err)
		}
		if _, err := e.TryLock(ctx, "job", LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("a second TryLock at maxmemory: %v, want ErrNotAcquired", err)
		}
		before := s.Keys(t)
		if _, err := e.TryLock(ctx, "other", LockOptions{}); !isOOM(err) {
			t.Errorf("TryLock of a free lock at maxmemory: %v, want OOM", err)
		}
		if after := s.Keys(t); !slices.Equal(before, after) {
			t.Errorf("the refused TryLock changed the keys")
		}
		// Extension needs a write too; how it fares depends on the script.
		t.Logf("Extend at maxmemory: %v", first.Extend(ctx, time.Hour))
		if err := first.Unlock(ctx); err != nil {
			t.Errorf("Unlock at maxmemory: %v (a delete is allowed)", err)
		}
	})
}
