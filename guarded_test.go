package atomicredis

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// setIfMine writes ARGV[1] to KEYS[1] and returns it with the count of
// keys and arguments the body saw.
var setIfMine = NewGuardedScript(1, `redis.call('SET', KEYS[1], ARGV[1])
return {redis.call('GET', KEYS[1]), #KEYS, #ARGV}`)

// A guarded script runs while the lock is held, with the caller's KEYS and
// ARGV; once the lock is gone it runs nothing and says ErrNotHeld.
func TestGuarded_EvalGuardedByTheLock(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		tag, err := e.HashTag("order:7")
		if err != nil || tag != "{order:7}" {
			t.Fatalf("HashTag: %q, %v", tag, err)
		}
		key := s.NS + "stock:" + tag + ":qty"
		l, err := e.TryLock(ctx, "order:7", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		v, err := redis.Values(l.Eval(ctx, setIfMine, key, "41"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := redis.String(v[0], nil); got != "41" || v[1].(int64) != 1 || v[2].(int64) != 1 {
			t.Fatalf("reply %v, want [41 1 1]: the body sees only its own keys and arguments", v)
		}
		if _, err := s.Do("SCRIPT", "FLUSH"); err == nil { // the next call loads it again (EVAL after NOSCRIPT)
			if _, err := l.Eval(ctx, setIfMine, key, "42"); err != nil {
				t.Fatalf("after SCRIPT FLUSH: %v", err)
			}
		}
		if ok, err := e.ForceUnlock(ctx, "order:7"); !ok || err != nil {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		next, err := e.TryLock(ctx, "order:7", LockOptions{TTL: 5 * time.Second}) // another holder now
		if err != nil {
			t.Fatal(err)
		}
		defer next.Unlock(ctx)
		if _, err := l.Eval(ctx, setIfMine, key, "43"); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Eval after the lock was taken away: %v, want ErrNotHeld", err)
		}
		if got, _ := redis.String(s.Do("GET", key)); got == "43" {
			t.Fatal("the body ran though the lock was not held")
		}
	})
}

// Lock.Key builds a guarded script's key in the engine's namespace after
// the lock's hash tag: Eval takes it as it is, on every server.
func TestGuarded_Key(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		l, err := e.TryLock(ctx, "sku:42", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		key := l.Key("stock")
		if want := s.NS + "{sku:42}:stock"; key != want {
			t.Fatalf("Key(stock) = %q, want %q", key, want)
		}
		if _, err := l.Eval(ctx, setIfMine, key, "7"); err != nil {
			t.Fatal(err)
		}
		if got, _ := redis.String(s.Do("GET", key)); got != "7" {
			t.Fatalf("the key Key built holds %q, want 7", got)
		}
		if k := (*Lock)(nil).Key("stock"); k != "" {
			t.Errorf("a nil Lock's Key: %q, want empty", k)
		}
	})
}

// A body's error comes back wrapping Redis's, its writes before it stay; a
// read lock guards nothing, a write lock does; keys must carry the tag.
func TestGuarded_EvalErrorsAndReadWriteLocks(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		key := s.NS + "x:{doc}"
		w, err := e.TryWLock(ctx, "doc", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		failing := NewGuardedScript(1, `redis.call('SET', KEYS[1], 'before')
return redis.call('INCR', KEYS[1])`)
		_, err = w.Eval(ctx, failing, key)
		var re redis.Error
		if !errors.As(err, &re) || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrInvalid) {
			t.Fatalf("a failing body: %v, want the Redis error", err)
		}
		if got, _ := redis.String(s.Do("GET", key)); got != "before" {
			t.Fatalf("the write before the error: %q, want it kept", got)
		}
		if _, err := w.Eval(ctx, setIfMine, key, "w"); err != nil {
			t.Fatalf("a writer's Eval: %v", err)
		}
		if _, err := w.Eval(ctx, setIfMine, s.NS+"x:{other}", "w"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a key of another tag: %v, want ErrInvalid", err)
		}
		if _, err := w.Eval(ctx, setIfMine, s.NS+"x:{}{doc}", "w"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a key whose first {…} is empty: %v, want ErrInvalid", err)
		}
		if _, err := w.Eval(ctx, NewGuardedScript(0, "#!lua flags=no-writes\nreturn 1")); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a shebang line: %v, want ErrInvalid", err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Eval(ctx, setIfMine, key, "late"); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("a released writer's Eval: %v, want ErrNotHeld", err)
		}
		r, err := e.TryRLock(ctx, "doc", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unlock(ctx)
		if _, err := r.Eval(ctx, setIfMine, key, "r"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a reader's Eval: %v, want ErrInvalid", err)
		}
		if got, _ := redis.String(s.Do("GET", key)); got != "w" {
			t.Fatalf("the key after refused calls: %q, want \"w\"", got)
		}
	})
}

// An election's leader guards writes with its term.
func TestGuarded_EvalByALeader(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		lead, err := e.Election("sched", ElectionOptions{TTL: 200 * time.Millisecond}).Campaign(ctx, "me")
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Unlock(ctx)
		tag, _ := e.HashTag("sched")
		if _, err := lead.Eval(ctx, setIfMine, s.NS+"plan:"+tag, strings.Repeat("p", 3)); err != nil {
			t.Fatal(err)
		}
	})
}

// guardedWrite appends the holder's fence to the store's record, a list:
// Lock.Eval runs it only while the lock is the holder's.
var guardedWrite = NewGuardedScript(1, `redis.call('RPUSH', KEYS[1], ARGV[1])
return 1`)

// The mutual-exclusion checker, writing through Lock.Eval: 32 goroutines
// on 4 engines, 16 names, 40 ms leases, the fault proxy; 2% of holders
// outlive their lease before writing. The store's own record (each name's
// list of the fences that wrote) never holds a fence below one written
// before it: no holder that had lost its lock wrote.
func TestGuarded_EvalUnderFaults(t *testing.T) {
	testserver.Apart(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		target := checkerScale(s)
		if testing.Short() {
			target = 1000
		}
		const workers, names, engines = 32, 16, 4
		es, proxy := faultyEngines(t, s, engines)
		var f mutexFigures
		var refused, writes, failedWrites atomic.Int64
		bitten := func() bool { return refused.Load() > 0 } // a holder that had lost its lock tried to write
		f.underChaos(proxy, workers, target, bitten, func(w int) {
			e, ctx := es[w%engines], context.Background()
			n := strconv.Itoa(rand.IntN(names))
			l, err := e.Lock(ctx, "g"+n, LockOptions{TTL: 40 * time.Millisecond, Wait: 10 * time.Second})
			if err != nil {
				atomic.AddInt64(&f.errs, 1)
				return
			}
			atomic.AddInt64(&f.acquisitions, 1)
			if rand.IntN(100) < 2 { // outlive the lease: another may hold it now
				time.Sleep(50 * time.Millisecond)
			}
			_, err = l.Eval(ctx, guardedWrite, s.NS+"record:{g"+n+"}", l.Fence())
			switch {
			case errors.Is(err, ErrNotHeld):
				refused.Add(1)
			case err != nil:
				failedWrites.Add(1)
			default:
				writes.Add(1)
			}
			l.Unlock(ctx)
		})
		stale := 0
		for i := 0; i < names; i++ {
			record, err := redis.Int64s(s.Do("LRANGE", s.NS+"record:{g"+strconv.Itoa(i)+"}", 0, -1))
			if err != nil {
				t.Fatal(err)
			}
			for j := 1; j < len(record); j++ {
				if record[j] < record[j-1] {
					stale++
				}
			}
		}
		t.Logf("%s: %d acquisitions, %d guarded writes, %d refused (the lock was lost), %d failed (the connection), %d stale writes in the store's record, %d connections cut",
			s.Name, f.acquisitions, writes.Load(), refused.Load(), failedWrites.Load(), stale, proxy.cuts.Load())
		if stale != 0 {
			t.Errorf("%d stale writes: a holder that had lost its lock wrote", stale)
		}
		if !bitten() {
			t.Error("no write was refused: the faults did not bite, the check proves little")
		}
	})
}

// A writer's Eval runs nothing once the writer's lease has passed, though
// the read-write lock's keys live on (a longer lease was shortened by
// Extend): the guard reads the lease's deadline, not only the hold.
func TestGuarded_EvalRefusedPastAWritersLease(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		key := s.NS + "x:{ledger}"
		w, err := e.TryWLock(ctx, "ledger", LockOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Extend(ctx, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		s.Advance(400 * time.Millisecond)
		if n, err := redis.Int(s.Do("EXISTS", object{kind: kindRW, name: "ledger", ns: s.NS}.key(""))); err != nil || n != 1 {
			t.Fatalf("the lock's leases are gone (%d, %v): the test needs them kept", n, err)
		}
		if _, err := w.Eval(ctx, setIfMine, key, "late"); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Eval after the writer's lease passed: %v, want ErrNotHeld", err)
		}
		if n, _ := redis.Int(s.Do("EXISTS", key)); n != 0 {
			t.Fatal("the body ran after the writer's lease had passed")
		}
	})
}
