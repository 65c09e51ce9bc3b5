package atomicredis

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

// server is one Redis the tests run against: miniredis, or the real server
// named by REDIS_ADDR (or REDIS_CLUSTER_ADDR). Each test gets its own key
// namespace, so tests on a shared real server never see each other's keys.
type server struct {
	name string
	mini *miniredis.Miniredis // nil on a real server
	pool *redis.Pool          // the test's own commands
	ns   string

	cluster Pool // on a multi-node cluster, the engines' pool (see newClusterServer)
}

// servers runs f once on miniredis and once more on the real server when
// REDIS_ADDR is set; when it is not, the "redis" subtest says so as a SKIP.
// Likewise "cluster" on the multi-node cluster of REDIS_CLUSTER_ADDRS.
func servers(t *testing.T, f func(t *testing.T, s *server)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { f(t, newMini(t)) })
	t.Run("redis", func(t *testing.T) {
		addr := os.Getenv("REDIS_ADDR")
		if addr == "" {
			t.Skip("REDIS_ADDR not set: real-server run skipped")
		}
		f(t, newReal(t, "redis", addr))
	})
	t.Run("cluster", func(t *testing.T) { f(t, clusterServer(t)) }) // REDIS_CLUSTER_ADDRS
}

func newMini(t testing.TB) *server {
	m := miniredis.RunT(t)
	m.SetTime(time.Now())
	return &server{name: "miniredis", mini: m, pool: newPool(t, m.Addr()), ns: testNamespace()}
}

func newReal(t testing.TB, name, addr string) *server {
	s := &server{name: name, pool: newPool(t, addr), ns: testNamespace()}
	if _, err := s.do("PING"); err != nil {
		t.Fatalf("%s at %s: %v", name, addr, err)
	}
	t.Cleanup(func() {
		for _, k := range s.keys(t) {
			s.do("DEL", k)
		}
	})
	return s
}

func newPool(t testing.TB, addr string) *redis.Pool {
	p := &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr) },
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var nsCounter atomic.Int64

func testNamespace() string {
	return "t" + uuid.NewString()[:8] + "-" + strconv.FormatInt(nsCounter.Add(1), 10) + ":"
}

// engine returns an Engine on s with the test's namespace.
func (s *server) engine(opts ...Option) *Engine {
	var pool Pool = s.pool
	if s.cluster != nil {
		pool = s.cluster
	}
	return New(pool, append([]Option{WithNamespace(s.ns)}, opts...)...)
}

// do runs one command on its own connection.
func (s *server) do(cmd string, args ...any) (any, error) {
	c := s.pool.Get()
	defer c.Close()
	return c.Do(cmd, args...)
}

func (s *server) must(t testing.TB, cmd string, args ...any) any {
	t.Helper()
	v, err := s.do(cmd, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", cmd, args, err)
	}
	return v
}

// keys lists the test's keys, sorted.
func (s *server) keys(t testing.TB) []string {
	t.Helper()
	ks, err := redis.Strings(s.do("KEYS", s.ns+"*"))
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	sort.Strings(ks)
	return ks
}

// snapshot is every key of the test with its type and dumped value, to
// prove that a call changed nothing.
func (s *server) snapshot(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range s.keys(t) {
		typ, _ := redis.String(s.do("TYPE", k))
		var val any
		switch typ {
		case "string":
			val, _ = redis.String(s.do("GET", k))
		case "list":
			val, _ = redis.Strings(s.do("LRANGE", k, 0, -1))
		case "zset":
			val, _ = redis.Strings(s.do("ZRANGE", k, 0, -1, "WITHSCORES"))
		case "set":
			v, _ := redis.Strings(s.do("SMEMBERS", k))
			sort.Strings(v)
			val = v
		case "hash":
			val, _ = redis.StringMap(s.do("HGETALL", k))
		}
		out[k] = typ + "=" + fmt.Sprintf("%q", val)
	}
	return out
}

// advance moves time forward by d: on miniredis both the TTL clock
// (FastForward) and TIME (SetTime) jump at once; a real server is waited on.
func (s *server) advance(d time.Duration) {
	if s.mini == nil {
		time.Sleep(d)
		return
	}
	s.mini.FastForward(d)
	s.mini.SetTime(s.miniNow().Add(d))
}

func (s *server) miniNow() time.Time {
	v, _ := redis.Int64s(s.do("TIME"))
	return time.Unix(v[0], v[1]*1000)
}

// realtime makes miniredis's clocks follow the wall clock until the test
// ends, for tests of goroutines that pace themselves in real time (the
// watchdog, waiters). A real server needs nothing.
func (s *server) realtime(t testing.TB) {
	if s.mini == nil {
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := time.Now()
		s.mini.SetTime(last)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				s.mini.FastForward(now.Sub(last))
				s.mini.SetTime(now)
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var keysRE = regexp.MustCompile(`KEYS\[(\d+)\]`)

// maxKeyIndex is the highest KEYS[n] a script mentions.
func maxKeyIndex(src string) int {
	n := 0
	for _, m := range keysRE.FindAllStringSubmatch(src, -1) {
		if v, _ := strconv.Atoi(m[1]); v > n {
			n = v
		}
	}
	return n
}

func sameStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

func splitLines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }

func cutPrefix(s, prefix string) (string, bool) { return strings.CutPrefix(s, prefix) }
