package atomicredis

// The servers the tests run on (internal/testserver, which documents the
// environment variables), each with an engine in the test's namespace.

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// server is one Redis the tests run against: miniredis, the server named
// by REDIS_ADDR, a cluster-enabled node (REDIS_CLUSTER_ADDR), a multi-node
// cluster (REDIS_CLUSTER_ADDRS) or a private redis-server. Each test gets
// its own key namespace, so tests on a shared real server never see each
// other's keys.
type server struct {
	t    testing.TB // closes the test's engines when it ends
	ts   *testserver.Server
	name string
	mini *miniredis.Miniredis // nil on a real server
	pool *redis.Pool          // the test's own commands
	ns   string
	addr string // what pool dials; "" on a multi-node cluster

	cluster Pool // on a multi-node cluster, the engines' pool (testcluster)
}

// wrap gives a testserver.Server the names the tests use; the fields are
// copies, set once.
func wrap(t testing.TB, ts *testserver.Server) *server {
	s := &server{t: t, ts: ts, name: ts.Name, mini: ts.Mini, pool: ts.Pool, ns: ts.NS, addr: ts.Addr}
	if ts.Engines != nil {
		s.cluster = ts.Engines
	}
	return s
}

// servers runs f once on miniredis and once more on the real server when
// REDIS_ADDR is set; when it is not, the "redis" subtest says so as a SKIP.
// Likewise "cluster" on the multi-node cluster of REDIS_CLUSTER_ADDRS.
func servers(t *testing.T, f func(t *testing.T, s *server)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { f(t, newMini(t)) })
	t.Run("redis", func(t *testing.T) {
		addr := testserver.RedisAddr()
		if addr == "" {
			t.Skip("REDIS_ADDR not set: real-server run skipped")
		}
		f(t, newReal(t, "redis", addr))
	})
	t.Run("cluster", func(t *testing.T) { f(t, clusterServer(t)) })
}

func newMini(t testing.TB) *server { return wrap(t, testserver.Mini(t)) }

func newReal(t testing.TB, name, addr string) *server { return wrap(t, testserver.Real(t, name, addr)) }

// privateServer is a redis-server of the test's own, for tests that change
// its configuration or stop it, which a shared server must never see. It
// skips the test when no redis-server is on PATH.
func privateServer(t *testing.T, name string) *server {
	t.Helper()
	return wrap(t, testserver.On(t, name, testserver.PrivateRedis(t).Addr()))
}

// clusterServer is the multi-node cluster's server (REDIS_CLUSTER_ADDRS),
// or a skip saying why not: the variable is unset, or the test is one that
// cannot run on a multi-node cluster (notOnCluster).
func clusterServer(t *testing.T) *server {
	t.Helper()
	seeds := testserver.ClusterSeeds()
	if len(seeds) == 0 {
		t.Skip("REDIS_CLUSTER_ADDRS not set: multi-node cluster run skipped")
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if why, ok := notOnCluster[top]; ok {
		t.Skip("not on a multi-node cluster: " + why)
	}
	return wrap(t, testcluster.New(t, seeds))
}

// notOnCluster are the behavioural tests that cannot run on a multi-node
// cluster, and why. The cluster's own faults are TestFailoverKill and
// TestFailoverStall.
var notOnCluster = map[string]string{
	"TestMutualExclusionUnderFaults":  proxied,
	"TestAdmissionUnderFaults":        proxied,
	"TestRWUnderFaults":               proxied,
	"TestExtendBeatsLateExtension":    proxied,
	"TestEngineClose":                 proxied,
	"TestNoLostWakeup":                proxied,
	"TestBookFairSemaphoreOverAdmits": proxied,
	"TestBookLockCutBeforeExpire":     proxied,
	"TestBookRefreshRevives":          proxied,
	"TestUnlockRetriesACutConnection": proxied,
	"TestBoundedPoolNoDeadlock":       ownPool,
	"TestRWDeadReader":                ownPool,
}

const (
	proxied = "its fault proxy fronts one server address"
	ownPool = "it dials its own pool to one server address"
)

// serverAddr is the address the server's pool dials ("" on a multi-node
// cluster), for a proxy or a pool of the test's own.
func serverAddr(s *server) string { return s.addr }

func newPool(t testing.TB, addr string) *redis.Pool { return testserver.NewPool(t, addr) }

func testNamespace() string { return testserver.Namespace() }

// engine returns an Engine on s with the test's namespace, closed when
// the test ends.
func (s *server) engine(opts ...Option) *Engine {
	var pool Pool = s.pool
	if s.cluster != nil {
		pool = s.cluster
	}
	e := New(pool, append([]Option{WithNamespace(s.ns)}, opts...)...)
	s.t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// do runs one command on its own connection.
func (s *server) do(cmd string, args ...any) (any, error) { return s.ts.Do(cmd, args...) }

func (s *server) must(t testing.TB, cmd string, args ...any) any {
	t.Helper()
	return s.ts.Must(t, cmd, args...)
}

// keys lists the test's keys, sorted.
func (s *server) keys(t testing.TB) []string { t.Helper(); return s.ts.Keys(t) }

// pttl is a key's PTTL (-1 ms: no expiry, -2 ms: no key).
func (s *server) pttl(t testing.TB, key string) time.Duration {
	t.Helper()
	v, err := redis.Int64(s.do("PTTL", key))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(v) * time.Millisecond
}

// snapshot is every key of the test with its type and value, to prove
// that a call changed nothing.
func (s *server) snapshot(t testing.TB) map[string]string { t.Helper(); return s.ts.Snapshot(t) }

// advance moves time forward by d: miniredis's clocks jump, a real server
// is waited on.
func (s *server) advance(d time.Duration) { s.ts.Advance(d) }

// serverMicros is the server's clock in microseconds (TIME).
func (s *server) serverMicros(t testing.TB) int64 {
	t.Helper()
	v, err := redis.Int64s(s.do("TIME"))
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v, %v", v, err)
	}
	return v[0]*1e6 + v[1]
}

// realtime makes miniredis's clocks follow the wall clock until the test
// ends, for tests of goroutines that pace themselves in real time (the
// watchdog, waiters). A real server needs nothing.
func (s *server) realtime(t testing.TB) { s.ts.Realtime(t) }

func ctxT(t testing.TB) context.Context { return testserver.Context(t) }

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

func sameStrings(a, b []string) bool { return slices.Equal(a, b) }

func splitLines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }
