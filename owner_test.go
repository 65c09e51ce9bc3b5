package atomicredis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// ownerBytes is an Owner with every byte a lock's value could trip on:
// spaces, a newline, a NUL, bytes that are not UTF-8, and digits after a
// space (as the lock's own fields are).
var ownerBytes = "host-7 pid 42\n\x00\xff\xfe 12 34 " + strings.Repeat("x", 64)

// The Owner goes with the holding: LockInfo and Owner read it, SetOwner
// changes it and nothing else (token, fence, lease), Extend and the
// watchdog keep it, and the next holder's comes with the handoff, there at
// once (before the waiter confirms).
func TestOwnerStoredWithTheLock(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		l, err := e.TryLock(ctx, "o", LockOptions{TTL: 3 * time.Second, Watchdog: true, Owner: ownerBytes})
		if err != nil {
			t.Fatal(err)
		}
		info := lockInfo(t, e, "o")
		if info.Owner != ownerBytes || l.Owner() != ownerBytes || info.Fence != l.Fence() {
			t.Fatalf("LockInfo %+v, Owner() %q; want the owner %q and fence %d", info, l.Owner(), ownerBytes, l.Fence())
		}
		if err := l.SetOwner(ctx, "second"); err != nil {
			t.Fatal(err)
		}
		after := lockInfo(t, e, "o")
		if after.Owner != "second" || l.Owner() != "second" || after.Fence != info.Fence || after.Token != info.Token || after.TTL > info.TTL || after.TTL <= 0 {
			t.Fatalf("after SetOwner: %+v (Owner() %q); before: %+v", after, l.Owner(), info)
		}
		if err := l.Extend(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := lockInfo(t, e, "o"); got.Owner != "second" || got.TTL <= 3*time.Second {
			t.Fatalf("after Extend(5s): %+v, want Owner \"second\" and a 5s lease", got)
		}
		if err := l.SetOwner(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got := lockInfo(t, e, "o"); got.Owner != "" || !got.Held {
			t.Fatalf("after SetOwner(\"\"): %+v", got)
		}
		if err := l.SetOwner(ctx, "third"); err != nil {
			t.Fatal(err)
		}

		// A waiter's Owner comes with the handoff.
		got := make(chan *Lock, 1)
		go func() {
			w, err := e.Lock(ctx, "o", LockOptions{Wait: 5 * time.Second, Owner: "waiter"})
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		waitFor(t, func() bool { return lockInfo(t, e, "o").Waiting == 1 })
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w := <-got
		if w == nil {
			return
		}
		if info := lockInfo(t, e, "o"); info.Owner != "waiter" || info.Token != w.Token() || w.Owner() != "waiter" {
			t.Fatalf("after the handoff: %+v, Owner() %q; want the waiter's", info, w.Owner())
		}
		if err := l.SetOwner(ctx, "old holder"); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("SetOwner by the old holder: %v, want ErrNotHeld", err)
		}
		if info := lockInfo(t, e, "o"); info.Owner != "waiter" {
			t.Fatalf("the old holder's SetOwner changed the owner: %+v", info)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A watchdog's extensions keep the Owner.
func TestOwnerKeptByTheWatchdog(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		l, err := e.TryLock(ctx, "w", LockOptions{TTL: 150 * time.Millisecond, Watchdog: true, Owner: "dog"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		time.Sleep(400 * time.Millisecond) // several extensions
		if info := lockInfo(t, e, "w"); !info.Held || info.Owner != "dog" || info.Token != l.Token() {
			t.Fatalf("after the watchdog's extensions: %+v, want held with Owner \"dog\"", info)
		}
	})
}

func lockInfo(t *testing.T, e *Engine, name string) LockInfo {
	t.Helper()
	info, err := e.LockInfo(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitFor polls cond every millisecond for up to 5 s, failing t if it never
// holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition never met in 5 s")
}

// semInfoCounts is SemaphoreInfo's counts, which compare with ==.
type semInfoCounts struct{ Limit, Holders, Waiting int }

func semCounts(i SemaphoreInfo) semInfoCounts { return semInfoCounts{i.Limit, i.Holders, i.Waiting} }
