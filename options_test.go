package atomicredis

// New and its options: an engine built wrong fails every call cleanly.
// validCalls, every public operation, serves other tests too.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// call is one public operation, run for its error only.
type call struct {
	name string
	run  func(ctx context.Context, e *Engine) error
}

// A rejected option or a nil pool makes every call fail with ErrInvalid,
// before any I/O.
func TestBadEngine(t *testing.T) {
	s := testserver.Mini(t)
	for name, e := range map[string]*Engine{
		"nil pool":          New(nil),
		"namespace {":       New(s.Pool, WithNamespace("a{")),
		"namespace }":       New(s.Pool, WithNamespace("}")),
		"recent capacity":   New(s.Pool, WithRecentCapacity(0)),
		"negative capacity": New(s.Pool, WithRecentCapacity(-5)),
		"call timeout 0":    New(s.Pool, WithCallTimeout(0)),
		"retention 0":       New(s.Pool, WithFenceRetention(0)),
		"ack past timeout":  New(s.Pool, WithCallTimeout(time.Second), WithReplicaAck(1, time.Second)),
		"nil engine":        nil,
		"zero engine":       new(Engine),
	} {
		if e == nil || e.stop == nil {
			if err := e.Close(ctxT(t)); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Close: %v, want ErrInvalid", name, err)
			}
		}
		for _, c := range validCalls() {
			if strings.HasPrefix(c.name, "Lock.") || strings.HasPrefix(c.name, "Permit.") {
				continue // no lock to call it on
			}
			if err := c.run(ctxT(t), e); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %s: %v, want ErrInvalid", name, c.name, err)
			}
		}
	}
	if ks := s.Keys(t); len(ks) != 0 {
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
		{"LockInfo", func(ctx context.Context, e *Engine) error { _, err := e.LockInfo(ctx, "c1"); return err }},
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
		{"ForceUnlock", func(ctx context.Context, e *Engine) error { _, err := e.ForceUnlock(ctx, "c7"); return err }},
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
		{"SemaphoreInfo", func(ctx context.Context, e *Engine) error { _, err := e.SemaphoreInfo(ctx, "c2"); return err }},
		{"SetSemaphoreLimit", func(ctx context.Context, e *Engine) error { return e.SetSemaphoreLimit(ctx, "c2", 3) }},
		{"TryAcquireSemaphore", func(ctx context.Context, e *Engine) error {
			q, err := e.TryAcquireSemaphore(ctx, "c2", SemaphoreOptions{})
			if err == nil {
				err = q.Release(ctx)
			}
			return err
		}},
		{"Permit.Extend", func(ctx context.Context, e *Engine) error { return p.Extend(ctx, 0) }},
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
		{"MarkActiveMany", func(ctx context.Context, e *Engine) error { return e.MarkActiveMany(ctx, "c5", "d2", 7, 1<<23, 1<<40) }},
		{"CountActiveAll", func(ctx context.Context, e *Engine) error {
			_, err := e.CountActiveAll(ctx, "c5", "d1", "d2")
			return err
		}},
	}
}
