package atomicredis

// The servers the tests run on (internal/testserver, which documents the
// environment variables), each with an engine in the test's namespace.

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// servers runs f once on miniredis and once more on the real server when
// REDIS_ADDR is set; when it is not, the "redis" subtest says so as a SKIP.
// Likewise "cluster" on the multi-node cluster of REDIS_CLUSTER_ADDRS.
// Each server is one Redis with a key namespace of the test's own, so
// tests on a shared real server never see each other's keys.
func servers(t *testing.T, f func(t *testing.T, s *testserver.Server)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { f(t, testserver.Mini(t)) })
	t.Run("redis", func(t *testing.T) {
		addr := testserver.RedisAddr()
		if addr == "" {
			t.Skip("REDIS_ADDR not set: real-server run skipped")
		}
		f(t, testserver.Real(t, "redis", addr))
	})
	t.Run("cluster", func(t *testing.T) { f(t, clusterServer(t)) })
}

// privateServer is a redis-server of the test's own, for tests that change
// its configuration or stop it, which a shared server must never see. It
// skips the test when no redis-server is on PATH.
func privateServer(t *testing.T, name string) *testserver.Server {
	t.Helper()
	return testserver.On(t, name, testserver.PrivateRedis(t).Addr())
}

// clusterServer is the multi-node cluster's server (REDIS_CLUSTER_ADDRS),
// or a skip saying why not: the variable is unset, or the test is one that
// cannot run on a multi-node cluster (notOnCluster).
func clusterServer(t *testing.T) *testserver.Server {
	t.Helper()
	seeds := testserver.ClusterSeeds()
	if len(seeds) == 0 {
		t.Skip("REDIS_CLUSTER_ADDRS not set: multi-node cluster run skipped")
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if why, ok := notOnCluster[top]; ok {
		t.Skip("not on a multi-node cluster: " + why)
	}
	return testcluster.New(t, seeds)
}

// notOnCluster are the behavioural tests that cannot run on a multi-node
// cluster, and why. The cluster's own faults are TestFailoverKill and
// TestFailoverStall.
var notOnCluster = map[string]string{
	"TestMutualExclusionUnderFaults":      proxied,
	"TestAdmissionUnderFaults":            proxied,
	"TestWeightedAdmissionUnderFaults":    proxied,
	"TestRWUnderFaults":                   proxied,
	"TestExtendBeatsLateExtension":        proxied,
	"TestEngineClose":                     proxied,
	"TestNoLostWakeup":                    proxied,
	"TestBookFairSemaphoreOverAdmits":     proxied,
	"TestBookLockCutBeforeExpire":         proxied,
	"TestBookRefreshRevives":              proxied,
	"TestUnlockRetriesACutConnection":     proxied,
	"TestElectionObserveSeesALeaseRunOut": proxied,
	"TestEvalUnderFaults":                 proxied,
	"TestBoundedPoolNoDeadlock":           ownPool,
	"TestRWDeadReader":                    ownPool,
}

const (
	proxied = "its fault proxy fronts one server address"
	ownPool = "it dials its own pool to one server address"
)

func newPool(t testing.TB, addr string) *redis.Pool { return testserver.NewPool(t, addr) }

func testNamespace() string { return testserver.Namespace() }

// engine returns an Engine on s with the test's namespace, closed when
// the test s is for ends (s.T).
func engine(s *testserver.Server, opts ...Option) *Engine {
	var pool Pool = s.Pool
	if s.Engines != nil { // a multi-node cluster's client
		pool = s.Engines
	}
	e := New(pool, append([]Option{WithNamespace(s.NS)}, opts...)...)
	s.T.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// serverMicros is the server's clock in microseconds (TIME).
func serverMicros(s *testserver.Server, t testing.TB) int64 {
	t.Helper()
	v, err := redis.Int64s(s.Do("TIME"))
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v, %v", v, err)
	}
	return v[0]*1e6 + v[1]
}

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

func splitLines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }
