package atomicredis_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis/internal/suite"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// TestSuite runs the shared behavioural suite (internal/suite) over redigo:
// a redis.Pool on miniredis and on the server REDIS_ADDR names, and a
// redisc cluster client on the cluster REDIS_CLUSTER_ADDRS names (seed
// addresses, comma-separated). The goredis module runs the same suite over
// go-redis.
func TestSuite(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		suite.Run(t, func(t *testing.T) suite.Target {
			m := miniredis.RunT(t)
			return suite.Target{Pool: redigoPool(t, m.Addr()), Namespace: suite.Namespace(), Mini: m}
		})
	})
	t.Run("redis", func(t *testing.T) {
		addr := os.Getenv("REDIS_ADDR")
		if addr == "" {
			t.Skip("REDIS_ADDR not set: the suite ran on miniredis only")
		}
		pool := redigoPool(t, addr)
		suite.Run(t, func(t *testing.T) suite.Target {
			return suite.Target{Pool: pool, Namespace: suite.Namespace()}
		})
	})
	t.Run("redisc", func(t *testing.T) {
		seeds := os.Getenv("REDIS_CLUSTER_ADDRS")
		if seeds == "" {
			t.Skip("REDIS_CLUSTER_ADDRS not set: no cluster")
		}
		cluster := &redisc.Cluster{
			StartupNodes: strings.Split(seeds, ","),
			CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
				return &redis.Pool{MaxIdle: 64, IdleTimeout: time.Minute,
					Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr, opts...) }}, nil
			},
		}
		t.Cleanup(func() { cluster.Close() })
		if err := cluster.Refresh(); err != nil {
			t.Fatalf("cluster at %s: %v", seeds, err)
		}
		suite.Run(t, func(t *testing.T) suite.Target {
			return suite.Target{
				Pool:      suiteRediscPool{cluster},
				Namespace: suite.Namespace(),
				Keys: func(pattern string) ([]string, error) {
					var keys []string
					err := onEveryPrimary(cluster, func(c redis.Conn) error {
						ks, err := redis.Strings(c.Do("KEYS", pattern))
						keys = append(keys, ks...)
						return err
					})
					return keys, err
				},
				Broadcast: func(cmd string, args ...any) error {
					return onEveryPrimary(cluster, func(c redis.Conn) error { _, err := c.Do(cmd, args...); return err })
				},
			}
		})
	})
}

func redigoPool(t *testing.T, addr string) *redis.Pool {
	p := &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr) },
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// suiteRediscPool is a *redisc.Cluster as an atomicredis.Pool: a redisc
// connection binds to the node of the first key it is given.
type suiteRediscPool struct{ *redisc.Cluster }

func (p suiteRediscPool) GetContext(ctx context.Context) (redis.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.Get(), nil
}

// onEveryPrimary runs f on a connection to each primary of the cluster.
func onEveryPrimary(cluster *redisc.Cluster, f func(c redis.Conn) error) error {
	c := cluster.Get()
	nodes, err := redis.String(c.Do("CLUSTER", "NODES"))
	c.Close()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(nodes, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 || !strings.Contains(fields[2], "master") || strings.Contains(fields[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(fields[1], "@")
		pc, err := redis.Dial("tcp", addr)
		if err != nil {
			return err
		}
		err = f(pc)
		pc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
