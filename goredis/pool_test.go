package goredis

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/suite"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// TestSuite runs the library's behavioural suite through go-redis: on
// miniredis, on REDIS_ADDR and on the cluster REDIS_CLUSTER_ADDRS names,
// each with a RESP2 client and with go-redis's default, RESP3.
func TestSuite(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(protoName(proto), func(t *testing.T) {
			t.Run("miniredis", func(t *testing.T) {
				suite.Run(t, func(t *testing.T) suite.Target {
					m := miniredis.RunT(t)
					return suite.Target{Pool: NewPool(newClient(t, m.Addr(), proto)), Namespace: suite.Namespace(), Mini: m}
				})
			})
			t.Run("redis", func(t *testing.T) {
				addr := realAddr(t)
				pool := NewPool(newClient(t, addr, proto))
				suite.Run(t, func(t *testing.T) suite.Target {
					return suite.Target{Pool: pool, Namespace: suite.Namespace()}
				})
			})
			t.Run("cluster", func(t *testing.T) {
				c := newClusterClient(t, proto)
				pool := NewPool(c)
				suite.Run(t, func(t *testing.T) suite.Target {
					return suite.Target{Pool: pool, Namespace: suite.Namespace(),
						Keys:      func(pattern string) ([]string, error) { return clusterKeys(c, pattern) },
						Broadcast: func(cmd string, args ...any) error { return onEveryPrimary(c, cmd, args...) },
					}
				})
			})
			// WithReplicaAck pipelines WAIT after every acquire, on the
			// connection Bind pinned.
			t.Run("cluster-replica-ack", func(t *testing.T) {
				c := newClusterClient(t, proto)
				if !everyPrimaryHasReplica(t, c) {
					t.Skip("a primary of REDIS_CLUSTER_ADDRS has no replica: no WithReplicaAck run")
				}
				pool := NewPool(c)
				suite.Run(t, func(t *testing.T) suite.Target {
					return suite.Target{Pool: pool, Namespace: suite.Namespace(),
						Keys:      func(pattern string) ([]string, error) { return clusterKeys(c, pattern) },
						Broadcast: func(cmd string, args ...any) error { return onEveryPrimary(c, cmd, args...) },
						Options:   []atomicredis.Option{atomicredis.WithReplicaAck(1, time.Second)},
					}
				})
			})
		})
	}
}

func protoName(proto int) string {
	if proto == 2 {
		return "resp2"
	}
	return "resp3"
}

// newClient is a go-redis client of addr speaking RESP proto, closed when
// the test ends.
func newClient(t testing.TB, addr string, proto int) *redis.Client {
	return newClientOpts(t, &redis.Options{Addr: addr, Protocol: proto, PoolSize: 64})
}

func newClientOpts(t testing.TB, o *redis.Options) *redis.Client {
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// realAddr is REDIS_ADDR, or skips the test.
func realAddr(t testing.TB) string {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		t.Skip("REDIS_ADDR not set: no real server, miniredis only")
	}
	return addr
}

// newClusterClient is a client of the cluster REDIS_CLUSTER_ADDRS (seed
// addresses, comma-separated) names, or skips the test.
func newClusterClient(t testing.TB, proto int) *redis.ClusterClient {
	addrs := os.Getenv("REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		t.Skip("REDIS_CLUSTER_ADDRS not set: no cluster")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), Protocol: proto, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("cluster %s: %v", addrs, err)
	}
	return c
}

// everyPrimaryHasReplica reports whether each primary has a replica that
// is online.
func everyPrimaryHasReplica(t testing.TB, c *redis.ClusterClient) bool {
	ok := true
	var mu sync.Mutex
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
		info, err := n.Info(ctx, "replication").Result()
		mu.Lock()
		ok = ok && strings.Contains(info, "connected_slaves:") && !strings.Contains(info, "connected_slaves:0")
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func clusterKeys(c *redis.ClusterClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		ks, err := node.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	return keys, err
}

func onEveryPrimary(c *redis.ClusterClient, cmd string, args ...any) error {
	return c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		return node.Do(ctx, append([]any{cmd}, args...)...).Err()
	})
}

// servers runs f on miniredis and on REDIS_ADDR, each over a RESP2 and a
// RESP3 go-redis client, with a redigo connection to the same server to
// compare against.
func servers(t *testing.T, f func(t *testing.T, s *server)) {
	for _, proto := range []int{2, 3} {
		t.Run(protoName(proto), func(t *testing.T) {
			t.Run("miniredis", func(t *testing.T) {
				m := miniredis.RunT(t)
				f(t, newServer(t, m.Addr(), proto, m))
			})
			t.Run("redis", func(t *testing.T) {
				f(t, newServer(t, realAddr(t), proto, nil))
			})
		})
	}
}

type server struct {
	addr   string
	mini   *miniredis.Miniredis
	proto  int
	client *redis.Client
	pool   *Pool
	ns     string // a key prefix unique to the test
}

func newServer(t *testing.T, addr string, proto int, m *miniredis.Miniredis) *server {
	c := newClient(t, addr, proto)
	s := &server{addr: addr, mini: m, proto: proto, client: c, pool: NewPool(c), ns: suite.Namespace()}
	if m == nil {
		t.Cleanup(func() {
			ks, _ := c.Keys(context.Background(), s.ns+"*").Result()
			for _, k := range ks {
				c.Del(context.Background(), k)
			}
		})
	}
	return s
}

// conn is a connection of the Pool, closed when the test ends.
func (s *server) conn(t testing.TB) redigo.Conn {
	t.Helper()
	c, err := s.pool.GetContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// redigo is a redigo connection to the same server, the reference.
func (s *server) redigo(t testing.TB) redigo.Conn {
	t.Helper()
	c, err := redigo.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *server) key(name string) string { return s.ns + name }

// real reports whether s is a real server (some commands behave
// differently on miniredis).
func (s *server) real() bool { return s.mini == nil }
