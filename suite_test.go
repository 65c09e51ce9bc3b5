package atomicredis_test

import (
	"testing"

	"github.com/atomicredis/atomicredis/internal/suite"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
)

// TestSuite runs the shared behavioural suite (internal/suite) over redigo:
// a redis.Pool on miniredis and on the server REDIS_ADDR names, and a
// redisc cluster client on the multi-node cluster REDIS_CLUSTER_ADDRS
// names. The goredis module runs the same suite over go-redis.
func TestSuite(t *testing.T) {
	testserver.Parallel(t)
	t.Run("miniredis", func(t *testing.T) {
		suite.Run(t, func(t *testing.T) suite.Target {
			s := testserver.Mini(t)
			return suite.Target{Pool: s.Pool, Namespace: s.NS, Mini: s.Mini}
		})
	})
	t.Run("redis", func(t *testing.T) {
		addr := testserver.RedisAddr()
		if addr == "" {
			t.Skip("REDIS_ADDR not set: the suite ran on miniredis only")
		}
		pool := testserver.NewPool(t, addr)
		suite.Run(t, func(t *testing.T) suite.Target {
			return suite.Target{Pool: pool, Namespace: suite.Namespace()}
		})
	})
	t.Run("redisc", func(t *testing.T) {
		seeds := testserver.ClusterSeeds()
		if len(seeds) == 0 {
			t.Skip("REDIS_CLUSTER_ADDRS not set: no multi-node cluster")
		}
		suite.Run(t, func(t *testing.T) suite.Target {
			// The test's own commands, KEYS and SCRIPT FLUSH included, are
			// routed to the nodes they concern.
			s := testcluster.New(t, seeds)
			return suite.Target{Pool: s.Engines, Namespace: s.NS, Do: s.Do}
		})
	})
}
