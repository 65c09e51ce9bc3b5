// Package testcluster puts atomicredis's tests on a multi-node Redis
// Cluster (REDIS_CLUSTER_ADDRS, or a private one a test starts) through
// redisc: the engines take redisc connections, bound per call; the test's
// own commands go through a connection that routes them as one connection
// to one node would. It is apart from testserver so that what the goredis
// module's tests import does not pull in redisc.
package testcluster

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// New is a server on the cluster at seeds whose key namespace is deleted
// when the test ends. Its Engines is a Pool on a redisc client.
func New(t testing.TB, seeds []string) *testserver.Server {
	t.Helper()
	rc := Client(t, seeds)
	admin := &redis.Pool{Dial: func() (redis.Conn, error) { return &adminConn{cluster: rc, conn: rc.Get()}, nil }}
	t.Cleanup(func() { admin.Close() })
	s := &testserver.Server{Name: "cluster", Pool: admin, Engines: Pool{rc}, NS: testserver.Namespace(), T: t}
	if info, err := redis.String(s.Do("CLUSTER", "INFO")); err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("cluster at %v: not ok: %v %s", seeds, err, info)
	}
	s.DeleteKeysAtEnd(t)
	return s
}

// Client returns a redisc cluster client on seeds, its slot map loaded,
// closed when the test ends.
func Client(t testing.TB, seeds []string) *redisc.Cluster {
	t.Helper()
	return ClientVia(t, seeds, nil)
}

// ClientVia is Client dialing each node at via(its address), such as a
// proxy in front of it (nil: the address itself). The addresses the
// cluster gives (its slot map, MOVED) stay the nodes' own.
func ClientVia(t testing.TB, seeds []string, via func(addr string) string) *redisc.Cluster {
	t.Helper()
	c := &redisc.Cluster{
		StartupNodes: seeds,
		DialOptions:  []redis.DialOption{redis.DialConnectTimeout(time.Second)},
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			if via != nil {
				addr = via(addr)
			}
			return &redis.Pool{
				MaxIdle:     64,
				IdleTimeout: time.Minute,
				Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr, opts...) },
			}, nil
		},
	}
	if err := c.Refresh(); err != nil {
		t.Fatalf("cluster at %v: %v", seeds, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Pool is the wrapper of docs/cluster.md: a *redisc.Cluster as an atomicredis.Pool.
type Pool struct{ *redisc.Cluster }

// GetContext returns a redisc connection, which binds to the node of the
// first key it is given.
func (p Pool) GetContext(ctx context.Context) (redis.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.Get(), nil
}

// Of is the redisc client of a server New made.
func Of(s *testserver.Server) *redisc.Cluster { return s.Engines.(Pool).Cluster }

// OnKey runs one command on the node serving key.
func OnKey(c *redisc.Cluster, cmd string, key any, args ...any) (any, error) {
	conn := c.Get()
	defer conn.Close()
	if err := redisc.BindConn(conn, argString(key)); err != nil {
		return nil, err
	}
	return conn.Do(cmd, append([]any{key}, args...)...)
}

// OnEveryPrimary runs f on a connection of its own to each primary that
// serves slots.
func OnEveryPrimary(c *redisc.Cluster, f func(addr string, conn redis.Conn) error) error {
	primaries, err := Primaries(c)
	if err != nil {
		return err
	}
	for _, addr := range primaries {
		conn, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second))
		if err != nil {
			return err
		}
		err = f(addr, conn)
		conn.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// onEveryPrimary runs a command on each primary: KEYS replies are joined,
// SCRIPT EXISTS replies or-ed (loaded somewhere), others are the last one.
func onEveryPrimary(c *redisc.Cluster, cmd string, args ...any) (any, error) {
	var joined []any
	var last any
	err := OnEveryPrimary(c, func(addr string, conn redis.Conn) error {
		v, err := conn.Do(cmd, args...)
		if err != nil {
			return fmt.Errorf("%s on %s: %w", cmd, addr, err)
		}
		switch vs, _ := v.([]any); {
		case cmd == "KEYS":
			joined = append(joined, vs...)
		case cmd == "SCRIPT" && len(args) > 0 && strings.EqualFold(fmt.Sprint(args[0]), "EXISTS"):
			if joined == nil {
				joined = vs
			}
			for i := range vs {
				if n, _ := redis.Int(vs[i], nil); n == 1 && i < len(joined) {
					joined[i] = int64(1)
				}
			}
		}
		last = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if joined != nil || cmd == "KEYS" {
		return joined, nil
	}
	return last, nil
}

// NodeKeys lists the keys matching pattern on each primary, by address.
func NodeKeys(c *redisc.Cluster, pattern string) (map[string][]string, error) {
	out := map[string][]string{}
	err := OnEveryPrimary(c, func(addr string, conn redis.Conn) error {
		ks, err := redis.Strings(conn.Do("KEYS", pattern))
		out[addr] = ks
		return err
	})
	return out, err
}

// MovedReplies sums the MOVED errors the primaries have replied (INFO
// errorstats, Redis 6.2+).
func MovedReplies(primaries []string) (int64, error) {
	var n int64
	for _, addr := range primaries {
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		info, err := redis.String(c.Do("INFO", "errorstats"))
		c.Close()
		if err != nil {
			return 0, err
		}
		if v, ok := testserver.InfoField(info, "errorstat_MOVED"); ok {
			var k int64
			fmt.Sscan(strings.TrimPrefix(v, "count="), &k)
			n += k
		}
	}
	return n, nil
}

// Primaries lists the addresses of the primaries that serve slots, as a
// node reachable through c says.
func Primaries(c *redisc.Cluster) ([]string, error) {
	owners, err := SlotOwners(c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range owners {
		if o != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	sort.Strings(out)
	return out, nil
}

// SlotOwners maps every slot to the address of the primary serving it
// ("" if none), from CLUSTER SLOTS.
func SlotOwners(c *redisc.Cluster) ([]string, error) {
	conn := c.Get()
	defer conn.Close()
	if err := redisc.BindConn(conn); err != nil { // any node
		return nil, err
	}
	ranges, err := redis.Values(conn.Do("CLUSTER", "SLOTS"))
	if err != nil {
		return nil, err
	}
	owners := make([]string, 16384)
	for _, r := range ranges {
		v, err := redis.Values(r, nil)
		if err != nil || len(v) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: %v", r)
		}
		from, _ := redis.Int(v[0], nil)
		to, _ := redis.Int(v[1], nil)
		node, _ := redis.Values(v[2], nil)
		host, _ := redis.String(node[0], nil)
		port, _ := redis.Int(node[1], nil)
		for s := from; s <= to; s++ {
			owners[s] = net.JoinHostPort(host, strconv.Itoa(port))
		}
	}
	return owners, nil
}
