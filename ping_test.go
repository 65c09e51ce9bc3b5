package atomicredis

// Engine.Ping: what a service checks at startup or in a readiness probe.

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"os"
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
func TestPing_LoadsEveryScriptEverywhere(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		// Per node: the script hashes each server has, in everyScript's order.
		type exists func() (map[string][]int, error)
		var have exists = func() (map[string][]int, error) {
			args := []any{"EXISTS"}
			for _, sc := range everyScript {
				args = append(args, sc.Hash())
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
						args = append(args, sc.Hash())
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
				if v[i] != 1 && !(sc == scriptSuggestOOM && e.plainSuggest.Load()) {
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
func TestPing_Reports(t *testing.T) {
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

// With the ACL rule of docs/production.md Ping passes; without the wake channel's rights
// it names the PUBLISH that was refused (inside a script that refusal is
// ignored, and waits would only be slow); without SCRIPT LOAD it names
// the script.
func TestPing_ChecksTheUsersRights(t *testing.T) {
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

// aclGuarded is a write made through Lock.Eval: a hash's field.
var aclGuarded = NewGuardedScript(1, "return redis.call('HSET', KEYS[1], 'status', ARGV[1])")

// readmeACL is the ACL SETUSER line of docs/production.md, as fields.
func readmeACL(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "ACL SETUSER orders ") {
			return strings.Fields(line)
		}
	}
	t.Fatal("docs/production.md has no ACL SETUSER orders line")
	return nil
}

// The ACL rule of docs/production.md is enough to run every object as the application
// user (locks and read-write locks with waiting woken by the subscription,
// semaphores, the admin calls, autocomplete, bitmaps, LockAll, weighted
// permits, writes guarded by a lock, elections), and a user of another
// namespace gets NOPERM on its keys and changes nothing.
func TestPing_ACLLeastPrivilege(t *testing.T) {
	s := privateServer(t, "private redis")
	rule := readmeACL(t)
	as := func(user string) []any {
		var args []any
		for _, f := range rule[1:] { // after ACL
			args = append(args, strings.ReplaceAll(f, "orders", user))
		}
		return args
	}
	port, err := redis.Strings(s.Do("CONFIG", "GET", "port"))
	if err != nil || len(port) != 2 {
		t.Fatalf("CONFIG GET port: %v, %v", port, err)
	}
	addr := "127.0.0.1:" + port[1]
	s.NS = "orders:" // the snapshots are of the application's keys
	s.Must(t, "ACL", as("orders")...)
	s.Must(t, "ACL", as("billing")...)
	pool := func(user string) *redis.Pool {
		p := &redis.Pool{MaxIdle: 8, Dial: func() (redis.Conn, error) {
			return redis.Dial("tcp", addr, redis.DialUsername(user), redis.DialPassword("secret"))
		}}
		t.Cleanup(func() { p.Close() })
		return p
	}
	ctx := ctxT(t)
	orders := New(pool("orders"), WithNamespace("orders:"))
	orders.queueTTL = slowExtensions // waiters must be woken by the subscription
	defer orders.Close(ctx)

	l, err := orders.TryLock(ctx, "cart:1", LockOptions{TTL: time.Minute, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := orders.Lock(ctx, "cart:1", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, _ := redis.Values(s.Do("PUBSUB", "NUMSUB", orders.wake.channel))
		if n, _ := redis.Int(v[1], nil); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the application user's engine could not subscribe to its wake channel")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if info, err := orders.LockInfo(ctx, "cart:1"); err != nil || info.Waiting != 1 {
		t.Errorf("LockInfo = %+v, %v", info, err)
	}
	start := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("the waiter: %v after %v: want woken by the subscription", err, time.Since(start))
	}
	ops := []struct {
		name string
		run  func(ctx context.Context, e *Engine) error
	}{
		{"read-write locks", func(ctx context.Context, e *Engine) error {
			r, err := e.RLock(ctx, "doc", LockOptions{})
			if err != nil {
				return err
			}
			if err := r.Unlock(ctx); err != nil {
				return err
			}
			w, err := e.WLock(ctx, "doc", LockOptions{})
			if err != nil {
				return err
			}
			return w.Unlock(ctx)
		}},
		{"semaphores", func(ctx context.Context, e *Engine) error {
			p, err := e.AcquireSemaphore(ctx, "exports", SemaphoreOptions{Limit: 3, Watchdog: true})
			if err != nil {
				return err
			}
			if err := e.SetSemaphoreLimit(ctx, "exports", 4); err != nil {
				return err
			}
			if _, err := e.SemaphoreInfo(ctx, "exports"); err != nil {
				return err
			}
			if err := p.Extend(ctx, 0); err != nil {
				return err
			}
			return p.Release(ctx)
		}},
		{"ForceUnlock", func(ctx context.Context, e *Engine) error {
			if _, err := e.TryLock(ctx, "stuck", LockOptions{}); err != nil {
				return err
			}
			_, err := e.ForceUnlock(ctx, "stuck")
			return err
		}},
		{"autocomplete", func(ctx context.Context, e *Engine) error {
			if err := e.AddRecent(ctx, "u", "Alice"); err != nil {
				return err
			}
			if _, err := e.SuggestRecent(ctx, "u", "al", 5); err != nil {
				return err
			}
			if err := e.AddMembers(ctx, "g", "abc"); err != nil {
				return err
			}
			_, err := e.Suggest(ctx, "g", "ab", 5)
			return err
		}},
		{"bitmaps", func(ctx context.Context, e *Engine) error {
			if err := e.MarkActive(ctx, "logins", "d1", 7); err != nil {
				return err
			}
			if err := e.MarkActiveMany(ctx, "logins", "d2", 7, 1<<33); err != nil {
				return err
			}
			if _, err := e.CountActive(ctx, "logins", "d1", "d2"); err != nil {
				return err
			}
			_, err := e.CountActiveAll(ctx, "logins", "d1", "d2")
			return err
		}},
		{"LockAll", func(ctx context.Context, e *Engine) error {
			m, err := e.TryLockAll(ctx, []string{"a", "b", "c"}, LockOptions{})
			if err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		{"weighted permits", func(ctx context.Context, e *Engine) error {
			p, err := e.AcquireSemaphore(ctx, "batch", SemaphoreOptions{Limit: 4, Weight: 3})
			if err != nil {
				return err
			}
			return p.Release(ctx)
		}},
		{"guarded writes", func(ctx context.Context, e *Engine) error {
			l, err := e.TryLock(ctx, "job", LockOptions{})
			if err != nil {
				return err
			}
			if _, err := l.Eval(ctx, aclGuarded, l.Key("jobs"), "running"); err != nil { // the README's way
				return err
			}
			return l.Unlock(ctx)
		}},
		{"elections", func(ctx context.Context, e *Engine) error {
			el := e.Election("leader", ElectionOptions{TTL: 200 * time.Millisecond})
			octx, stop := context.WithCancel(ctx)
			defer stop()
			seen := el.Observe(octx)
			l, err := el.Campaign(ctx, "a")
			if err != nil {
				return err
			}
			if err := l.SetOwner(ctx, "b"); err != nil {
				return err
			}
			if _, err := el.Leader(ctx); err != nil {
				return err
			}
			deadline := time.After(5 * time.Second)
			for heard := false; !heard; {
				select {
				case st, open := <-seen:
					if !open {
						l.Unlock(ctx)
						return errors.New("the observer stopped before it heard the new value")
					}
					heard = st.Value == "b"
				case <-deadline:
					l.Unlock(ctx)
					return errors.New("the observer did not hear the new value in 5 s")
				}
			}
			return l.Unlock(ctx)
		}},
		{"Ping", func(ctx context.Context, e *Engine) error { return e.Ping(ctx) }}, // the scripts load; the wake channel is the user's
	}
	for _, op := range ops {
		if err := op.run(ctx, orders); err != nil {
			t.Errorf("%s as the application user: %v", op.name, err)
		}
	}

	// Another namespace's user: refused, nothing changed.
	before := s.Snapshot(t)
	billing := New(pool("billing"), WithNamespace("orders:"))
	defer billing.Close(ctx)
	if _, err := billing.TryLock(ctx, "cart:1", LockOptions{}); err == nil || !strings.Contains(err.Error(), "NOPERM") || errors.Is(err, ErrNotAcquired) {
		t.Errorf("TryLock on another namespace's lock: %v, want NOPERM", err)
	}
	for _, op := range ops {
		if err := op.run(ctx, billing); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s on another namespace's keys: %v, want NOPERM", op.name, err)
		}
	}
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("another namespace's user changed keys: %v -> %v", before, after)
	}
	own := New(pool("billing"), WithNamespace("billing:"))
	defer own.Close(ctx)
	if err := ops[1].run(ctx, own); err != nil {
		t.Errorf("the other user in its own namespace: %v", err)
	}
}
