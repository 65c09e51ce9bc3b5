package suite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// engineCall is one public operation, run for its error only.
type engineCall struct {
	name string
	run  func(ctx context.Context, e *atomicredis.Engine) error
}

// badNames are the object names every method refuses: empty, or with a
// brace (the engine adds the hash tag itself).
var badNames = []string{"", "a{b", "a}b", "{x}"}

// invalidCalls is every public method with every invalid argument, each
// row named "Method: case" ("Lock.Method: case" for a method of *Lock), so
// that TestInvalidCallsCoverTheAPI can hold the table against the method
// sets. held is a lock and permit a permit the caller holds, for the
// methods of *Lock and *Permit.
func invalidCalls(held *atomicredis.Lock, permit *atomicredis.Permit, multi *atomicredis.MultiLock) []engineCall {
	type E = atomicredis.Engine
	type C = context.Context
	var calls []engineCall
	add := func(name string, run func(ctx C, e *E) error) {
		calls = append(calls, engineCall{name, run})
	}
	// names adds one row per bad name.
	names := func(method string, run func(ctx C, e *E, name string) error) {
		for _, n := range badNames {
			add(fmt.Sprintf("%s: name %q", method, n), func(ctx C, e *E) error { return run(ctx, e, n) })
		}
	}
	// durations adds a negative and a sub-millisecond value of one duration.
	durations := func(prefix string, run func(ctx C, e *E, d time.Duration) error) {
		add(prefix+" negative", func(ctx C, e *E) error { return run(ctx, e, -time.Second) })
		add(prefix+" sub-ms", func(ctx C, e *E) error { return run(ctx, e, 999*time.Microsecond) })
	}
	// counts adds 0 and -1 for a count that must be at least 1.
	counts := func(prefix string, run func(ctx C, e *E, n int) error) {
		add(prefix+" 0", func(ctx C, e *E) error { return run(ctx, e, 0) })
		add(prefix+" -1", func(ctx C, e *E) error { return run(ctx, e, -1) })
	}
	// inexact adds counts above 2^53 - 1, which a Lua number cannot hold
	// exactly: 2^53, 2^53 + 1 and MaxInt64.
	inexact := func(prefix string, run func(ctx C, e *E, n int) error) {
		add(prefix+" 2^53", func(ctx C, e *E) error { return run(ctx, e, 1<<53) })
		add(prefix+" 2^53+1", func(ctx C, e *E) error { return run(ctx, e, 1<<53+1) })
		add(prefix+" MaxInt64", func(ctx C, e *E) error { return run(ctx, e, math.MaxInt64) })
	}
	// ids adds negative ids: -1 and the most negative.
	ids := func(method string, run func(ctx C, e *E, id int64) error) {
		add(method+": id -1", func(ctx C, e *E) error { return run(ctx, e, -1) })
		add(method+": id -2^63", func(ctx C, e *E) error { return run(ctx, e, math.MinInt64) })
	}

	type lockFunc = func(C, string, lockOpts) (*atomicredis.Lock, error)
	for method, lock := range map[string]func(*E) lockFunc{
		"Lock":     func(e *E) lockFunc { return e.Lock },
		"TryLock":  func(e *E) lockFunc { return e.TryLock },
		"RLock":    func(e *E) lockFunc { return e.RLock },
		"TryRLock": func(e *E) lockFunc { return e.TryRLock },
		"WLock":    func(e *E) lockFunc { return e.WLock },
		"TryWLock": func(e *E) lockFunc { return e.TryWLock },
	} {
		run := func(ctx C, e *E, name string, o lockOpts) error {
			_, err := lock(e)(ctx, name, o)
			return err
		}
		names(method, func(ctx C, e *E, name string) error { return run(ctx, e, name, lockOpts{}) })
		durations(method+": TTL", func(ctx C, e *E, d time.Duration) error { return run(ctx, e, "a", lockOpts{TTL: d}) })
		if !strings.HasPrefix(method, "Try") { // a Try form's Wait is not used
			durations(method+": Wait", func(ctx C, e *E, d time.Duration) error { return run(ctx, e, "a", lockOpts{Wait: d}) })
		}
		add(method+": Owner too long", func(ctx C, e *E) error {
			return run(ctx, e, "a", lockOpts{Owner: strings.Repeat("o", atomicredis.MaxOwner+1)})
		})
	}
	campaign := func(ctx C, e *E, name string, o atomicredis.ElectionOptions) error {
		_, err := e.Election(name, o).Campaign(ctx, "v")
		return err
	}
	names("Election", func(ctx C, e *E, name string) error { return campaign(ctx, e, name, atomicredis.ElectionOptions{}) })
	durations("Election: TTL", func(ctx C, e *E, d time.Duration) error {
		return campaign(ctx, e, "a", atomicredis.ElectionOptions{TTL: d})
	})
	add("Election.Campaign: value too long", func(ctx C, e *E) error {
		_, err := e.Election("a", atomicredis.ElectionOptions{}).Campaign(ctx, strings.Repeat("v", atomicredis.MaxOwner+1))
		return err
	})
	names("HashTag", func(ctx C, e *E, name string) error { _, err := e.HashTag(name); return err })
	add("Lock.Eval: nil script", func(ctx C, e *E) error { _, err := held.Eval(ctx, nil); return err })
	add("Lock.Eval: key without the tag", func(ctx C, e *E) error {
		_, err := held.Eval(ctx, atomicredis.NewGuardedScript(1, "return redis.call('SET', KEYS[1], 1)"), "untagged")
		return err
	})
	for method, lockAll := range map[string]func(*E) func(C, []string, lockOpts) (*atomicredis.MultiLock, error){
		"LockAll":    func(e *E) func(C, []string, lockOpts) (*atomicredis.MultiLock, error) { return e.LockAll },
		"TryLockAll": func(e *E) func(C, []string, lockOpts) (*atomicredis.MultiLock, error) { return e.TryLockAll },
	} {
		run := func(ctx C, e *E, names []string, o lockOpts) error { _, err := lockAll(e)(ctx, names, o); return err }
		many := make([]string, atomicredis.MaxLockAll+1)
		for i := range many {
			many[i] = fmt.Sprint("n", i)
		}
		for what, names := range map[string][]string{"no names": nil, "a name twice": {"a", "b", "a"}, "too many names": many, "a bad name": {"a", "b{"}} {
			add(method+": "+what, func(ctx C, e *E) error { return run(ctx, e, names, lockOpts{}) })
		}
		durations(method+": TTL", func(ctx C, e *E, d time.Duration) error { return run(ctx, e, []string{"a", "b"}, lockOpts{TTL: d}) })
		if method == "LockAll" {
			durations(method+": Wait", func(ctx C, e *E, d time.Duration) error { return run(ctx, e, []string{"a", "b"}, lockOpts{Wait: d}) })
		}
		add(method+": Owner too long", func(ctx C, e *E) error {
			return run(ctx, e, []string{"a", "b"}, lockOpts{Owner: strings.Repeat("o", atomicredis.MaxOwner+1)})
		})
		add(method+": nil ctx", func(_ C, e *E) error { return run(nil, e, []string{"a", "b"}, lockOpts{}) })
	}
	durations("MultiLock.Extend: duration", func(ctx C, e *E, d time.Duration) error { return multi.Extend(ctx, d) })
	add("Lock.SetOwner: owner too long", func(ctx C, e *E) error {
		return held.SetOwner(ctx, strings.Repeat("o", atomicredis.MaxOwner+1))
	})
	names("IsLocked", func(ctx C, e *E, name string) error { _, err := e.IsLocked(ctx, name); return err })
	names("LockInfo", func(ctx C, e *E, name string) error { _, err := e.LockInfo(ctx, name); return err })
	names("ForceUnlock", func(ctx C, e *E, name string) error { _, err := e.ForceUnlock(ctx, name); return err })
	durations("Lock.Extend: duration", func(ctx C, e *E, d time.Duration) error { return held.Extend(ctx, d) })

	for method, acquire := range map[string]func(e *E) semFunc{
		"AcquireSemaphore":    func(e *E) semFunc { return e.AcquireSemaphore },
		"TryAcquireSemaphore": func(e *E) semFunc { return e.TryAcquireSemaphore },
	} {
		run := func(ctx C, e *E, name string, o semOpts) error {
			_, err := acquire(e)(ctx, name, o)
			return err
		}
		names(method, func(ctx C, e *E, name string) error { return run(ctx, e, name, semOpts{Limit: 1}) })
		counts(method+": Limit", func(ctx C, e *E, n int) error { return run(ctx, e, "s", semOpts{Limit: n}) })
		inexact(method+": Limit", func(ctx C, e *E, n int) error { return run(ctx, e, "s", semOpts{Limit: n}) })
		durations(method+": TTL", func(ctx C, e *E, d time.Duration) error { return run(ctx, e, "s", semOpts{Limit: 1, TTL: d}) })
		if !strings.HasPrefix(method, "Try") {
			durations(method+": Wait", func(ctx C, e *E, d time.Duration) error { return run(ctx, e, "s", semOpts{Limit: 1, Wait: d}) })
		}
		add(method+": Owner too long", func(ctx C, e *E) error {
			return run(ctx, e, "s", semOpts{Limit: 1, Owner: strings.Repeat("o", atomicredis.MaxOwner+1)})
		})
		add(method+": Weight -1", func(ctx C, e *E) error { return run(ctx, e, "s", semOpts{Limit: 1, Weight: -1}) })
		inexact(method+": Weight", func(ctx C, e *E, n int) error { return run(ctx, e, "s", semOpts{Limit: 1, Weight: n}) })
	}
	add("Permit.SetOwner: owner too long", func(ctx C, e *E) error {
		return permit.SetOwner(ctx, strings.Repeat("o", atomicredis.MaxOwner+1))
	})
	names("SemaphoreHolders", func(ctx C, e *E, name string) error { _, err := e.SemaphoreHolders(ctx, name); return err })
	names("SemaphoreInfo", func(ctx C, e *E, name string) error { _, err := e.SemaphoreInfo(ctx, name); return err })
	names("SetSemaphoreLimit", func(ctx C, e *E, name string) error { return e.SetSemaphoreLimit(ctx, name, 2) })
	counts("SetSemaphoreLimit: limit", func(ctx C, e *E, n int) error { return e.SetSemaphoreLimit(ctx, "s", n) })
	inexact("SetSemaphoreLimit: limit", func(ctx C, e *E, n int) error { return e.SetSemaphoreLimit(ctx, "s", n) })
	durations("Permit.Extend: duration", func(ctx C, e *E, d time.Duration) error { return permit.Extend(ctx, d) })

	names("AddRecent", func(ctx C, e *E, name string) error { return e.AddRecent(ctx, name, "x") })
	add("AddRecent: empty item", func(ctx C, e *E) error { return e.AddRecent(ctx, "l", "") })
	names("RemoveRecent", func(ctx C, e *E, name string) error { return e.RemoveRecent(ctx, name, "x") })
	add("RemoveRecent: empty item", func(ctx C, e *E) error { return e.RemoveRecent(ctx, "l", "") })
	names("SuggestRecent", func(ctx C, e *E, name string) error { _, err := e.SuggestRecent(ctx, name, "a", 1); return err })
	counts("SuggestRecent: limit", func(ctx C, e *E, n int) error { _, err := e.SuggestRecent(ctx, "l", "a", n); return err })
	inexact("SuggestRecent: limit", func(ctx C, e *E, n int) error { _, err := e.SuggestRecent(ctx, "l", "a", n); return err })
	names("AddMembers", func(ctx C, e *E, name string) error { return e.AddMembers(ctx, name, "x") })
	names("RemoveMembers", func(ctx C, e *E, name string) error { return e.RemoveMembers(ctx, name, "x") })
	names("Suggest", func(ctx C, e *E, name string) error { _, err := e.Suggest(ctx, name, "a", 1); return err })
	counts("Suggest: limit", func(ctx C, e *E, n int) error { _, err := e.Suggest(ctx, "s", "a", n); return err })
	inexact("Suggest: limit", func(ctx C, e *E, n int) error { _, err := e.Suggest(ctx, "s", "a", n); return err })

	names("MarkActive", func(ctx C, e *E, name string) error { return e.MarkActive(ctx, name, "p", 1) })
	ids("MarkActive", func(ctx C, e *E, id int64) error { return e.MarkActive(ctx, "g", "p", id) })
	names("IsActive", func(ctx C, e *E, name string) error { _, err := e.IsActive(ctx, name, "p", 1); return err })
	ids("IsActive", func(ctx C, e *E, id int64) error { _, err := e.IsActive(ctx, "g", "p", id); return err })
	names("MarkActiveMany", func(ctx C, e *E, name string) error { return e.MarkActiveMany(ctx, name, "p", 1, 2) })
	for _, n := range badNames {
		add(fmt.Sprintf("MarkActiveMany: name %q, no ids", n), func(ctx C, e *E) error { return e.MarkActiveMany(ctx, n, "p") })
	}
	ids("MarkActiveMany", func(ctx C, e *E, id int64) error { return e.MarkActiveMany(ctx, "g", "p", id) })
	add("MarkActiveMany: id -1 after good ids in other shards", func(ctx C, e *E) error {
		return e.MarkActiveMany(ctx, "g", "p", 1, 5<<23, 1<<40, -1)
	})
	names("CountActive", func(ctx C, e *E, name string) error { _, err := e.CountActive(ctx, name, "p"); return err })
	add("CountActive: no periods", func(ctx C, e *E) error { _, err := e.CountActive(ctx, "g"); return err })
	names("CountActiveAll", func(ctx C, e *E, name string) error { _, err := e.CountActiveAll(ctx, name, "p"); return err })
	add("CountActiveAll: no periods", func(ctx C, e *E) error { _, err := e.CountActiveAll(ctx, "g"); return err })

	// Every method that takes a context, with a nil one and otherwise good
	// arguments.
	var nilCtx C
	for name, run := range map[string]func(ctx C, e *E) error{
		"Lock":                func(ctx C, e *E) error { _, err := e.Lock(ctx, "a", lockOpts{}); return err },
		"TryLock":             func(ctx C, e *E) error { _, err := e.TryLock(ctx, "a", lockOpts{}); return err },
		"RLock":               func(ctx C, e *E) error { _, err := e.RLock(ctx, "a", lockOpts{}); return err },
		"TryRLock":            func(ctx C, e *E) error { _, err := e.TryRLock(ctx, "a", lockOpts{}); return err },
		"WLock":               func(ctx C, e *E) error { _, err := e.WLock(ctx, "a", lockOpts{}); return err },
		"TryWLock":            func(ctx C, e *E) error { _, err := e.TryWLock(ctx, "a", lockOpts{}); return err },
		"IsLocked":            func(ctx C, e *E) error { _, err := e.IsLocked(ctx, "a"); return err },
		"LockInfo":            func(ctx C, e *E) error { _, err := e.LockInfo(ctx, "a"); return err },
		"ForceUnlock":         func(ctx C, e *E) error { _, err := e.ForceUnlock(ctx, "a"); return err },
		"AcquireSemaphore":    func(ctx C, e *E) error { _, err := e.AcquireSemaphore(ctx, "s", semOpts{Limit: 1}); return err },
		"TryAcquireSemaphore": func(ctx C, e *E) error { _, err := e.TryAcquireSemaphore(ctx, "s", semOpts{Limit: 1}); return err },
		"SemaphoreHolders":    func(ctx C, e *E) error { _, err := e.SemaphoreHolders(ctx, "s"); return err },
		"SemaphoreInfo":       func(ctx C, e *E) error { _, err := e.SemaphoreInfo(ctx, "s"); return err },
		"SetSemaphoreLimit":   func(ctx C, e *E) error { return e.SetSemaphoreLimit(ctx, "s", 2) },
		"AddRecent":           func(ctx C, e *E) error { return e.AddRecent(ctx, "l", "x") },
		"RemoveRecent":        func(ctx C, e *E) error { return e.RemoveRecent(ctx, "l", "x") },
		"SuggestRecent":       func(ctx C, e *E) error { _, err := e.SuggestRecent(ctx, "l", "x", 1); return err },
		"AddMembers":          func(ctx C, e *E) error { return e.AddMembers(ctx, "m", "x") },
		"RemoveMembers":       func(ctx C, e *E) error { return e.RemoveMembers(ctx, "m") }, // no members: nothing to send, still invalid
		"Suggest":             func(ctx C, e *E) error { _, err := e.Suggest(ctx, "m", "x", 1); return err },
		"MarkActive":          func(ctx C, e *E) error { return e.MarkActive(ctx, "g", "p", 1) },
		"MarkActiveMany":      func(ctx C, e *E) error { return e.MarkActiveMany(ctx, "g", "p", 1, 1<<40) },
		"IsActive":            func(ctx C, e *E) error { _, err := e.IsActive(ctx, "g", "p", 1); return err },
		"CountActive":         func(ctx C, e *E) error { _, err := e.CountActive(ctx, "g", "p"); return err },
		"CountActiveAll":      func(ctx C, e *E) error { _, err := e.CountActiveAll(ctx, "g", "p"); return err },
		"Close":               func(ctx C, e *E) error { return e.Close(ctx) },
		"Ping":                func(ctx C, e *E) error { return e.Ping(ctx) },
		"Lock.Unlock":         func(ctx C, e *E) error { return held.Unlock(ctx) },
		"Lock.Extend":         func(ctx C, e *E) error { return held.Extend(ctx, 0) },
		"Lock.TTL":            func(ctx C, e *E) error { _, err := held.TTL(ctx); return err },
		"Lock.Held":           func(ctx C, e *E) error { _, err := held.Held(ctx); return err },
		"Lock.SetOwner":       func(ctx C, e *E) error { return held.SetOwner(ctx, "x") },
		"MultiLock.Unlock":    func(ctx C, e *E) error { return multi.Unlock(ctx) },
		"MultiLock.Extend":    func(ctx C, e *E) error { return multi.Extend(ctx, 0) },
		"MultiLock.TTL":       func(ctx C, e *E) error { _, err := multi.TTL(ctx); return err },
		"MultiLock.Held":      func(ctx C, e *E) error { _, err := multi.Held(ctx); return err },
		"Lock.Eval": func(ctx C, e *E) error {
			_, err := held.Eval(ctx, atomicredis.NewGuardedScript(0, "return 1"))
			return err
		},
		"Election.Campaign": func(ctx C, e *E) error {
			_, err := e.Election("a", atomicredis.ElectionOptions{}).Campaign(ctx, "v")
			return err
		},
		"Election.Leader": func(ctx C, e *E) error {
			_, err := e.Election("a", atomicredis.ElectionOptions{}).Leader(ctx)
			return err
		},
		"Permit.Release":  func(ctx C, e *E) error { return permit.Release(ctx) },
		"Permit.Extend":   func(ctx C, e *E) error { return permit.Extend(ctx, 0) },
		"Permit.TTL":      func(ctx C, e *E) error { _, err := permit.TTL(ctx); return err },
		"Permit.Held":     func(ctx C, e *E) error { _, err := permit.Held(ctx); return err },
		"Permit.SetOwner": func(ctx C, e *E) error { return permit.SetOwner(ctx, "x") },
	} {
		add(name+": nil ctx", func(_ C, e *E) error { return run(nilCtx, e) })
	}
	return calls
}

func tryLock(name string, o lockOpts) func(context.Context, *atomicredis.Engine) error {
	return func(ctx context.Context, e *atomicredis.Engine) error { _, err := e.TryLock(ctx, name, o); return err }
}

func acquire(name string, o semOpts) func(context.Context, *atomicredis.Engine) error {
	return func(ctx context.Context, e *atomicredis.Engine) error {
		_, err := e.TryAcquireSemaphore(ctx, name, o)
		return err
	}
}

type semFunc = func(context.Context, string, semOpts) (*atomicredis.Permit, error)

// Every invalid argument is ErrInvalid, with the package's prefix, and
// writes nothing.
func badInputWritesNothing(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	held, err := e.TryLock(ctx, "held", lockOpts{})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := e.TryAcquireSemaphore(ctx, "held", semOpts{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	multi, err := e.TryLockAll(ctx, []string{"held-1", "held-2"}, lockOpts{})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot(t)
	for _, c := range invalidCalls(held, permit, multi) {
		err := c.run(ctx, e)
		if !errors.Is(err, atomicredis.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		} else if !strings.HasPrefix(err.Error(), "atomicredis: ") {
			t.Errorf("%s: error %q lacks the package prefix", c.name, err)
		}
	}
	bad := atomicredis.New(s.Engines, atomicredis.WithNamespace(s.NS+"{"))
	if err := tryLock("x", lockOpts{})(ctx, bad); !errors.Is(err, atomicredis.ErrInvalid) {
		t.Errorf("TryLock on an engine with a braced namespace: %v, want ErrInvalid", err)
	}
	for _, n := range []int{1 << 53, math.MaxInt64} { // a capacity a Lua number cannot hold
		big := atomicredis.New(s.Engines, atomicredis.WithNamespace(s.NS), atomicredis.WithRecentCapacity(n))
		if err := big.AddRecent(ctx, "l", "x"); !errors.Is(err, atomicredis.ErrInvalid) {
			t.Errorf("AddRecent on an engine with recent capacity %d: %v, want ErrInvalid", n, err)
		}
	}
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("bad input changed keys:\n%q\n->\n%q", before, after)
	}
}

// A key of the wrong type at an object's name, or at one of its other
// keys: an error that carries the server's reply (a redis.Error, so it
// tells a failed script from a broken connection), and the keys untouched.
func wrongType(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
	for _, c := range []struct {
		name string
		key  string // <ns><kind>:{<name>}..., the object's key layout
		run  func() error
	}{
		{"TryLock on a list", "lock:{w}", func() error { return tryLock("w", lockOpts{})(ctx, e) }},
		{"TryLock on a string (a v4 engine's lock)", "lock:{f}", func() error { return tryLock("f", lockOpts{})(ctx, e) }},
		{"IsLocked on a list", "lock:{w}", func() error { _, err := e.IsLocked(ctx, "w"); return err }},
		{"TryRLock on a list", "rw:{w}", func() error { _, err := e.TryRLock(ctx, "w", lockOpts{}); return err }},
		{"WLock, waiters a list", "rw:{w}:waiters", func() error { _, err := e.WLock(ctx, "w", lockOpts{}); return err }},
		{"RLock with a list fence", "rw:{f}:fence", func() error { _, err := e.RLock(ctx, "f", lockOpts{}); return err }},
		{"WLock, queue a list", "rw:{w}:queue", func() error { _, err := e.WLock(ctx, "w", lockOpts{}); return err }},
		{"AcquireSemaphore on a list", "sem:{w}", func() error { return acquire("w", semOpts{Limit: 1})(ctx, e) }},
		{"AcquireSemaphore, owner a list", "sem:{w}:owner", func() error { return acquire("w", semOpts{Limit: 1})(ctx, e) }},
		{"AcquireSemaphore, counter a list", "sem:{w}:counter", func() error { return acquire("w", semOpts{Limit: 1})(ctx, e) }},
		{"AcquireSemaphore, owners a list", "sem:{w}:owners", func() error { return acquire("w", semOpts{Limit: 1})(ctx, e) }},
		{"AcquireSemaphore with an Owner, owners a list", "sem:{w}:owners", func() error { return acquire("w", semOpts{Limit: 1, Owner: "o"})(ctx, e) }},
		{"TryRLock with an Owner, holds a list", "rw:{w}:holds", func() error { _, err := e.TryRLock(ctx, "w", lockOpts{Owner: "o"}); return err }},
		{"SemaphoreHolders on a list", "sem:{w}", func() error { _, err := e.SemaphoreHolders(ctx, "w"); return err }},
		{"SemaphoreHolders, owner a list", "sem:{w}:owner", func() error { _, err := e.SemaphoreHolders(ctx, "w"); return err }},
		{"AddRecent on a set", "recent:{w}", func() error { return e.AddRecent(ctx, "w", "x") }},
		{"SuggestRecent on a set", "recent:{w}", func() error { _, err := e.SuggestRecent(ctx, "w", "x", 1); return err }},
		{"AddRecent on a zset", "recent:{w}", func() error { return e.AddRecent(ctx, "w", "x") }},
		{"RemoveRecent on a zset", "recent:{w}", func() error { return e.RemoveRecent(ctx, "w", "x") }},
		{"SuggestRecent on a zset", "recent:{w}", func() error { _, err := e.SuggestRecent(ctx, "w", "x", 1); return err }},
		{"AddMembers on a list", "members:{w}", func() error { return e.AddMembers(ctx, "w", "x", "y") }},
		{"Suggest on a list", "members:{w}", func() error { _, err := e.Suggest(ctx, "w", "x", 1); return err }},
		{"RemoveMembers on a list", "members:{w}", func() error { return e.RemoveMembers(ctx, "w", "x") }},
	} {
		key := s.NS + c.key
		s.Must(t, "DEL", key)
		switch {
		case strings.Contains(c.name, "on a set"):
			s.Must(t, "SADD", key, "x")
		case strings.Contains(c.name, "on a zset"):
			s.Must(t, "ZADD", key, 1, "x")
		case strings.Contains(c.name, "on a string"):
			s.Must(t, "SET", key, "v4-token 1796683402987094 0")
		default:
			s.Must(t, "RPUSH", key, "x", "y\xff")
		}
		wantWrongType(t, s, c.name, c.run)
		s.Must(t, "DEL", key)
	}

	// A lock's key holding a v4 engine's lock (a string) is refused before
	// anything is written.
	s.Must(t, "SET", s.NS+"lock:{g}", "v4-token 1796683402987094 0", "PX", 60000)
	if err := tryLock("g", lockOpts{})(ctx, e); err == nil {
		t.Error("TryLock on a v4 engine's lock: no error")
	}
	if ks := s.Keys(t); !slices.Equal(ks, []string{s.NS + "lock:{g}"}) {
		t.Errorf("keys after a refused TryLock: %q", ks)
	}
	s.Must(t, "DEL", s.NS+"lock:{g}")

	// A permit whose owner set was replaced by another type: an error, no
	// change.
	p, err := e.TryAcquireSemaphore(ctx, "pw", semOpts{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.Must(t, "DEL", s.NS+"sem:{pw}:owner")
	s.Must(t, "RPUSH", s.NS+"sem:{pw}:owner", "x")
	before := s.Snapshot(t)
	for name, err := range map[string]error{"Release": p.Release(ctx), "Extend": p.Extend(ctx, 0)} {
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Permit.%s with a list owner set: %v", name, err)
		}
	}
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("changed keys: %q -> %q", before, after)
	}
}

// wantWrongType runs a call that meets a key of the wrong type: it must
// return the server's WRONGTYPE reply as a redis.Error and change nothing.
func wantWrongType(t *testing.T, s *testserver.Server, name string, run func() error) {
	t.Helper()
	before := s.Snapshot(t)
	err := run()
	var reply redis.Error
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("%s: %v, want a WRONGTYPE error", name, err)
	} else if !errors.As(err, &reply) {
		t.Errorf("%s: %v (%T) does not wrap the server's reply as a redis.Error", name, err, errors.Unwrap(err))
	}
	if after := s.Snapshot(t); !maps.Equal(before, after) {
		t.Errorf("%s changed keys: %q -> %q", name, before, after)
	}
}

// After SCRIPT FLUSH the first EVALSHA answers NOSCRIPT, which must come
// back as the redis.Error the engine looks for to load the script again
// (SCRIPT LOAD) and resend it.
func scriptFlush(t *testing.T, s *testserver.Server) {
	ctx, e := ctxT(t), engine(s)
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
	if got, err := e.Suggest(ctx, "sf", "ab", 10); err != nil || !slices.Equal(got, []string{"abc", "abd"}) {
		t.Errorf("Suggest after SCRIPT FLUSH = %q, %v", got, err)
	}
	if locked, err := e.IsLocked(ctx, "sf"); err != nil || locked {
		t.Errorf("IsLocked = %v, %v after the Unlock", locked, err)
	}
}
