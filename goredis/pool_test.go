package goredis

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/suite"
	"github.com/atomicredis/atomicredis/internal/testserver"
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
					return suite.Target{Pool: newPool(t, newClient(t, m.Addr(), proto)), Namespace: suite.Namespace(), Mini: m}
				})
			})
			t.Run("redis", func(t *testing.T) {
				addr := realAddr(t)
				pool := newPool(t, newClient(t, addr, proto))
				suite.Run(t, func(t *testing.T) suite.Target {
					return suite.Target{Pool: pool, Namespace: suite.Namespace()}
				})
			})
			t.Run("cluster", func(t *testing.T) {
				c := newClusterClient(t, proto)
				pool := newPool(t, c)
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
				pool := newPool(t, c)
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

// newPool is NewPool(c), closed when the test ends (before c, made first,
// is closed).
func newPool(t testing.TB, c redis.UniversalClient) *Pool {
	p := NewPool(c)
	t.Cleanup(func() { p.Close() })
	return p
}

// realAddr is REDIS_ADDR, or skips the test.
func realAddr(t testing.TB) string {
	addr := testserver.RedisAddr()
	if addr == "" {
		t.Skip("REDIS_ADDR not set: no real server, miniredis only")
	}
	return addr
}

// newClusterClient is a client of the multi-node cluster REDIS_CLUSTER_ADDRS
// names (seed addresses, comma-separated), or skips the test.
func newClusterClient(t testing.TB, proto int) *redis.ClusterClient {
	addrs := testserver.ClusterSeeds()
	if len(addrs) == 0 {
		t.Skip("REDIS_CLUSTER_ADDRS not set: no multi-node cluster")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Protocol: proto, PoolSize: 64})
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
	s := &server{addr: addr, mini: m, proto: proto, client: c, pool: newPool(t, c), ns: suite.Namespace()}
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

// TestTypedMethods: the go-redis in use offers every typed method a
// connection calls, on a pinned connection and on each kind of client, so
// that no WAIT or blocking pop loses its typed path unnoticed after a
// go-redis upgrade. WaitAOF's typed path needs go-redis v9.22 or later.
func TestTypedMethods(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	pinned := c.Conn()
	defer pinned.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, x := range []struct {
		name string
		v    any
	}{{"*redis.Conn", pinned}, {"*redis.Client", c}, {"*redis.ClusterClient", cc}, {"*redis.Ring", ring}} {
		for method, ok := range map[string]bool{
			"Process":    is[processor](x.v),
			"Pipeline":   is[pipeliner](x.v),
			"Wait":       is[waiter](x.v),
			"BLPop":      is[blPopper](x.v),
			"BRPop":      is[brPopper](x.v),
			"BRPopLPush": is[brPopLPusher](x.v),
			"BLMove":     is[blMover](x.v),
		} {
			if !ok {
				t.Errorf("%s has no %s of the signature a connection calls", x.name, method)
			}
		}
		if !is[waitAOFer](x.v) {
			t.Logf("%s: WaitAOF does not reply *redis.IntSliceCmd (go-redis before v9.22): a WAITAOF longer than ReadTimeout allows is refused", x.name)
		}
	}
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// TestPoolClose: Close stops the Pool's workers (DoContext runs its
// command on one, which then waits for the next), and GetContext fails
// after it; a connection taken before Close still works, without a
// worker that outlives its command.
func TestPoolClose(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClient(t, m.Addr(), 2)
	p := NewPool(c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := p.GetContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	do := func() {
		t.Helper()
		if v, err := redigo.String(redigo.DoContext(conn, ctx, "PING")); v != "PONG" || err != nil {
			t.Fatalf("PING: %q, %v", v, err)
		}
	}
	do()
	if !workerRunning() {
		t.Fatal("no worker waits for commands after DoContext: the test shows nothing")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if workerRunning() {
		t.Error("a worker still waits for commands after Close")
	}
	do()
	if _, err := p.GetContext(ctx); err == nil {
		t.Error("GetContext on a closed Pool succeeded")
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// workerRunning reports whether some goroutine is in workers.loop.
func workerRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "goredis.(*workers).loop")
}
