package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// call is one public operation, run for its error only.
type call struct {
	name string
	run  func(ctx context.Context, e *Engine) error
}

// badNames are the object names every method refuses: empty, or with a
// brace (the engine adds the hash tag itself).
var badNames = []string{"", "a{b", "a}b", "{x}"}

// invalidCalls is every public method with every invalid argument, each
// row named "Method: case" ("Lock.Method: case" for a method of *Lock), so
// that TestInvalidCallsCoverTheAPI can hold the table against the method
// sets. held is a lock the caller holds, for the methods of *Lock.
func invalidCalls(held *Lock) []call {
	var calls []call
	add := func(name string, run func(ctx context.Context, e *Engine) error) {
		calls = append(calls, call{name, run})
	}
	// names adds one row per bad name.
	names := func(method string, run func(ctx context.Context, e *Engine, name string) error) {
		for _, n := range badNames {
			add(fmt.Sprintf("%s: name %q", method, n), func(ctx context.Context, e *Engine) error { return run(ctx, e, n) })
		}
	}
	// durations adds a negative and a sub-millisecond value of one duration.
	durations := func(prefix string, run func(ctx context.Context, e *Engine, d time.Duration) error) {
		add(prefix+" negative", func(ctx context.Context, e *Engine) error { return run(ctx, e, -time.Second) })
		add(prefix+" sub-ms", func(ctx context.Context, e *Engine) error { return run(ctx, e, 999*time.Microsecond) })
	}
	// counts adds 0 and -1 for a count that must be at least 1.
	counts := func(prefix string, run func(ctx context.Context, e *Engine, n int) error) {
		add(prefix+" 0", func(ctx context.Context, e *Engine) error { return run(ctx, e, 0) })
		add(prefix+" -1", func(ctx context.Context, e *Engine) error { return run(ctx, e, -1) })
	}
	// ids adds the ids just outside [0, 2^32).
	ids := func(method string, run func(ctx context.Context, e *Engine, id int64) error) {
		add(method+": id -1", func(ctx context.Context, e *Engine) error { return run(ctx, e, -1) })
		add(method+": id 2^32", func(ctx context.Context, e *Engine) error { return run(ctx, e, MaxActiveID+1) })
	}

	for method, lock := range map[string]func(*Engine) func(context.Context, string, LockOptions) (*Lock, error){
		"Lock":     func(e *Engine) func(context.Context, string, LockOptions) (*Lock, error) { return e.Lock },
		"TryLock":  func(e *Engine) func(context.Context, string, LockOptions) (*Lock, error) { return e.TryLock },
		"RLock":    func(e *Engine) func(context.Context, string, LockOptions) (*Lock, error) { return e.RLock },
		"TryRLock": func(e *Engine) func(context.Context, string, LockOptions) (*Lock, error) { return e.TryRLock },
		"WLock":    func(e *Engine) func(context.Context, string, LockOptions) (*Lock, error) { return e.WLock },
		"TryWLock": func(e *Engine) func(context.Context, string, LockOptions) (*Lock, error) { return e.TryWLock },
	} {
		run := func(ctx context.Context, e *Engine, name string, o LockOptions) error {
			_, err := lock(e)(ctx, name, o)
			return err
		}
		names(method, func(ctx context.Context, e *Engine, name string) error { return run(ctx, e, name, LockOptions{}) })
		durations(method+": TTL", func(ctx context.Context, e *Engine, d time.Duration) error {
			return run(ctx, e, "a", LockOptions{TTL: d})
		})
		durations(method+": Wait", func(ctx context.Context, e *Engine, d time.Duration) error {
			return run(ctx, e, "a", LockOptions{Wait: d})
		})
	}
	names("IsLocked", func(ctx context.Context, e *Engine, name string) error { _, err := e.IsLocked(ctx, name); return err })
	durations("Lock.Extend: duration", func(ctx context.Context, e *Engine, d time.Duration) error { return held.Extend(ctx, d) })

	sem := func(ctx context.Context, e *Engine, name string, o SemaphoreOptions) error {
		_, err := e.AcquireSemaphore(ctx, name, o)
		return err
	}
	names("AcquireSemaphore", func(ctx context.Context, e *Engine, name string) error {
		return sem(ctx, e, name, SemaphoreOptions{Limit: 1})
	})
	counts("AcquireSemaphore: Limit", func(ctx context.Context, e *Engine, n int) error {
		return sem(ctx, e, "s", SemaphoreOptions{Limit: n})
	})
	durations("AcquireSemaphore: TTL", func(ctx context.Context, e *Engine, d time.Duration) error {
		return sem(ctx, e, "s", SemaphoreOptions{Limit: 1, TTL: d})
	})
	durations("AcquireSemaphore: Wait", func(ctx context.Context, e *Engine, d time.Duration) error {
		return sem(ctx, e, "s", SemaphoreOptions{Limit: 1, Wait: d})
	})
	names("SemaphoreHolders", func(ctx context.Context, e *Engine, name string) error {
		_, err := e.SemaphoreHolders(ctx, name)
		return err
	})

	names("AddRecent", func(ctx context.Context, e *Engine, name string) error { return e.AddRecent(ctx, name, "x") })
	add("AddRecent: empty item", func(ctx context.Context, e *Engine) error { return e.AddRecent(ctx, "l", "") })
	names("RemoveRecent", func(ctx context.Context, e *Engine, name string) error { return e.RemoveRecent(ctx, name, "x") })
	add("RemoveRecent: empty item", func(ctx context.Context, e *Engine) error { return e.RemoveRecent(ctx, "l", "") })
	names("SuggestRecent", func(ctx context.Context, e *Engine, name string) error {
		_, err := e.SuggestRecent(ctx, name, "a", 1)
		return err
	})
	counts("SuggestRecent: limit", func(ctx context.Context, e *Engine, n int) error {
		_, err := e.SuggestRecent(ctx, "l", "a", n)
		return err
	})
	names("AddMembers", func(ctx context.Context, e *Engine, name string) error { return e.AddMembers(ctx, name, "x") })
	names("RemoveMembers", func(ctx context.Context, e *Engine, name string) error { return e.RemoveMembers(ctx, name, "x") })
	names("Suggest", func(ctx context.Context, e *Engine, name string) error {
		_, err := e.Suggest(ctx, name, "a", 1)
		return err
	})
	counts("Suggest: limit", func(ctx context.Context, e *Engine, n int) error {
		_, err := e.Suggest(ctx, "s", "a", n)
		return err
	})

	names("MarkActive", func(ctx context.Context, e *Engine, name string) error { return e.MarkActive(ctx, name, "p", 1) })
	ids("MarkActive", func(ctx context.Context, e *Engine, id int64) error { return e.MarkActive(ctx, "g", "p", id) })
	names("IsActive", func(ctx context.Context, e *Engine, name string) error {
		_, err := e.IsActive(ctx, name, "p", 1)
		return err
	})
	ids("IsActive", func(ctx context.Context, e *Engine, id int64) error {
		_, err := e.IsActive(ctx, "g", "p", id)
		return err
	})
	names("CountActive", func(ctx context.Context, e *Engine, name string) error {
		_, err := e.CountActive(ctx, name, "p")
		return err
	})
	add("CountActive: no periods", func(ctx context.Context, e *Engine) error { _, err := e.CountActive(ctx, "g"); return err })
	return calls
}

func semCall(name string, o SemaphoreOptions) func(context.Context, *Engine) error {
	return func(ctx context.Context, e *Engine) error { _, err := e.AcquireSemaphore(ctx, name, o); return err }
}

// noInvalidArgument lists the public methods that take nothing a caller
// could get wrong, so they need no row in invalidCalls.
var noInvalidArgument = map[string]string{
	"Close":          "takes only ctx",
	"Lock.Unlock":    "takes only ctx",
	"Lock.TTL":       "takes only ctx",
	"Lock.Held":      "takes only ctx",
	"Lock.Token":     "takes nothing",
	"Lock.Fence":     "takes nothing",
	"Lock.Lost":      "takes nothing",
	"Permit.Release": "takes only ctx",
	"Permit.Refresh": "takes only ctx",
	"Permit.TTL":     "takes only ctx",
	"Permit.Held":    "takes only ctx",
	"Permit.Token":   "takes nothing",
	"Permit.Fence":   "takes nothing",
}

// invalidCases are the rows a method's signature calls for: its first
// string is an object name (every bad name); an int is a count (0, -1);
// an int64 an activity id; a time.Duration a lease; an options struct
// brings its duration and int fields. Other strings (items, prefixes,
// periods) and variadic lists have no rule here: their rows are written
// by hand.
func invalidCases(m reflect.Method) []string {
	var cases []string
	durations := func(prefix string) { cases = append(cases, prefix+" negative", prefix+" sub-ms") }
	counts := func(prefix string) { cases = append(cases, prefix+" 0", prefix+" -1") }
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	durType := reflect.TypeOf(time.Duration(0))
	named := false
	for i := 1; i < m.Type.NumIn(); i++ { // 0 is the receiver
		in := m.Type.In(i)
		if m.Type.IsVariadic() && i == m.Type.NumIn()-1 {
			continue
		}
		switch {
		case in == ctxType:
		case in.Kind() == reflect.String && !named:
			named = true
			for _, n := range badNames {
				cases = append(cases, fmt.Sprintf("name %q", n))
			}
		case in.Kind() == reflect.String:
		case in == durType:
			durations("duration")
		case in.Kind() == reflect.Int:
			counts("limit")
		case in.Kind() == reflect.Int64:
			cases = append(cases, "id -1", "id 2^32")
		case in.Kind() == reflect.Struct:
			for j := 0; j < in.NumField(); j++ {
				f := in.Field(j)
				switch {
				case f.Type == durType:
					durations(f.Name)
				case f.Type.Kind() == reflect.Int:
					counts(f.Name)
				}
			}
		default:
			cases = append(cases, "<no rule for an argument of type "+in.String()+">")
		}
	}
	return cases
}

// Every exported method of *Engine, *Lock and *Permit either has a row in
// invalidCalls for each invalid value its arguments can take, or is listed
// in noInvalidArgument (and then takes nothing but ctx); and every row
// names a method that exists.
func TestInvalidCallsCoverTheAPI(t *testing.T) {
	rows := map[string]bool{}
	for _, c := range invalidCalls(nil) {
		if rows[c.name] {
			t.Errorf("row %q twice", c.name)
		}
		rows[c.name] = true
	}
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	methods := map[string]bool{}
	for _, typ := range []struct {
		prefix string
		t      reflect.Type
	}{{"", reflect.TypeOf(&Engine{})}, {"Lock.", reflect.TypeOf((*Lock)(nil))}, {"Permit.", reflect.TypeOf((*Permit)(nil))}} {
		for i := 0; i < typ.t.NumMethod(); i++ {
			m := typ.t.Method(i)
			name := typ.prefix + m.Name
			methods[name] = true
			if why, ok := noInvalidArgument[name]; ok {
				for j := 1; j < m.Type.NumIn(); j++ {
					if m.Type.In(j) != ctxType {
						t.Errorf("%s is exempt (%s) but takes a %s", name, why, m.Type.In(j))
					}
				}
				continue
			}
			cases := invalidCases(m)
			if len(cases) == 0 {
				t.Errorf("%s: no invalid argument known: write its rows in invalidCalls or exempt it in noInvalidArgument with the reason", name)
			}
			for _, c := range cases {
				if !rows[name+": "+c] {
					t.Errorf("invalidCalls has no row %q", name+": "+c)
				}
			}
		}
	}
	for row := range rows {
		method, _, ok := strings.Cut(row, ": ")
		if !ok || !methods[method] {
			t.Errorf("row %q does not name a method (want \"Method: case\")", row)
		}
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx, e := ctxT(t), s.engine()
		held, err := e.TryLock(ctx, "held", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := s.snapshot(t)
		for _, c := range invalidCalls(held) {
			err := c.run(ctx, e)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", c.name, err)
			} else if !strings.HasPrefix(err.Error(), "atomicredis: ") {
				t.Errorf("%s: error %q lacks the package prefix", c.name, err)
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
	var l, r1, r2, w *Lock
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
		{"TryRLock", func(ctx context.Context, e *Engine) (err error) {
			r1, err = e.TryRLock(ctx, "c6", LockOptions{Watchdog: true})
			return err
		}},
		{"RLock", func(ctx context.Context, e *Engine) (err error) {
			r2, err = e.RLock(ctx, "c6", LockOptions{})
			return err
		}},
		{"Lock.Extend (reader)", func(ctx context.Context, e *Engine) error { return r1.Extend(ctx, time.Minute) }},
		{"Lock.TTL (reader)", func(ctx context.Context, e *Engine) error { _, err := r2.TTL(ctx); return err }},
		{"Lock.Unlock (reader)", func(ctx context.Context, e *Engine) error { return r1.Unlock(ctx) }},
		{"Lock.Unlock (reader)", func(ctx context.Context, e *Engine) error { return r2.Unlock(ctx) }},
		{"TryWLock", func(ctx context.Context, e *Engine) (err error) {
			w, err = e.TryWLock(ctx, "c6", LockOptions{})
			return err
		}},
		{"Lock.Unlock (writer)", func(ctx context.Context, e *Engine) error { return w.Unlock(ctx) }},
		{"WLock", func(ctx context.Context, e *Engine) (err error) {
			w, err = e.WLock(ctx, "c6", LockOptions{})
			if err == nil {
				err = w.Unlock(ctx)
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
			{"TryRLock on a list", s.ns + "rw:{w}", func() error { _, err := e.TryRLock(ctx, "w", LockOptions{}); return err }},
			{"WLock, waiters a list", s.ns + "rw:{w}:waiters", func() error { _, err := e.WLock(ctx, "w", LockOptions{}); return err }},
			{"RLock with a list fence", s.ns + "rw:{f}:fence", func() error { _, err := e.RLock(ctx, "f", LockOptions{}); return err }},
			{"WLock, queue a list", s.ns + "rw:{w}:queue", func() error { _, err := e.WLock(ctx, "w", LockOptions{}); return err }},
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
