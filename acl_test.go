package atomicredis

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// aclGuarded is a write made through Lock.Eval: a hash's field.
var aclGuarded = NewGuardedScript(1, "return redis.call('HSET', KEYS[1], 'status', ARGV[1])")

// readmeACL is the ACL SETUSER line of the README, as fields.
func readmeACL(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "ACL SETUSER orders ") {
			return strings.Fields(line)
		}
	}
	t.Fatal("README.md has no ACL SETUSER orders line")
	return nil
}

// The README's ACL rule is enough to run every object as the application
// user (locks and read-write locks with waiting woken by the subscription,
// semaphores, the admin calls, autocomplete, bitmaps, LockAll, weighted
// permits, writes guarded by a lock, elections), and a user of another
// namespace gets NOPERM on its keys and changes nothing.
func TestACLLeastPrivilege(t *testing.T) {
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
			tag, err := e.HashTag("job")
			if err != nil {
				return err
			}
			if _, err := l.Eval(ctx, aclGuarded, "orders:jobs:"+tag, "running"); err != nil {
				return err
			}
			return l.Unlock(ctx)
		}},
		{"elections", func(ctx context.Context, e *Engine) error {
			el := e.Election("leader", LockOptions{TTL: 200 * time.Millisecond})
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
