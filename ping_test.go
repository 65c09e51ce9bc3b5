package atomicredis

// Engine.Ping: what a service checks at startup or in a readiness probe.

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// Ping loads every script on every primary the pool reaches (on the 3+3
// cluster, each primary has every script afterwards), and its empty
// message on the wake channel disturbs no waiter.
func TestPingLoadsEveryScriptEverywhere(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		// Per node: the script hashes each server has, in everyScript's order.
		type exists func() (map[string][]int, error)
		var have exists = func() (map[string][]int, error) {
			args := []any{"EXISTS"}
			for _, sc := range everyScript {
				args = append(args, sc.script.Hash())
			}
			v, err := redis.Ints(s.Do("SCRIPT", args...))
			return map[string][]int{"the server": v}, err
		}
		if s.Engines != nil {
			have = func() (map[string][]int, error) {
				out := map[string][]int{}
				err := testcluster.OnEveryPrimary(testcluster.Of(s), func(addr string, c redis.Conn) error {
					args := []any{"EXISTS"}
					for _, sc := range everyScript {
						args = append(args, sc.script.Hash())
					}
					v, err := redis.Ints(c.Do("SCRIPT", args...))
					out[addr] = v
					return err
				})
				return out, err
			}
		}
		s.Must(t, "SCRIPT", "FLUSH") // on every primary of a cluster
		if err := e.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		nodes, err := have()
		if err != nil {
			t.Fatal(err)
		}
		if s.Engines != nil && len(nodes) < 2 {
			t.Fatalf("a multi-node cluster with %d primaries", len(nodes))
		}
		for addr, v := range nodes {
			for i, sc := range everyScript {
				if v[i] != 1 && !(sc.script == scriptSuggestOOM && e.plainSuggest.Load()) {
					t.Errorf("%s: script %s not loaded after Ping", addr, sc.name)
				}
			}
		}

		// A waiter woken while Pings publish their empty messages gets the
		// lock as usual.
		s.Realtime(t)
		l, err := e.TryLock(ctx, "p", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			w, err := e.Lock(ctx, "p", LockOptions{Wait: 5 * time.Second})
			if err == nil {
				err = w.Unlock(ctx)
			}
			got <- err
		}()
		for i := 0; i < 3; i++ {
			if err := e.Ping(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Errorf("the waiter: %v", err)
		}
	})
}

// Ping reports what would otherwise fail every call, or only later: an
// option New accepted but rejected, a nil context or engine, a server that
// does not answer; each error says what failed and wraps its cause.
func TestPingReports(t *testing.T) {
	s := testserver.Mini(t)
	ctx := ctxT(t)
	for name, e := range map[string]*Engine{
		"replica ack past the call timeout": New(s.Pool, WithReplicaAck(1, 10*time.Second)),
		"nil pool":                          New(nil),
		"nil engine":                        nil,
		"zero engine":                       new(Engine),
	} {
		if err := e.Ping(ctx); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Ping: %v, want ErrInvalid", name, err)
		}
	}
	//lint:ignore SA1012 a nil ctx is what is tested
	if err := New(s.Pool).Ping(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Ping(nil): %v, want ErrInvalid", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	down := New(newPool(t, addr), WithCallTimeout(time.Second))
	err = down.Ping(ctx)
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.HasPrefix(err.Error(), "atomicredis: ping: a connection from the pool: dial tcp "+addr) {
		t.Errorf("Ping of a server that is down: %v, want connection refused, naming the server", err)
	}
}

// With the README's ACL rule Ping passes; without the wake channel's rights
// it names the PUBLISH that was refused (inside a script that refusal is
// ignored, and waits would only be slow); without SCRIPT LOAD it names
// the script.
func TestPingChecksTheUsersRights(t *testing.T) {
	s := privateServer(t, "private redis")
	rule := readmeACL(t)
	port, err := redis.Strings(s.Do("CONFIG", "GET", "port"))
	if err != nil || len(port) != 2 {
		t.Fatalf("CONFIG GET port: %v, %v", port, err)
	}
	addr := "127.0.0.1:" + port[1]
	ctx := ctxT(t)
	for _, c := range []struct {
		name, drop, want string
	}{
		{"the README's rule", "", ""},
		{"no channel rights", "&orders:wake:*", "PUBLISH orders:wake:"},
		{"no SCRIPT LOAD", "+script|load", "SCRIPT LOAD "},
	} {
		user := "u" + strconv.Itoa(rand.N(1_000_000))
		args := []any{}
		for _, f := range rule[1:] {
			if f != c.drop {
				args = append(args, strings.ReplaceAll(f, "orders", user))
			}
		}
		args[1] = user // SETUSER <user>
		s.Must(t, "ACL", args...)
		p := &redis.Pool{MaxIdle: 4, Dial: func() (redis.Conn, error) {
			return redis.Dial("tcp", addr, redis.DialUsername(user), redis.DialPassword("secret"))
		}}
		t.Cleanup(func() { p.Close() })
		e := New(p, WithNamespace(strings.ReplaceAll("orders:", "orders", user)))
		err := e.Ping(ctx)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Ping: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(c.want, "orders", user)) || !strings.Contains(err.Error(), "NOPERM")):
			t.Errorf("%s: Ping: %v, want NOPERM naming %q", c.name, err, c.want)
		}
		e.Close(context.Background())
	}
}

// hashSlot agrees with the tests' keySlot (checked against the cluster
// specification), and tagIn finds a tag in any range.
func TestHashSlot(t *testing.T) {
	for _, tag := range []string{"", "a", "foo", "user1000", "cart:42", "\xff\x00"} {
		if got, want := hashSlot(tag), keySlot("{"+tag+"}"); tag != "" && got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", tag, got, want)
		}
	}
	for _, r := range [][2]int{{0, 0}, {16383, 16383}, {5461, 10922}, {1234, 1234}} {
		if s := int(hashSlot(tagIn(r[0], r[1]))); s < r[0] || s > r[1] {
			t.Errorf("tagIn(%d, %d): slot %d", r[0], r[1], s)
		}
	}
}
