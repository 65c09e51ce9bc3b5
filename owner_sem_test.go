package atomicredis

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// semOwners is semaphore name's owners hash: permit token -> Owner.
func semOwners(t *testing.T, s *testserver.Server, name string) map[string]string {
	t.Helper()
	m, err := redis.StringMap(s.Do("HGETALL", s.NS+"sem:{"+name+"}:owners"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// semInfo is SemaphoreInfo, failing t on an error.
func semInfo(t *testing.T, e *Engine, name string) SemaphoreInfo {
	t.Helper()
	info, err := e.SemaphoreInfo(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// permitInfo is the permit SemaphoreInfo lists with token, or false.
func permitInfo(info SemaphoreInfo, token string) (PermitInfo, bool) {
	for _, p := range info.Permits {
		if p.Token == token {
			return p, true
		}
	}
	return PermitInfo{}, false
}

// A permit's Owner is stored with it: SemaphoreInfo lists it with the
// permit's token, fence and time left, Owner reads it, SetOwner changes
// it and nothing else, Extend keeps it, Release removes it. A permit
// without one writes nothing.
func TestOwnerStoredWithPermits(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 3, TTL: 3 * time.Second}
		o.Owner = ownerBytes
		p1, err := e.TryAcquireSemaphore(ctx, "o", o)
		if err != nil {
			t.Fatal(err)
		}
		o.Owner = ""
		p2, err := e.TryAcquireSemaphore(ctx, "o", o)
		if err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "o"); len(got) != 1 || got[p1.Token()] != ownerBytes || p1.Owner() != ownerBytes || p2.Owner() != "" {
			t.Fatalf("owners hash %q, Owner() %q and %q; want only p1's", got, p1.Owner(), p2.Owner())
		}
		info := semInfo(t, e, "o")
		if semCounts(info) != (semInfoCounts{Limit: 3, Holders: 2}) || len(info.Permits) != 2 {
			t.Fatalf("SemaphoreInfo %+v, want 2 permits listed", info)
		}
		for _, c := range []struct {
			p     *Permit
			owner string
		}{{p1, ownerBytes}, {p2, ""}} {
			got, ok := permitInfo(info, c.p.Token())
			if !ok || got.Fence != c.p.Fence() || got.Owner != c.owner || got.TTL <= 2*time.Second || got.TTL > 3*time.Second {
				t.Errorf("SemaphoreInfo lists %+v (%v) for permit %s fence %d, want Owner %q and a TTL near 3s", got, ok, c.p.Token(), c.p.Fence(), c.owner)
			}
		}

		if err := p1.SetOwner(ctx, "renamed"); err != nil {
			t.Fatal(err)
		}
		if err := p2.SetOwner(ctx, "late"); err != nil {
			t.Fatal(err)
		}
		after := semInfo(t, e, "o")
		for _, c := range []struct {
			p     *Permit
			owner string
		}{{p1, "renamed"}, {p2, "late"}} {
			was, _ := permitInfo(info, c.p.Token())
			got, _ := permitInfo(after, c.p.Token())
			if got.Owner != c.owner || c.p.Owner() != c.owner || got.Fence != was.Fence || got.TTL > was.TTL || got.TTL <= 0 {
				t.Errorf("after SetOwner(%q): %+v, Owner() %q; before %+v", c.owner, got, c.p.Owner(), was)
			}
		}
		if err := p1.Extend(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if got, _ := permitInfo(semInfo(t, e, "o"), p1.Token()); got.Owner != "renamed" || got.TTL <= 3*time.Second {
			t.Errorf("after Extend(10s): %+v, want Owner \"renamed\" and 10s", got)
		}
		if err := p2.SetOwner(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "o"); len(got) != 1 || p2.Owner() != "" {
			t.Errorf("after SetOwner(\"\"): owners hash %q, Owner() %q", got, p2.Owner())
		}
		if err := p1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "o"); len(got) != 0 {
			t.Errorf("after Release: owners hash %q", got)
		}
		if err := p1.SetOwner(ctx, "gone"); !errors.Is(err, ErrNotHeld) {
			t.Errorf("SetOwner after Release: %v, want ErrNotHeld", err)
		}
		if got := semOwners(t, s, "o"); len(got) != 0 {
			t.Errorf("a released permit's SetOwner wrote %q", got)
		}
		p2.Release(ctx)
		for _, k := range s.Keys(t) { // the counter stays, and an extension number until its TTL
			if !strings.HasSuffix(k, ":counter") && !strings.Contains(k, ":seq:") {
				t.Errorf("key left after the last Release: %q", k)
			}
		}
	})
}

// A waiter's Owner comes with the permit a release hands it, there before
// the waiter confirms.
func TestOwnerHandedWithPermits(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		p, err := e.TryAcquireSemaphore(ctx, "h", SemaphoreOptions{Limit: 1, TTL: 3 * time.Second, Owner: "first"})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Permit, 1)
		go func() {
			w, err := e.AcquireSemaphore(ctx, "h", SemaphoreOptions{Wait: 5 * time.Second, Owner: "waiter"})
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		waitFor(t, func() bool { return semInfo(t, e, "h").Waiting == 1 })
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Read before the waiter's engine has confirmed anything: the
		// release's own script stored it.
		if owners := semOwners(t, s, "h"); len(owners) != 1 || !strings.HasPrefix(mapValue(owners), "waiter") {
			t.Errorf("owners hash right after the handoff %q, want the waiter's", owners)
		}
		w := <-got
		if w == nil {
			return
		}
		info := semInfo(t, e, "h")
		if pi, _ := permitInfo(info, w.Token()); pi.Owner != "waiter" || w.Owner() != "waiter" || len(info.Permits) != 1 {
			t.Errorf("after the handoff: %+v, Owner() %q", info, w.Owner())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if owners := semOwners(t, s, "h"); len(owners) != 0 {
			t.Errorf("owners hash after the last release: %q", owners)
		}
	})
}

// mapValue is m's one value.
func mapValue(m map[string]string) string {
	for _, v := range m {
		return v
	}
	return ""
}

// A permit's Owner goes when the permit does however it goes: purged
// after it timed out (by another's acquisition, or by its own holder's
// late extension), abandoned; and the watchdog keeps it.
func TestOwnerLeavesWithPermits(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		o := SemaphoreOptions{Limit: 5, TTL: 100 * time.Millisecond}
		stays, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		o.Owner = "purged"
		purged, err := e.TryAcquireSemaphore(ctx, "p", o)
		if err != nil {
			t.Fatal(err)
		}
		o.Owner = "late"
		late, err := e.TryAcquireSemaphore(ctx, "p", o)
		if err != nil {
			t.Fatal(err)
		}
		dog, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: 300 * time.Millisecond, Watchdog: true, Owner: "dog"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // two permits time out; the watchdog's lives
		if owners := semOwners(t, s, "p"); len(owners) != 3 {
			t.Fatalf("owners hash %q before anything purged: the test proves nothing", owners)
		}
		if err := late.SetOwner(ctx, "too late"); !errors.Is(err, ErrNotHeld) {
			t.Errorf("SetOwner on a timed-out permit: %v, want ErrNotHeld", err)
		}
		if got := semOwners(t, s, "p")[late.Token()]; got != "late" {
			t.Errorf("SetOwner on a timed-out permit stored %q", got)
		}
		// The other late holder's extension finds its permit gone: it
		// removes it, and purges the other timed-out one, Owners and all.
		// (late's holding ended when SetOwner found it gone: nothing is sent
		// for it any more.)
		if err := purged.Extend(ctx, 0); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Extend of a timed-out permit: %v", err)
		}
		if owners := semOwners(t, s, "p"); len(owners) != 1 || owners[dog.Token()] != "dog" {
			t.Errorf("owners hash after a late Extend purged two: %q, want only the watchdog's", owners)
		}
		if info := semInfo(t, e, "p"); info.Holders != 2 {
			t.Errorf("SemaphoreInfo %+v, want 2 holders", info)
		}
		if err := late.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Release of a purged permit: %v", err)
		}

		// Purged by another's acquisition.
		o.Owner = "purged too"
		if _, err := e.TryAcquireSemaphore(ctx, "p", o); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
		next, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if owners := semOwners(t, s, "p"); len(owners) != 1 || owners[dog.Token()] != "dog" {
			t.Errorf("owners hash after an acquisition purged a timed-out permit: %q, want only the watchdog's", owners)
		}

		// Abandoned (as a waiter gives up when the grant crossed its
		// timeout).
		gone, err := e.TryAcquireSemaphore(ctx, "p", SemaphoreOptions{Limit: 5, TTL: time.Minute, Owner: "abandoned"})
		if err != nil {
			t.Fatal(err)
		}
		c := s.Pool.Get()
		defer c.Close()
		k := func(suffix string) any { return s.NS + "sem:{p}" + suffix }
		if _, err := scriptSemAbandon.Do(c, k(""), k(":owner"), k(":counter"), k(":limit"), k(":queue"), k(":waiters"), k(":owners"),
			k(":void:"+gone.Token()), gone.Token(), 1000, time.Hour.Milliseconds(), s.NS+"wake:"); err != nil {
			t.Fatal(err)
		}
		if owners := semOwners(t, s, "p"); len(owners) != 1 || owners[dog.Token()] != "dog" {
			t.Errorf("owners hash after an abandon: %q, want only the watchdog's", owners)
		}
		for _, p := range []*Permit{dog, stays, next} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := redis.Int(s.Do("EXISTS", k(":owners"))); err != nil || n != 0 {
			t.Errorf("owners hash left after the last release: %d, %v", n, err)
		}
	})
}

// An Owner longer than MaxOwner is refused, and nothing is written.
func TestOwnerTooLongPermit(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		long := strings.Repeat("o", MaxOwner+1)
		if _, err := e.TryAcquireSemaphore(ctx, "x", SemaphoreOptions{Limit: 1, Owner: long}); !errors.Is(err, ErrInvalid) {
			t.Errorf("TryAcquireSemaphore with an Owner of %d bytes: %v, want ErrInvalid", len(long), err)
		}
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("a refused acquisition wrote %q", ks)
		}
		p, err := e.TryAcquireSemaphore(ctx, "x", SemaphoreOptions{Limit: 1, Owner: long[:MaxOwner]})
		if err != nil {
			t.Fatal(err)
		}
		if got := semOwners(t, s, "x")[p.Token()]; got != long[:MaxOwner] {
			t.Errorf("an Owner of MaxOwner bytes stored as %d bytes", len(got))
		}
		if err := p.SetOwner(ctx, long); !errors.Is(err, ErrInvalid) || p.Owner() != long[:MaxOwner] {
			t.Errorf("SetOwner of %d bytes: %v, Owner() %d bytes; want ErrInvalid and the old one", len(long), err, len(p.Owner()))
		}
		p.Release(ctx)
	})
}

// SemaphoreInfo lists at most MaxInfoPermits permits, those that time out
// first, and counts them all.
func TestSemaphoreInfoListsAtMostMaxInfoPermits(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e := engine(s)
		// Permits written straight into the sets, as the acquire script
		// would (MaxInfoPermits+2 acquisitions would take too long here).
		now := serverMicros(s, t) / 1000
		args := []any{s.NS + "sem:{many}"}
		fences := []any{s.NS + "sem:{many}:owner"}
		for i := range MaxInfoPermits + 2 {
			token := "t" + strconv.Itoa(i)
			args = append(args, now+60_000+int64(i), token)
			fences = append(fences, i+1, token)
		}
		s.Must(t, "ZADD", args...)
		s.Must(t, "ZADD", fences...)
		s.Must(t, "SET", s.NS+"sem:{many}:limit", MaxInfoPermits+2)
		s.Must(t, "HSET", s.NS+"sem:{many}:owners", args[2], "first")
		info := semInfo(t, e, "many")
		if info.Holders != MaxInfoPermits+2 || len(info.Permits) != MaxInfoPermits {
			t.Fatalf("Holders %d, %d listed; want %d and %d", info.Holders, len(info.Permits), MaxInfoPermits+2, MaxInfoPermits)
		}
		if first := info.Permits[0]; first.Token != args[2] || first.Owner != "first" || first.Fence != 1 {
			t.Errorf("first listed %+v, want the first to time out, fence 1, Owner \"first\"", first)
		}
		if last := info.Permits[MaxInfoPermits-1]; last.Fence != MaxInfoPermits || last.Owner != "" {
			t.Errorf("last listed %+v, want fence %d", last, MaxInfoPermits)
		}
	})
}
