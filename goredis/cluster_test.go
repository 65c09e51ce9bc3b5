package goredis

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/suite"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// binder is what a cluster connection offers the engine.
type binder interface {
	Bind(keys ...string) error
}

// bound is a connection of p bound to the primary of key's slot; the
// caller closes it.
func bound(t *testing.T, p *Pool, key string) redigo.Conn {
	t.Helper()
	c, err := p.GetContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(binder).Bind(key); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCluster: before Bind a connection routes each command by its key;
// Bind pins it to the primary of the keys' slot, so that WAIT runs where
// the script ran and a key of another primary's slot answers MOVED.
func TestCluster(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(protoName(proto), func(t *testing.T) {
			client := newClusterClient(t, proto)
			p := newPool(t, client)
			ns := suite.Namespace()
			ctx := context.Background()
			get := func() redigo.Conn {
				c, err := p.GetContext(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			// Keys on every primary: find two of different primaries.
			var a, b string
			for i := 0; b == "" && i < 100; i++ {
				k := ns + "{" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + "}"
				if a == "" {
					a = k
					continue
				}
				na, _ := client.MasterForKey(ctx, a)
				nb, _ := client.MasterForKey(ctx, k)
				if na.Options().Addr != nb.Options().Addr {
					b = k
				}
			}
			defer client.Del(ctx, a)
			defer client.Del(ctx, b)

			// Routed: scripts by their first key, on any primary.
			c := get()
			for _, k := range []string{a, b} {
				v, err := c.Do("EVAL", "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])", 1, k, "v")
				if s, _ := redigo.String(v, err); s != "v" {
					t.Errorf("routed EVAL on %s: %#v, %v", k, v, err)
				}
			}
			for _, k := range []string{a, b} {
				if n, err := redigo.Int(c.Do("CLUSTER", "KEYSLOT", k)); err != nil || n != keySlot(k) {
					t.Errorf("CLUSTER KEYSLOT %s = %d, %v; keySlot says %d", k, n, err, keySlot(k))
				}
			}

			// Bound: one connection of a's primary.
			c = get()
			bc := c.(binder)
			if err := bc.Bind(a, a+":x"); err != nil {
				t.Fatal(err)
			}
			id1, err1 := redigo.Int64(c.Do("CLIENT", "ID"))
			id2, err2 := redigo.Int64(c.Do("CLIENT", "ID"))
			if err1 != nil || err2 != nil || id1 != id2 {
				t.Errorf("bound connection: CLIENT ID %d, %d (%v, %v); want one connection", id1, id2, err1, err2)
			}
			c.Send("EVAL", "return redis.call('SET', KEYS[1], 'w')", 1, a)
			c.Send("WAIT", 1, 2000)
			c.Flush()
			if v, err := redigo.String(c.Receive()); err != nil || v != "OK" {
				t.Errorf("bound EVAL: %#v, %v", v, err)
			}
			if n, err := redigo.Int(c.Receive()); err != nil || n != 1 {
				t.Errorf("WAIT 1 after a write on the bound primary: %d, %v; want its replica's ack", n, err)
			}
			_, err := c.Do("GET", b)
			if e, ok := err.(redigo.Error); !ok || !strings.HasPrefix(string(e), "MOVED ") {
				t.Errorf("GET of another primary's key on a bound connection: %v; want MOVED", err)
			}
			if c.Err() != nil {
				t.Errorf("MOVED broke the connection: %v", c.Err())
			}
			if err := bc.Bind(a); err == nil {
				t.Error("a second Bind succeeded")
			}

			// Bind's errors leave the connection usable and unbound.
			c = get()
			bc = c.(binder)
			for _, keys := range [][]string{nil, {a, b}} {
				if err := bc.Bind(keys...); err == nil {
					t.Errorf("Bind(%q) succeeded", keys)
				}
			}
			if v, err := redigo.String(c.Do("GET", b)); err != nil || v != "v" {
				t.Errorf("GET %s after failed Binds: %q, %v", b, v, err)
			}
			c.Send("GET", a)
			if err := bc.Bind(a); err == nil {
				t.Error("Bind with a command queued succeeded")
			}
		})
	}
}

// TestClusterMoved: a slot moves to another primary while go-redis's slot
// map still names the old one. A bound connection gets MOVED as an error
// reply, and the next Bind pins the new owner at once (the engine follows
// MOVED with a fresh connection, a few times at most).
func TestClusterMoved(t *testing.T) {
	client := newClusterClient(t, 2)
	ctx := context.Background()
	p := newPool(t, client)
	var key string
	var slot int
	for i := 0; key == ""; i++ {
		k := suite.Namespace() + "{moved" + strconv.Itoa(i) + "}"
		node, err := client.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := node.ClusterCountKeysInSlot(ctx, keySlot(k)).Result(); n == 0 {
			key, slot = k, keySlot(k)
		}
	}
	from, _ := client.MasterForKey(ctx, key)
	var to *redis.Client
	for i := 0; to == nil && i < 1000; i++ {
		n, err := client.MasterForKey(ctx, "k"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if n.Options().Addr != from.Options().Addr {
			to = n
		}
	}
	if to == nil {
		t.Fatal("no second primary")
	}
	move := func(src, dst *redis.Client) {
		id, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []*redis.Client{dst, src} {
			if err := n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", id).Err(); err != nil {
				t.Fatalf("CLUSTER SETSLOT %d NODE %s on %s: %v", slot, id, n.Options().Addr, err)
			}
		}
	}
	bind := func() redigo.Conn { return bound(t, p, key) }

	c := bind() // go-redis's map is loaded and names the old owner
	if _, err := c.Do("GET", key); err != nil {
		t.Fatal(err)
	}
	c.Close()
	move(from, to)
	defer func() {
		to.Del(ctx, key)
		move(to, from)
	}()

	c = bind()
	_, err := c.Do("SET", key, "v")
	if e, ok := err.(redigo.Error); !ok || !strings.HasPrefix(string(e), "MOVED ") {
		t.Fatalf("SET on the old owner: %v; want MOVED", err)
	}
	c.Close()
	c = bind()
	if v, err := c.Do("SET", key, "v"); v != "OK" || err != nil {
		t.Errorf("SET after the MOVED: %#v, %v; want the next Bind to pin the new owner", v, err)
	}
	c.Close()
}

// TestClusterFailover: a replica takes over its primary (CLUSTER FAILOVER).
// A connection bound to the old primary gets MOVED for a write, and the
// next Bind pins the promoted replica. The old primary takes over again
// at the end.
func TestClusterFailover(t *testing.T) {
	client := newClusterClient(t, 2)
	ctx := context.Background()
	p := newPool(t, client)
	key := suite.Namespace() + "{failover}"
	primary, err := client.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(t, client, primary)
	if replica == nil {
		t.Skip("the primary of the test key has no replica: no failover to try")
	}
	bind := func() redigo.Conn { return bound(t, p, key) }
	c := bind()
	if _, err := c.Do("SET", key, "before"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	failover(t, replica)
	defer failover(t, primary)

	c = bind()
	_, err = c.Do("SET", key, "after")
	if e, ok := err.(redigo.Error); !ok || !strings.HasPrefix(string(e), "MOVED ") {
		t.Errorf("SET on the demoted primary: %v; want MOVED", err)
	}
	c.Close()
	c = bind()
	if v, err := c.Do("SET", key, "after"); v != "OK" || err != nil {
		t.Errorf("SET after the MOVED: %#v, %v; want the promoted replica pinned", v, err)
	}
	if v, err := redigo.String(c.Do("GET", key)); v != "after" || err != nil {
		t.Errorf("GET: %q, %v", v, err)
	}
	c.Do("DEL", key)
	c.Close()
}

// replicaOf returns go-redis's client of a replica of primary, or nil.
func replicaOf(t *testing.T, client *redis.ClusterClient, primary *redis.Client) *redis.Client {
	ctx := context.Background()
	id, err := primary.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var replica *redis.Client
	client.ForEachSlave(ctx, func(ctx context.Context, n *redis.Client) error {
		nodes, err := n.Do(ctx, "CLUSTER", "NODES").Text()
		for _, line := range strings.Split(nodes, "\n") {
			if f := strings.Fields(line); err == nil && len(f) > 3 && strings.Contains(f[2], "myself") && f[3] == id {
				mu.Lock()
				replica = n
				mu.Unlock()
			}
		}
		return nil
	})
	return replica
}

// failover makes n, a replica, take over its primary, and waits until the
// cluster agrees. A replica refuses a new attempt for a while after its
// last one, so the request is repeated.
func failover(t *testing.T, n *redis.Client) {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	var asked time.Time
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		role, _ := n.Do(ctx, "ROLE").Slice()
		info, _ := n.ClusterInfo(ctx).Result()
		if len(role) > 0 && role[0] == "master" && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Since(asked) > 3*time.Second {
			if err := n.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
				t.Fatalf("CLUSTER FAILOVER on %s: %v", n.Options().Addr, err)
			}
			asked = time.Now()
		}
	}
	t.Fatalf("%s did not take over within 30s", n.Options().Addr)
}
