package atomicredis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// rwOwner is the Owner stored with hold token of read-write lock name
// (its "o:" field in the holds hash), and whether there is one.
func rwOwner(t *testing.T, s *testserver.Server, name, token string) (string, bool) {
	t.Helper()
	v, err := redis.String(s.Do("HGET", rwKey(s, name, ":holds"), "o:"+token))
	if errors.Is(err, redis.ErrNil) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// noOwnerFields fails t if read-write lock name's holds hash keeps an
// Owner field.
func noOwnerFields(t *testing.T, s *testserver.Server, name, when string) {
	t.Helper()
	fields, err := redis.Strings(s.Do("HKEYS", rwKey(s, name, ":holds")))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if strings.HasPrefix(f, "o:") {
			t.Errorf("%s: the holds hash keeps %q (fields %q)", when, f, fields)
		}
	}
}

// Each hold of a read-write lock keeps its own Owner: Owner and the holds
// hash read it, SetOwner changes it and nothing else, Extend keeps it, and
// it goes with the hold's release. A hold without one writes nothing.
func TestOwnerStoredWithRWHolds(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		r1, err := e.TryRLock(ctx, "o", LockOptions{TTL: 3 * time.Second, Owner: ownerBytes})
		if err != nil {
			t.Fatal(err)
		}
		holdsTTL := func(when string) {
			t.Helper()
			if pttl, err := redis.Int64(s.Do("PTTL", rwKey(s, "o", ":holds"))); err != nil || pttl <= 0 || pttl > 5000 {
				t.Errorf("%s: holds hash PTTL %d, %v; want the longest lease", when, pttl, err)
			}
		}
		holdsTTL("the only hold")
		r2, err := e.TryRLock(ctx, "o", LockOptions{TTL: 5 * time.Second, Owner: "second reader"})
		if err != nil {
			t.Fatal(err)
		}
		if pttl, err := redis.Int64(s.Do("PTTL", rwKey(s, "o", ":holds"))); err != nil || pttl <= 3000 || pttl > 5000 {
			t.Errorf("holds hash PTTL %d, %v beside a hold with a longer lease; want that lease (5 s)", pttl, err)
		}
		r3, err := e.TryRLock(ctx, "o", LockOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			l    *Lock
			want string
		}{{r1, ownerBytes}, {r2, "second reader"}, {r3, ""}} {
			got, ok := rwOwner(t, s, "o", c.l.Token())
			if got != c.want || ok != (c.want != "") || c.l.Owner() != c.want {
				t.Errorf("hold %s: stored %q (%v), Owner() %q; want %q", c.l.Token(), got, ok, c.l.Owner(), c.want)
			}
		}
		holdsTTL("three holds")

		ttl, err := r1.TTL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r1.SetOwner(ctx, "renamed"); err != nil {
			t.Fatal(err)
		}
		if got, _ := rwOwner(t, s, "o", r1.Token()); got != "renamed" || r1.Owner() != "renamed" {
			t.Errorf("after SetOwner: stored %q, Owner() %q", got, r1.Owner())
		}
		if got, _ := rwOwner(t, s, "o", r2.Token()); got != "second reader" {
			t.Errorf("r1's SetOwner changed r2's Owner to %q", got)
		}
		if after, err := r1.TTL(ctx); err != nil || after > ttl || after < ttl-time.Second {
			t.Errorf("TTL after SetOwner %v, %v; before %v: want the lease to run on", after, err, ttl)
		}
		if err := r1.Extend(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if got, _ := rwOwner(t, s, "o", r1.Token()); got != "renamed" {
			t.Errorf("after Extend: stored %q, want \"renamed\"", got)
		}
		if pttl, err := redis.Int64(s.Do("PTTL", rwKey(s, "o", ":holds"))); err != nil || pttl <= 3000 {
			t.Errorf("holds hash PTTL %d, %v after Extend(10s): it must outlive the Owner's hold", pttl, err)
		}
		if err := r3.SetOwner(ctx, "late"); err != nil {
			t.Fatal(err)
		}
		if err := r2.SetOwner(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got, ok := rwOwner(t, s, "o", r2.Token()); ok || r2.Owner() != "" {
			t.Errorf("after SetOwner(\"\"): stored %q, Owner() %q", got, r2.Owner())
		}
		if got, _ := rwOwner(t, s, "o", r3.Token()); got != "late" {
			t.Errorf("SetOwner on a hold taken without one: stored %q", got)
		}
		for _, l := range []*Lock{r1, r2, r3} {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := r1.SetOwner(ctx, "gone"); !errors.Is(err, ErrNotHeld) {
			t.Errorf("SetOwner after Unlock: %v, want ErrNotHeld", err)
		}
		if n, err := redis.Int(s.Do("EXISTS", rwKey(s, "o", ""), rwKey(s, "o", ":holds"))); err != nil || n != 0 {
			t.Errorf("after the last Unlock %d of the leases and the holds are left (%v)", n, err)
		}

		// SetOwner on a hold taken without one, alone: the holds hash it
		// makes lives as long as the lease.
		lone, err := e.TryWLock(ctx, "lone", LockOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := lone.SetOwner(ctx, "set later"); err != nil {
			t.Fatal(err)
		}
		if pttl, err := redis.Int64(s.Do("PTTL", rwKey(s, "lone", ":holds"))); err != nil || pttl <= 0 || pttl > 3000 {
			t.Errorf("holds hash PTTL %d, %v after SetOwner on the only hold; want its lease (3 s)", pttl, err)
		}
		if got, _ := rwOwner(t, s, "lone", lone.Token()); got != "set later" {
			t.Errorf("SetOwner on the only hold stored %q", got)
		}
		lone.Unlock(ctx)

		// A writer's Owner, and the Owner of holds behind it in the queue:
		// handed over with the holds, there before the waiters confirm.
		w, err := e.TryWLock(ctx, "h", LockOptions{TTL: 3 * time.Second, Owner: "writer"})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := rwOwner(t, s, "h", w.Token()); got != "writer" {
			t.Errorf("writer's Owner stored as %q", got)
		}
		type result struct {
			l   *Lock
			err error
		}
		readers := make(chan result, 2)
		for _, owner := range []string{"reader a", "reader b"} {
			go func() {
				l, err := e.RLock(ctx, "h", LockOptions{Wait: 5 * time.Second, TTL: 3 * time.Second, Owner: owner})
				readers <- result{l, err}
			}()
		}
		waitFor(t, func() bool { n, _ := redis.Int(s.Do("ZCARD", rwKey(s, "h", ":queue"))); return n == 2 })
		writer2 := make(chan result, 1)
		go func() {
			l, err := e.WLock(ctx, "h", LockOptions{Wait: 5 * time.Second, Owner: "next writer"})
			writer2 <- result{l, err}
		}()
		waitFor(t, func() bool { n, _ := redis.Int(s.Do("ZCARD", rwKey(s, "h", ":queue"))); return n == 3 })
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := rwOwner(t, s, "h", w.Token()); ok {
			t.Error("the writer's Owner outlived its Unlock")
		}
		var held []*Lock
		for range 2 {
			r := <-readers
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got, _ := rwOwner(t, s, "h", r.l.Token()); got != r.l.Owner() || !strings.HasPrefix(got, "reader ") {
				t.Errorf("handed-over reader: stored %q, Owner() %q", got, r.l.Owner())
			}
			held = append(held, r.l)
		}
		for _, l := range held {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		r := <-writer2
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got, _ := rwOwner(t, s, "h", r.l.Token()); got != "next writer" || r.l.Owner() != "next writer" {
			t.Errorf("handed-over writer: stored %q, Owner() %q", got, r.l.Owner())
		}
		if err := r.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := redis.Int(s.Do("EXISTS", rwKey(s, "h", ":holds"))); err != nil || n != 0 {
			t.Errorf("holds hash left after the last Unlock: %d, %v", n, err)
		}
	})
}

// A hold's Owner goes when the hold does however it goes: purged after
// its lease ran out, abandoned; and the watchdog keeps it.
func TestOwnerLeavesWithRWHolds(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		stays, err := e.TryRLock(ctx, "p", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		dies, err := e.TryRLock(ctx, "p", LockOptions{TTL: 100 * time.Millisecond, Owner: "crashed"})
		if err != nil {
			t.Fatal(err)
		}
		dog, err := e.TryRLock(ctx, "p", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true, Owner: "dog"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // dies's lease runs out; dog's watchdog extends it
		if _, ok := rwOwner(t, s, "p", dies.Token()); !ok {
			t.Fatal("an expired hold's Owner went before anything purged it: the test proves nothing")
		}
		if err := dies.SetOwner(ctx, "too late"); !errors.Is(err, ErrNotHeld) {
			t.Errorf("SetOwner on a hold whose lease ran out: %v, want ErrNotHeld", err)
		}
		if got, _ := rwOwner(t, s, "p", dies.Token()); got != "crashed" {
			t.Errorf("SetOwner on a hold whose lease ran out stored %q", got)
		}
		if _, err := e.TryWLock(ctx, "p", LockOptions{}); !errors.Is(err, ErrNotAcquired) { // purges the expired hold
			t.Fatalf("TryWLock beside readers: %v", err)
		}
		if _, ok := rwOwner(t, s, "p", dies.Token()); ok {
			t.Error("the Owner of a hold purged after its lease ran out is left behind")
		}
		if got, _ := rwOwner(t, s, "p", dog.Token()); got != "dog" {
			t.Errorf("the watchdog's hold: stored %q, want \"dog\"", got)
		}
		if err := dog.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		// A hold its caller abandons (as a waiter gives up when the grant
		// crossed its timeout): its Owner goes with it.
		gone, err := e.TryRLock(ctx, "p", LockOptions{TTL: time.Minute, Owner: "abandoned"})
		if err != nil {
			t.Fatal(err)
		}
		c := s.Pool.Get()
		defer c.Close()
		if _, err := scriptRWAbandon.Do(c, rwKey(s, "p", ""), rwKey(s, "p", ":holds"), rwKey(s, "p", ":fence"), rwKey(s, "p", ":queue"),
			rwKey(s, "p", ":waiters"), rwKey(s, "p", ":void:"+gone.Token()), gone.Token(), 1000, time.Hour.Milliseconds(), s.NS+"wake:"); err != nil {
			t.Fatal(err)
		}
		if _, ok := rwOwner(t, s, "p", gone.Token()); ok {
			t.Error("an abandoned hold's Owner is left behind")
		}
		noOwnerFields(t, s, "p", "after the purge and the abandon")
		stays.Unlock(ctx)
	})
}

// An Owner longer than MaxOwner is refused, and nothing is written.
func TestOwnerTooLongRW(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		long := strings.Repeat("o", MaxOwner+1)
		if _, err := e.TryRLock(ctx, "x", LockOptions{Owner: long}); !errors.Is(err, ErrInvalid) {
			t.Errorf("TryRLock with an Owner of %d bytes: %v, want ErrInvalid", len(long), err)
		}
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("a refused TryRLock wrote %q", ks)
		}
		r, err := e.TryRLock(ctx, "x", LockOptions{Owner: long[:MaxOwner]})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := rwOwner(t, s, "x", r.Token()); got != long[:MaxOwner] {
			t.Errorf("an Owner of MaxOwner bytes stored as %d bytes", len(got))
		}
		if err := r.SetOwner(ctx, long); !errors.Is(err, ErrInvalid) || r.Owner() != long[:MaxOwner] {
			t.Errorf("SetOwner of %d bytes: %v, Owner() %d bytes; want ErrInvalid and the old one", len(long), err, len(r.Owner()))
		}
		r.Unlock(ctx)
	})
}
