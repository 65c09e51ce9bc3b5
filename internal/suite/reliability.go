package suite

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

type engineCall struct {
	name string
	run  func(ctx context.Context, e *atomicredis.Engine) error
}

func tryLock(name string, o lockOpts) func(context.Context, *atomicredis.Engine) error {
	return func(ctx context.Context, e *atomicredis.Engine) error { _, err := e.TryLock(ctx, name, o); return err }
}

func acquire(name string, o semOpts) func(context.Context, *atomicredis.Engine) error {
	return func(ctx context.Context, e *atomicredis.Engine) error {
		_, err := e.AcquireSemaphore(ctx, name, o)
		return err
	}
}

// invalidCalls are the public methods with every kind of bad argument.
func invalidCalls() []engineCall {
	type E = atomicredis.Engine
	type C = context.Context
	return []engineCall{
		{"TryLock empty name", tryLock("", lockOpts{})},
		{"TryLock name with {", tryLock("a{b", lockOpts{})},
		{"TryLock name with }", tryLock("a}b", lockOpts{})},
		{"TryLock negative TTL", tryLock("a", lockOpts{TTL: -time.Second})},
		{"TryLock sub-ms TTL", tryLock("a", lockOpts{TTL: time.Microsecond})},
		{"Lock sub-ms Wait", func(ctx C, e *E) error {
			_, err := e.Lock(ctx, "a", lockOpts{Wait: 999 * time.Microsecond})
			return err
		}},
		{"Lock empty name", func(ctx C, e *E) error { _, err := e.Lock(ctx, "", lockOpts{}); return err }},
		{"IsLocked braces", func(ctx C, e *E) error { _, err := e.IsLocked(ctx, "{x}"); return err }},
		{"AcquireSemaphore limit 0", acquire("s", semOpts{})},
		{"AcquireSemaphore limit -1", acquire("s", semOpts{Limit: -1})},
		{"AcquireSemaphore braces", acquire("s}", semOpts{Limit: 1})},
		{"AcquireSemaphore negative TTL", acquire("s", semOpts{Limit: 1, TTL: -time.Millisecond})},
		{"AcquireSemaphore sub-ms Wait", acquire("s", semOpts{Limit: 1, Wait: time.Nanosecond})},
		{"SemaphoreHolders empty name", func(ctx C, e *E) error { _, err := e.SemaphoreHolders(ctx, ""); return err }},
		{"AddRecent empty list", func(ctx C, e *E) error { return e.AddRecent(ctx, "", "x") }},
		{"AddRecent empty item", func(ctx C, e *E) error { return e.AddRecent(ctx, "l", "") }},
		{"RemoveRecent braces", func(ctx C, e *E) error { return e.RemoveRecent(ctx, "}", "x") }},
		{"SuggestRecent limit 0", func(ctx C, e *E) error { _, err := e.SuggestRecent(ctx, "l", "a", 0); return err }},
		{"AddMembers braces", func(ctx C, e *E) error { return e.AddMembers(ctx, "{s}", "x") }},
		{"RemoveMembers empty set", func(ctx C, e *E) error { return e.RemoveMembers(ctx, "", "x") }},
		{"Suggest limit -1", func(ctx C, e *E) error { _, err := e.Suggest(ctx, "s", "a", -1); return err }},
		{"MarkActive id -1", func(ctx C, e *E) error { return e.MarkActive(ctx, "g", "p", -1) }},
		{"MarkActive id 2^32", func(ctx C, e *E) error { return e.MarkActive(ctx, "g", "p", 1<<32) }},
		{"IsActive braces", func(ctx C, e *E) error { _, err := e.IsActive(ctx, "g}", "p", 1); return err }},
		{"CountActive no periods", func(ctx C, e *E) error { _, err := e.CountActive(ctx, "g"); return err }},
	}
}

func badInputWritesNothing(t *testing.T, s *server) {
	ctx, e := ctxT(t), s.engine()
	held, err := e.TryLock(ctx, "held", lockOpts{})
	if err != nil {
		t.Fatal(err)
	}
	before := s.snapshot(t)
	for _, c := range invalidCalls() {
		if err := c.run(ctx, e); !errors.Is(err, atomicredis.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	for name, err := range map[string]error{
		"Extend negative": held.Extend(ctx, -time.Second),
		"Extend sub-ms":   held.Extend(ctx, time.Nanosecond),
	} {
		if !errors.Is(err, atomicredis.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	bad := atomicredis.New(s.Pool, atomicredis.WithNamespace(s.ns+"{"))
	if err := tryLock("x", lockOpts{})(ctx, bad); !errors.Is(err, atomicredis.ErrInvalid) {
		t.Errorf("TryLock on an engine with a braced namespace: %v, want ErrInvalid", err)
	}
	if after := s.snapshot(t); !sameMap(before, after) {
		t.Errorf("bad input changed keys:\n%q\n->\n%q", before, after)
	}
}

// A key of the wrong type at an object's name: an error that carries the
// server's reply (a redis.Error, so it tells a failed script from a broken
// connection), and the key untouched.
func wrongType(t *testing.T, s *server) {
	ctx, e := ctxT(t), s.engine()
	for _, c := range []struct {
		name string
		key  string // <ns><kind>:{<name>}..., the layout the README documents
		run  func() error
	}{
		{"TryLock on a list", "lock:{w}", func() error { return tryLock("w", lockOpts{})(ctx, e) }},
		{"IsLocked on a list", "lock:{w}", func() error { _, err := e.IsLocked(ctx, "w"); return err }},
		{"AcquireSemaphore on a list", "sem:{w}", func() error { return acquire("w", semOpts{Limit: 1})(ctx, e) }},
		{"SemaphoreHolders on a list", "sem:{w}", func() error { _, err := e.SemaphoreHolders(ctx, "w"); return err }},
		{"AddRecent on a set", "recent:{w}", func() error { return e.AddRecent(ctx, "w", "x") }},
		{"SuggestRecent on a set", "recent:{w}", func() error { _, err := e.SuggestRecent(ctx, "w", "x", 1); return err }},
		{"AddMembers on a list", "members:{w}", func() error { return e.AddMembers(ctx, "w", "x", "y") }},
		{"Suggest on a list", "members:{w}", func() error { _, err := e.Suggest(ctx, "w", "x", 1); return err }},
		{"RemoveMembers on a list", "members:{w}", func() error { return e.RemoveMembers(ctx, "w", "x") }},
		{"MarkActive on a list", "active:{w}:p", func() error { return e.MarkActive(ctx, "w", "p", 1) }},
		{"CountActive on a list", "active:{w}:p", func() error { _, err := e.CountActive(ctx, "w", "p"); return err }},
	} {
		key := s.ns + c.key
		s.must(t, "DEL", key)
		if strings.Contains(c.name, "on a set") {
			s.must(t, "SADD", key, "x")
		} else {
			s.must(t, "RPUSH", key, "x", "y\xff")
		}
		before := s.snapshot(t)
		err := c.run()
		var reply redis.Error
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("%s: %v, want a WRONGTYPE error", c.name, err)
		} else if !errors.As(err, &reply) {
			t.Errorf("%s: %v (%T) does not wrap the server's reply as a redis.Error", c.name, err, errors.Unwrap(err))
		}
		if after := s.snapshot(t); !sameMap(before, after) {
			t.Errorf("%s changed keys: %q -> %q", c.name, before, after)
		}
		s.must(t, "DEL", key)
	}
}

// After SCRIPT FLUSH the first EVALSHA answers NOSCRIPT, which must come
// back as the redis.Error redigo's Script looks for to resend with EVAL.
func scriptFlush(t *testing.T, s *server) {
	ctx, e := ctxT(t), s.engine()
	l, err := e.TryLock(ctx, "sf", lockOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddMembers(ctx, "sf", "abc", "abd"); err != nil {
		t.Fatal(err)
	}
	if err := s.Broadcast("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
	}
	if err := s.Broadcast("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Suggest(ctx, "sf", "ab", 10); err != nil || !sameStrings(got, []string{"abc", "abd"}) {
		t.Errorf("Suggest after SCRIPT FLUSH = %q, %v", got, err)
	}
	if locked, err := e.IsLocked(ctx, "sf"); err != nil || locked {
		t.Errorf("IsLocked = %v, %v after the Unlock", locked, err)
	}
}
