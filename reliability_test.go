package atomicredis

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// call is one public operation, run for its error only.
type call struct {
	name string
	run  func(ctx context.Context, e *Engine) error
}

func lockCall(name string, o LockOptions) func(context.Context, *Engine) error {
	return func(ctx context.Context, e *Engine) error { _, err := e.TryLock(ctx, name, o); return err }
}

// invalidCalls are every public method with every kind of bad argument.
func invalidCalls() []call {
	return []call{
		{"TryLock empty name", lockCall("", LockOptions{})},
		{"TryLock name with {", lockCall("a{b", LockOptions{})},
		{"TryLock name with }", lockCall("a}b", LockOptions{})},
		{"TryLock negative TTL", lockCall("a", LockOptions{TTL: -time.Second})},
		{"TryLock sub-ms TTL", lockCall("a", LockOptions{TTL: time.Microsecond})},
		{"TryLock negative Wait", lockCall("a", LockOptions{Wait: -1})},
		{"Lock sub-ms Wait", func(ctx context.Context, e *Engine) error {
			_, err := e.Lock(ctx, "a", LockOptions{Wait: 999 * time.Microsecond})
			return err
		}},
		{"Lock empty name", func(ctx context.Context, e *Engine) error { _, err := e.Lock(ctx, "", LockOptions{}); return err }},
		{"IsLocked empty name", func(ctx context.Context, e *Engine) error { _, err := e.IsLocked(ctx, ""); return err }},
		{"IsLocked braces", func(ctx context.Context, e *Engine) error { _, err := e.IsLocked(ctx, "{x}"); return err }},
		{"AcquireSemaphore limit 0", semCall("s", SemaphoreOptions{})},
		{"AcquireSemaphore limit -1", semCall("s", SemaphoreOptions{Limit: -1})},
		{"AcquireSemaphore empty name", semCall("", SemaphoreOptions{Limit: 1})},
		{"AcquireSemaphore braces", semCall("s}", SemaphoreOptions{Limit: 1})},
		{"AcquireSemaphore negative TTL", semCall("s", SemaphoreOptions{Limit: 1, TTL: -time.Millisecond})},
		{"AcquireSemaphore sub-ms TTL", semCall("s", SemaphoreOptions{Limit: 1, TTL: 10 * time.Microsecond})},
		{"AcquireSemaphore negative Wait", semCall("s", SemaphoreOptions{Limit: 1, Wait: -time.Second})},
		{"AcquireSemaphore sub-ms Wait", semCall("s", SemaphoreOptions{Limit: 1, Wait: time.Nanosecond})},
		{"SemaphoreHolders empty name", func(ctx context.Context, e *Engine) error { _, err := e.SemaphoreHolders(ctx, ""); return err }},
		{"SemaphoreHolders braces", func(ctx context.Context, e *Engine) error { _, err := e.SemaphoreHolders(ctx, "{"); return err }},
		{"AddRecent empty list", func(ctx context.Context, e *Engine) error { return e.AddRecent(ctx, "", "x") }},
		{"AddRecent braces", func(ctx context.Context, e *Engine) error { return e.AddRecent(ctx, "l{", "x") }},
		{"AddRecent empty item", func(ctx context.Context, e *Engine) error { return e.AddRecent(ctx, "l", "") }},
		{"RemoveRecent empty item", func(ctx context.Context, e *Engine) error { return e.RemoveRecent(ctx, "l", "") }},
		{"RemoveRecent braces", func(ctx context.Context, e *Engine) error { return e.RemoveRecent(ctx, "}", "x") }},
		{"SuggestRecent limit 0", func(ctx context.Context, e *Engine) error { _, err := e.SuggestRecent(ctx, "l", "a", 0); return err }},
		{"SuggestRecent limit -1", func(ctx context.Context, e *Engine) error { _, err := e.SuggestRecent(ctx, "l", "a", -1); return err }},
		{"SuggestRecent empty list", func(ctx context.Context, e *Engine) error { _, err := e.SuggestRecent(ctx, "", "a", 1); return err }},
		{"AddMembers empty set", func(ctx context.Context, e *Engine) error { return e.AddMembers(ctx, "", "x") }},
		{"AddMembers braces", func(ctx context.Context, e *Engine) error { return e.AddMembers(ctx, "{s}", "x") }},
		{"RemoveMembers empty set", func(ctx context.Context, e *Engine) error { return e.RemoveMembers(ctx, "", "x") }},
		{"Suggest limit 0", func(ctx context.Context, e *Engine) error { _, err := e.Suggest(ctx, "s", "a", 0); return err }},
		{"Suggest braces", func(ctx context.Context, e *Engine) error { _, err := e.Suggest(ctx, "s{", "a", 1); return err }},
		{"MarkActive id -1", func(ctx context.Context, e *Engine) error { return e.MarkActive(ctx, "g", "p", -1) }},
		{"MarkActive id 2^32", func(ctx context.Context, e *Engine) error { return e.MarkActive(ctx, "g", "p", 1<<32) }},
		{"MarkActive empty group", func(ctx context.Context, e *Engine) error { return e.MarkActive(ctx, "", "p", 1) }},
		{"IsActive id -1", func(ctx context.Context, e *Engine) error { _, err := e.IsActive(ctx, "g", "p", -1); return err }},
		{"IsActive braces", func(ctx context.Context, e *Engine) error { _, err := e.IsActive(ctx, "g}", "p", 1); return err }},
		{"CountActive no periods", func(ctx context.Context, e *Engine) error { _, err := e.CountActive(ctx, "g"); return err }},
		{"CountActive empty group", func(ctx context.Context, e *Engine) error { _, err := e.CountActive(ctx, "", "p"); return err }},
	}
}

func semCall(name string, o SemaphoreOptions) func(context.Context, *Engine) error {
	return func(ctx context.Context, e *Engine) error { _, err := e.AcquireSemaphore(ctx, name, o); return err }
}

func TestBadInputWritesNothing(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		held, err := e.TryLock(ctx, "held", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := s.snapshot(t)
		for _, c := range invalidCalls() {
			err := c.run(ctx, e)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", c.name, err)
			} else if !strings.HasPrefix(err.Error(), "atomicredis: ") {
				t.Errorf("%s: error %q lacks the package prefix", c.name, err)
			}
		}
		for _, c := range []struct {
			name string
			run  func() error
		}{
			{"Extend negative", func() error { return held.Extend(ctx, -time.Second) }},
			{"Extend sub-ms", func() error { return held.Extend(ctx, time.Nanosecond) }},
		} {
			if err := c.run(); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", c.name, err)
			}
		}
		if after := s.snapshot(t); !sameMap(before, after) {
			t.Errorf("bad input changed keys:\n%v\n->\n%v", before, after)
		}
	})
}

// A rejected option or a nil pool makes every call fail with ErrInvalid,
// before any I/O.
func TestBadEngine(t *testing.T) {
	s := newMini(t)
	for name, e := range map[string]*Engine{
		"nil pool":          New(nil),
		"namespace {":       New(s.pool, WithNamespace("a{")),
		"namespace }":       New(s.pool, WithNamespace("}")),
		"recent capacity":   New(s.pool, WithRecentCapacity(0)),
		"negative capacity": New(s.pool, WithRecentCapacity(-5)),
	} {
		for _, c := range validCalls() {
			if strings.HasPrefix(c.name, "Lock.") || strings.HasPrefix(c.name, "Permit.") {
				continue // no lock to call it on
			}
			if err := c.run(ctxT(t), e); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %s: %v, want ErrInvalid", name, c.name, err)
			}
		}
	}
	if ks := s.keys(t); len(ks) != 0 {
		t.Errorf("keys written: %q", ks)
	}
}

// validCalls are every public operation on good arguments; each must work
// on a cluster node (no CROSSSLOT) and fail cleanly on a bad engine.
func validCalls() []call {
	var l *Lock
	var p *Permit
	return []call{
		{"TryLock", func(ctx context.Context, e *Engine) (err error) {
			l, err = e.TryLock(ctx, "c1", LockOptions{Watchdog: true})
			return err
		}},
		{"IsLocked", func(ctx context.Context, e *Engine) error { _, err := e.IsLocked(ctx, "c1"); return err }},
		{"Lock.Extend", func(ctx context.Context, e *Engine) error { return l.Extend(ctx, time.Minute) }},
		{"Lock.TTL", func(ctx context.Context, e *Engine) error { _, err := l.TTL(ctx); return err }},
		{"Lock.Held", func(ctx context.Context, e *Engine) error { _, err := l.Held(ctx); return err }},
		{"Lock.Unlock", func(ctx context.Context, e *Engine) error { return l.Unlock(ctx) }},
		{"Lock", func(ctx context.Context, e *Engine) (err error) {
			l, err = e.Lock(ctx, "c1", LockOptions{})
			if err == nil {
				err = l.Unlock(ctx)
			}
			return err
		}},
		{"AcquireSemaphore", func(ctx context.Context, e *Engine) (err error) {
			p, err = e.AcquireSemaphore(ctx, "c2", SemaphoreOptions{Limit: 2, Wait: time.Second})
			return err
		}},
		{"SemaphoreHolders", func(ctx context.Context, e *Engine) error { _, err := e.SemaphoreHolders(ctx, "c2"); return err }},
		{"Permit.Refresh", func(ctx context.Context, e *Engine) error { return p.Refresh(ctx) }},
		{"Permit.Release", func(ctx context.Context, e *Engine) error { return p.Release(ctx) }},
		{"AddRecent", func(ctx context.Context, e *Engine) error { return e.AddRecent(ctx, "c3", "Alice") }},
		{"SuggestRecent", func(ctx context.Context, e *Engine) error { _, err := e.SuggestRecent(ctx, "c3", "al", 5); return err }},
		{"RemoveRecent", func(ctx context.Context, e *Engine) error { return e.RemoveRecent(ctx, "c3", "Alice") }},
		{"AddMembers", func(ctx context.Context, e *Engine) error { return e.AddMembers(ctx, "c4", "abc", "abd", "b") }},
		{"Suggest", func(ctx context.Context, e *Engine) error { _, err := e.Suggest(ctx, "c4", "ab", 5); return err }},
		{"RemoveMembers", func(ctx context.Context, e *Engine) error { return e.RemoveMembers(ctx, "c4", "abc") }},
		{"MarkActive", func(ctx context.Context, e *Engine) error { return e.MarkActive(ctx, "c5", "d1", 7) }},
		{"IsActive", func(ctx context.Context, e *Engine) error { _, err := e.IsActive(ctx, "c5", "d1", 7); return err }},
		{"CountActive", func(ctx context.Context, e *Engine) error { _, err := e.CountActive(ctx, "c5", "d1", "d2"); return err }},
	}
}

// Every operation on a cluster-enabled node: a key outside the object's
// hash tag would fail with CROSSSLOT.
func TestCluster(t *testing.T) {
	addr := os.Getenv("REDIS_CLUSTER_ADDR")
	if addr == "" {
		t.Skip("REDIS_CLUSTER_ADDR not set")
	}
	s := newReal(t, "cluster", addr)
	if info, _ := s.do("CLUSTER", "INFO"); !strings.Contains(string(info.([]byte)), "cluster_state:ok") {
		t.Fatalf("not a healthy cluster node: %s", info)
	}
	ctx, e := ctxT(t), s.engine()
	for _, c := range validCalls() {
		if err := c.run(ctx, e); err != nil {
			t.Errorf("%s on a cluster node: %v", c.name, err)
		}
	}
}

// A key of the wrong type at an object's name: an error, the key untouched.
func TestWrongType(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		for _, c := range []struct {
			name string
			key  string
			run  func() error
		}{
			{"TryLock on a list", s.ns + "lock:{w}", func() error { _, err := e.TryLock(ctx, "w", LockOptions{}); return err }},
			{"TryLock with a list fence", s.ns + "lock:{f}:fence", func() error { _, err := e.TryLock(ctx, "f", LockOptions{}); return err }},
			{"IsLocked on a list", s.ns + "lock:{w}", func() error { _, err := e.IsLocked(ctx, "w"); return err }},
			{"AcquireSemaphore on a list", s.ns + "sem:{w}", func() error { return semCall("w", SemaphoreOptions{Limit: 1})(ctx, e) }},
			{"AcquireSemaphore, owner a list", s.ns + "sem:{w}:owner", func() error { return semCall("w", SemaphoreOptions{Limit: 1})(ctx, e) }},
			{"AcquireSemaphore, counter a list", s.ns + "sem:{w}:counter", func() error { return semCall("w", SemaphoreOptions{Limit: 1})(ctx, e) }},
			{"SemaphoreHolders on a list", s.ns + "sem:{w}", func() error { _, err := e.SemaphoreHolders(ctx, "w"); return err }},
			{"SemaphoreHolders, owner a list", s.ns + "sem:{w}:owner", func() error { _, err := e.SemaphoreHolders(ctx, "w"); return err }},
			{"AddRecent on a zset", s.ns + "recent:{w}", func() error { return e.AddRecent(ctx, "w", "x") }},
			{"RemoveRecent on a zset", s.ns + "recent:{w}", func() error { return e.RemoveRecent(ctx, "w", "x") }},
			{"SuggestRecent on a zset", s.ns + "recent:{w}", func() error { _, err := e.SuggestRecent(ctx, "w", "x", 1); return err }},
			{"AddMembers on a list", s.ns + "members:{w}", func() error { return e.AddMembers(ctx, "w", "x", "y") }},
			{"RemoveMembers on a list", s.ns + "members:{w}", func() error { return e.RemoveMembers(ctx, "w", "x") }},
			{"Suggest on a list", s.ns + "members:{w}", func() error { _, err := e.Suggest(ctx, "w", "x", 1); return err }},
			{"MarkActive on a list", s.ns + "active:{w}:p", func() error { return e.MarkActive(ctx, "w", "p", 1) }},
			{"IsActive on a list", s.ns + "active:{w}:p", func() error { _, err := e.IsActive(ctx, "w", "p", 1); return err }},
			{"CountActive, one period a list", s.ns + "active:{w}:p", func() error { _, err := e.CountActive(ctx, "w", "p"); return err }},
			{"CountActive, a later period a list", s.ns + "active:{w}:p", func() error { _, err := e.CountActive(ctx, "w", "a", "b", "p"); return err }},
		} {
			s.must(t, "DEL", c.key)
			if strings.Contains(c.name, "on a zset") {
				s.must(t, "ZADD", c.key, 1, "x")
			} else {
				s.must(t, "RPUSH", c.key, "x")
			}
			if strings.Contains(c.name, "CountActive") {
				s.must(t, "SETBIT", s.ns+"active:{w}:a", 3, 1) // a good period before the bad one
			}
			before := s.snapshot(t)
			err := c.run()
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("%s: %v, want a WRONGTYPE error", c.name, err)
			}
			if after := s.snapshot(t); !sameMap(before, after) {
				t.Errorf("%s changed keys: %v -> %v", c.name, before, after)
			}
			s.must(t, "DEL", c.key, s.ns+"active:{w}:a")
		}
		// A fence key holding text, not a counter, is refused before the SET.
		s.must(t, "SET", s.ns+"lock:{g}:fence", "abc")
		if _, err := e.TryLock(ctx, "g", LockOptions{}); err == nil {
			t.Error("TryLock with a corrupt fence: no error")
		}
		if ks := s.keys(t); !sameStrings(ks, []string{s.ns + "lock:{g}:fence"}) {
			t.Errorf("keys after a refused TryLock: %q", ks)
		}
		// A permit whose keys were replaced by another type: an error, no change.
		p, err := e.AcquireSemaphore(ctx, "pw", SemaphoreOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.must(t, "DEL", s.ns+"sem:{pw}:owner")
		s.must(t, "RPUSH", s.ns+"sem:{pw}:owner", "x")
		before := s.snapshot(t)
		for name, err := range map[string]error{"Release": p.Release(ctx), "Refresh": p.Refresh(ctx)} {
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("Permit.%s with a list owner set: %v", name, err)
			}
		}
		if after := s.snapshot(t); !sameMap(before, after) {
			t.Errorf("changed keys: %v -> %v", before, after)
		}
	})
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
