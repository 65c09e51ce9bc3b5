package atomicredis

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func TestScriptsDeclareTheirKeys(t *testing.T) {
	files, err := scriptFS.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, f := range files {
		if f.IsDir() { // scripts/lib: pieces put in front of scripts, not scripts
			continue
		}
		loaded++
		name := strings.TrimSuffix(f.Name(), ".lua")
		s, ok := scripts[name]
		if !ok {
			t.Errorf("scripts/%s is not loaded in embed.go", f.Name())
			continue
		}
		src, _ := scriptFS.ReadFile("scripts/" + f.Name())
		if s.keys < 0 {
			if !strings.Contains(string(src), "#KEYS") {
				t.Errorf("%s: declared a variable key count but never reads #KEYS", name)
			}
		} else if got, want := maxKeyIndex(string(src)), s.keys; got != want {
			t.Errorf("%s: script uses KEYS[%d], embed.go declares %d keys", name, got, want)
		}
		if !strings.HasPrefix(string(src), "-- "+name+":") {
			t.Errorf("%s: script should open with a comment naming it", name)
		}
	}
	if loaded != len(scripts) {
		t.Errorf("%d scripts in scripts/, %d loaded in embed.go", loaded, len(scripts))
	}
}

func TestLockDefaultTTL(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		l, err := engine(s).TryLock(ctx, "d", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pttl, _ := redis.Int64(s.Do("PTTL", s.NS+"lock:{d}"))
		if pttl <= 9000 || pttl > 10000 {
			t.Errorf("PTTL %d ms, want the 10s default", pttl)
		}
		if err := l.Extend(ctx, 0); err != nil {
			t.Fatal(err)
		}
	})
}

// Fences count up by one from 1 with each acquisition of a name: across
// engines, for a waiter, and under contention, where waiting takes no
// fence; permits likewise. The README promises only that fences grow
// strictly, which internal/suite checks over every client; this pins the
// counter itself.
func TestLockFencesAreConsecutive(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		engines := []*Engine{engine(s), engine(s), engine(s)}
		before := serverMicros(s, t)
		var first int64
		for i := int64(0); i < 30; i++ {
			l, err := engines[i%3].TryLock(ctx, "f", LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				// A name's first fence is the server's clock in microseconds.
				first = l.Fence()
				if after := serverMicros(s, t); first < before || first > after {
					t.Fatalf("first fence %d, want the server's clock in µs, in [%d, %d]", first, before, after)
				}
			}
			if l.Fence() != first+i {
				t.Fatalf("acquisition %d: fence %d, want %d", i+1, l.Fence(), first+i)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}

		e := engine(s)
		a, err := e.TryLock(ctx, "w", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(50*time.Millisecond, func() { a.Unlock(ctx) })
		b, err := e.Lock(ctx, "w", LockOptions{Wait: 10 * time.Second})
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if b.Fence() != a.Fence()+1 {
			t.Errorf("fences %d, %d; want the next one for the waiter", a.Fence(), b.Fence())
		}

		o := SemaphoreOptions{Limit: 2, TTL: time.Minute}
		p1, err := e.TryAcquireSemaphore(ctx, "pool", o)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := e.TryAcquireSemaphore(ctx, "pool", o)
		if err != nil {
			t.Fatal(err)
		}
		if p2.Fence() != p1.Fence()+1 {
			t.Errorf("permit fences %d %d, want consecutive", p1.Fence(), p2.Fence())
		}

		base, err := e.TryLock(ctx, "mutex", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := base.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		workers, cycles := 16, 200
		if testing.Short() {
			cycles = 50
		}
		var acquired atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			e := engine(s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < cycles; i++ {
					l, err := e.Lock(ctx, "mutex", LockOptions{TTL: 10 * time.Second, Wait: time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					acquired.Add(1)
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		fence, err := redis.Int64(s.Do("GET", s.NS+"lock:{mutex}:fence"))
		if err != nil || fence != base.Fence()+acquired.Load() || acquired.Load() != int64(workers*cycles) {
			t.Errorf("fence %d (%v) after %d of %d acquisitions", fence, err, acquired.Load(), workers*cycles)
		}
	})
}

func TestLockWaitsForExpiry(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		if _, err := e.TryLock(ctx, "x", LockOptions{TTL: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := e.Lock(ctx, "x", LockOptions{Wait: 5 * time.Second}); err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("waiter took %v for a 100ms lease", d)
		}
	})
}

func TestWatchdogExtendChangesLease(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "wx", LockOptions{TTL: 30 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		if err := l.Extend(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(900 * time.Millisecond)
		ttl, err := l.TTL(ctx)
		if err != nil || ttl > 300*time.Millisecond {
			t.Errorf("TTL %v, %v: the watchdog should extend with the new 300ms lease", ttl, err)
		}
	})
}

func TestWatchdogLost(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		if n := watchdogs(); n != 0 {
			t.Fatalf("%d watchdogs before the test", n)
		}
		l, err := e.TryLock(ctx, "gone", LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "DEL", s.NS+"lock:{gone}")
		select {
		case <-l.Lost():
		case <-time.After(3 * time.Second):
			t.Fatal("Lost did not close after the key vanished")
		}
		waitWatchdogs(t, 0)
		if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Unlock of a lost lock: %v", err)
		}
	})
}

func TestLostNeverClosesWithoutWatchdog(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		l, err := engine(s).TryLock(ctx, "nw", LockOptions{TTL: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Advance(20 * time.Millisecond)
		if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Extend: %v", err)
		}
		select {
		case <-l.Lost():
			t.Error("Lost closed without a watchdog")
		case <-time.After(20 * time.Millisecond):
		}
	})
}

// cutOff makes 200 acquisitions with deadlines of 0 to 390 µs, so many are
// cut off mid-call, and gives back those that succeed.
func cutOff(t *testing.T, acquire func(ctx context.Context) (release func(context.Context) error, err error)) {
	t.Helper()
	cut := 0
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%40)*10*time.Microsecond)
		release, err := acquire(ctx)
		cancel()
		if err != nil {
			cut++
			continue
		}
		if err := release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 200 acquisitions cut off by their context", cut)
}

// waitWatchdogs waits (generously) until exactly n watchdog goroutines
// run. Counting all goroutines would also count miniredis's and the pool's.
func waitWatchdogs(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for watchdogs() != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := watchdogs(); got != n {
		t.Errorf("%d watchdog goroutines running, want %d", got, n)
	}
}

func watchdogs() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "atomicredis.(*renewer).watch(")
}

// After SCRIPT FLUSH the first EVALSHA answers NOSCRIPT; redigo's
// Script.DoContext must resend with EVAL, which loads the script again.
// (internal/suite's ScriptFlushFallsBackToEval checks the calls work over
// every client; this checks, by the script's hash, that EVAL reloaded it.)
func TestScriptFlushReloadsScript(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "sf", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "SCRIPT", "FLUSH")
		if ok, _ := redis.Ints(s.Do("SCRIPT", "EXISTS", scriptLockRelease.Hash())); len(ok) != 1 || ok[0] != 0 {
			t.Fatalf("SCRIPT EXISTS after FLUSH = %v", ok)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
		}
		if ok, _ := redis.Ints(s.Do("SCRIPT", "EXISTS", scriptLockRelease.Hash())); len(ok) != 1 || ok[0] != 1 {
			t.Errorf("the EVAL fallback did not load the script: %v", ok)
		}
	})
}

// On a real server, MONITOR proves that each operation is one EVALSHA:
// the commands a script runs show up tagged "lua", the client's own not.
func TestOneRoundTripPerOperation(t *testing.T) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		t.Skip("REDIS_ADDR not set: MONITOR runs on a real server only")
	}
	s := testserver.Real(t, "redis", addr)
	ctx, e := ctxT(t), engine(s)
	var l, r *Lock
	var p *Permit
	ops := []struct {
		name string
		run  func() error
	}{
		{"TryLock", func() (err error) { l, err = e.TryLock(ctx, "one", LockOptions{}); return err }},
		{"Extend", func() error { return l.Extend(ctx, time.Minute) }},
		{"Unlock", func() error { return l.Unlock(ctx) }},
		{"TryRLock", func() (err error) { r, err = e.TryRLock(ctx, "one", LockOptions{}); return err }},
		{"RLock", func() (err error) { l, err = e.RLock(ctx, "one", LockOptions{}); return err }},
		{"Extend (reader)", func() error { return r.Extend(ctx, time.Minute) }},
		{"TTL (reader)", func() error { _, err := r.TTL(ctx); return err }},
		{"Unlock (reader)", func() error { return r.Unlock(ctx) }},
		{"Unlock (last reader)", func() error { return l.Unlock(ctx) }},
		{"TryWLock", func() (err error) { l, err = e.TryWLock(ctx, "one", LockOptions{}); return err }},
		{"Unlock (writer)", func() error { return l.Unlock(ctx) }},
		{"WLock", func() (err error) { l, err = e.WLock(ctx, "one", LockOptions{}); return err }},
		{"Unlock (writer)", func() error { return l.Unlock(ctx) }},
		{"AcquireSemaphore", func() (err error) { p, err = e.TryAcquireSemaphore(ctx, "one", SemaphoreOptions{Limit: 1}); return err }},
		{"Extend", func() error { return p.Extend(ctx, 0) }},
		{"SemaphoreHolders", func() error { _, err := e.SemaphoreHolders(ctx, "one"); return err }},
		{"Release", func() error { return p.Release(ctx) }},
		{"AddRecent", func() error { return e.AddRecent(ctx, "one", "Alice") }},
		{"SuggestRecent", func() error { _, err := e.SuggestRecent(ctx, "one", "al", 5); return err }},
		{"RemoveRecent", func() error { return e.RemoveRecent(ctx, "one", "Alice") }},
		{"AddMembers", func() error { return e.AddMembers(ctx, "one", "abc", "abd") }},
		{"Suggest", func() error { _, err := e.Suggest(ctx, "one", "ab", 5); return err }},
		{"RemoveMembers", func() error { return e.RemoveMembers(ctx, "one", "abc", "abd") }},
		{"MarkActive", func() error { return e.MarkActive(ctx, "one", "d1", 7) }},
		{"IsActive", func() error { _, err := e.IsActive(ctx, "one", "d1", 7); return err }},
		{"CountActive", func() error { _, err := e.CountActive(ctx, "one", "d1", "d2"); return err }},
		{"MarkActiveMany", func() error { return e.MarkActiveMany(ctx, "one", "d2", 7, 8, 9) }},
		{"CountActiveAll", func() error { _, err := e.CountActiveAll(ctx, "one", "d1", "d2"); return err }},
	}
	for _, op := range ops { // load the scripts first
		if err := op.run(); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range ops {
		got := monitor(t, addr, s.NS, op.run)
		want := 1
		if strings.HasPrefix(op.name, "CountActive") {
			want = 3 // the periods' indexes, the one partition's tries, its count
		}
		evalsha := 0
		for _, cmd := range got {
			if strings.HasPrefix(cmd, `"EVALSHA"`) {
				evalsha++
			}
		}
		if len(got) != want || evalsha != want {
			t.Errorf("%s sent %q, want exactly %d EVALSHA", op.name, got, want)
		}
	}
}

// monitor runs f and returns the commands clients sent that mention ns,
// leaving out those a script ran.
func monitor(t *testing.T, addr, ns string, f func() error) []string {
	t.Helper()
	m, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Do("MONITOR"); err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	marker := ns + "end-of-monitor"
	c, _ := redis.Dial("tcp", addr)
	c.Do("ECHO", marker)
	c.Close()
	var sent []string
	for {
		line, err := redis.String(m.Receive())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, marker) {
			return sent
		}
		if strings.Contains(line, " lua] ") || !strings.Contains(line, ns) {
			continue
		}
		_, cmd, _ := strings.Cut(line, "] ")
		sent = append(sent, cmd)
	}
}

// Extend must win against a watchdog extension sent before it, however late
// that extension lands: the proxy holds back every command carrying the old
// 600 ms lease for 160 ms, so an extension (sent 200 ms after the acquire was)
// is in flight when Extend(1h) is sent, and lands after it. The server
// must keep the hour.
func TestExtendBeatsLateExtension(t *testing.T) {
	testserver.Parallel(t) // on miniredis alone: waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		proxy := startProxy(t, s.Addr, faults{holdOn: []byte("\r\n600\r\n"), holdFor: 160 * time.Millisecond})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
		ctx := ctxT(t)
		// The scripts loaded straight, so that no NOSCRIPT doubles a hold.
		warm, err := engine(s).TryLock(ctx, "warm", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		warm.Extend(ctx, time.Minute)
		warm.Unlock(ctx)
		for i := 0; i < 5; i++ {
			l, err := e.TryLock(ctx, "ext", LockOptions{TTL: 600 * time.Millisecond, Watchdog: true})
			if err != nil {
				t.Fatal(err)
			}
			// The TryLock was held back 160 ms; the first extension goes 200 ms
			// after it was sent, and is held back until 360 ms.
			time.Sleep(time.Duration(80+16*i) * time.Millisecond) // an extension is on its way
			if err := l.Extend(ctx, time.Hour); err != nil {
				t.Fatalf("round %d: Extend: %v", i, err)
			}
			time.Sleep(300 * time.Millisecond) // every held extension has landed
			pttl, _ := redis.Int64(s.Do("PTTL", s.NS+"lock:{ext}"))
			if pttl < int64(50*time.Minute/time.Millisecond) {
				t.Fatalf("round %d: PTTL %d ms after Extend(1h) returned: an older extension shortened the lease", i, pttl)
			}
			select {
			case <-l.Lost():
				t.Fatalf("round %d: Lost closed", i)
			default:
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// An extension numbered as the last one applied (a repeat, or a late
// watchdog extension an Extend's number has overtaken) changes nothing: the
// script says it is stale (2) and the lease the applied one set stands.
func TestExtensionNumberedAsAppliedChangesNothing(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		ctx, e := ctxT(t), engine(s)
		l, err := e.TryLock(ctx, "seq", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Extend(ctx, time.Hour); err != nil { // extension number 1
			t.Fatal(err)
		}
		c := s.Pool.Get()
		defer c.Close()
		v, err := redis.Int64(scriptLockExtend.Do(c, s.NS+"lock:{seq}", l.Token(), time.Second.Milliseconds(), 1))
		if err != nil {
			t.Fatal(err)
		}
		if pttl := s.PTTL(t, s.NS+"lock:{seq}"); v != 2 || pttl < 59*time.Minute {
			t.Errorf("extension 1 with 1s again after Extend(1h) was extension 1: reply %d, lease %v left; want 2 (stale) and the hour", v, pttl)
		}
	})
}

// defer l.Unlock(ctx) on a request context that was cancelled meanwhile
// must still release the lock (README, "Locks": Unlock always tries).
func TestUnlockOnDoneContext(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e := engine(s)
		ctx, cancel := context.WithCancel(context.Background())
		l, err := e.TryLock(ctx, "done", LockOptions{TTL: time.Minute, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.TryAcquireSemaphore(ctx, "done", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock on a cancelled ctx: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Errorf("Release on a cancelled ctx: %v", err)
		}
		if locked, err := e.IsLocked(context.Background(), "done"); err != nil || locked {
			t.Errorf("IsLocked after Unlock on a cancelled ctx = %v, %v", locked, err)
		}
		if n, err := e.SemaphoreHolders(context.Background(), "done"); err != nil || n != 0 {
			t.Errorf("holders after Release on a cancelled ctx = %d, %v", n, err)
		}
		waitWatchdogs(t, 0)
	})
}

// dialCounter is a pool whose dials and gets are counted.
type dialCounter struct {
	*redis.Pool
	dials, gets atomic.Int64
}

func (p *dialCounter) GetContext(ctx context.Context) (redis.Conn, error) {
	p.gets.Add(1)
	return p.Pool.GetContext(ctx)
}

// Giving up must not cost a second try at the server when nothing was
// sent: with Redis down a TryLock dials once, and a TryLock whose context
// ends while it waits for a pooled connection returns at once.
func TestGiveUpSendsNothingExtra(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := &dialCounter{}
	p.Pool = &redis.Pool{Dial: func() (redis.Conn, error) { p.dials.Add(1); return redis.Dial("tcp", down) }}
	e := New(p)
	for i := 0; i < 3; i++ {
		if _, err := e.TryLock(ctxT(t), "down", LockOptions{}); err == nil {
			t.Fatal("TryLock with Redis down: no error")
		}
	}
	if err := e.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := p.dials.Load(); n != 3 {
		t.Errorf("3 TryLocks with Redis down dialled %d times, want 3 (no abandon of what never reached the server)", n)
	}

	s := testserver.Mini(t)
	busy := &dialCounter{}
	busy.Pool = &redis.Pool{MaxActive: 1, Wait: true, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", s.Mini.Addr()) }}
	t.Cleanup(func() { busy.Close() })
	held := busy.Get()
	defer held.Close()
	e = New(busy)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = e.TryLock(ctx, "busy", LockOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotAcquired) {
		t.Errorf("TryLock on a saturated pool: %v, want DeadlineExceeded and not ErrNotAcquired (no server answered)", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("TryLock with a 20ms ctx on a saturated pool returned after %v", d)
	}
	if err := e.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := busy.gets.Load(); n != 1 {
		t.Errorf("%d connections asked for, want 1: nothing was sent, so nothing needs abandoning", n)
	}
}

// Close stops every watchdog the engine runs (their Lost channels close:
// nobody extends those leases any more) and waits for pending abandons.
func TestEngineClose(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		proxy := startProxy(t, s.Addr, faults{delayP: 1, maxDelay: 30 * time.Millisecond})
		e := New(newPool(t, proxy.addr()), WithNamespace(s.NS))
		var ls []*Lock
		for _, name := range []string{"c1", "c2"} {
			l, err := e.TryLock(ctx, name, LockOptions{TTL: time.Minute, Watchdog: true})
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		waitWatchdogs(t, 1) // one renewer extends both
		// Cut-off acquisitions leave abandons running in the background.
		for i := 0; i < 20; i++ {
			cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			e.TryLock(cctx, "cut", LockOptions{TTL: time.Minute})
			cancel()
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := watchdogs(); n != 0 {
			t.Errorf("%d watchdogs after Close", n)
		}
		if n := abandons(); n != 0 {
			t.Errorf("%d abandons still running after Close", n)
		}
		for _, l := range ls {
			select {
			case <-l.Lost():
			default:
				t.Errorf("lock %q: Lost open after Close stopped its watchdog", l.obj.name)
			}
		}
		if locked, err := e.IsLocked(ctx, "cut"); err != nil || locked {
			t.Errorf("after Close, cut-off acquisitions left the lock held: %v, %v", locked, err)
		}
		if _, err := e.TryLock(ctx, "after", LockOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("TryLock after Close: %v, want ErrClosed", err)
		}
		for _, l := range ls { // holdings stay usable
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("Unlock after Close: %v", err)
			}
		}
	})
}

func abandons() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "atomicredis.(*Engine).abandon(")
}

// No method of a nil holding panics (README, "Locks").
func TestNilHoldings(t *testing.T) {
	ctx := ctxT(t)
	var l *Lock
	var p *Permit
	for name, err := range map[string]error{
		"Lock.Unlock":    l.Unlock(ctx),
		"Lock.Extend":    l.Extend(ctx, time.Second),
		"Permit.Release": p.Release(ctx),
		"Permit.Extend":  p.Extend(ctx, 0),
	} {
		if !errors.Is(err, ErrNotHeld) {
			t.Errorf("%s on nil: %v, want ErrNotHeld", name, err)
		}
	}
	if _, err := l.TTL(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Lock.TTL on nil: %v", err)
	}
	if _, err := p.TTL(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Permit.TTL on nil: %v", err)
	}
	if held, err := l.Held(ctx); held || err != nil {
		t.Errorf("Lock.Held on nil = %v, %v", held, err)
	}
	if held, err := p.Held(ctx); held || err != nil {
		t.Errorf("Permit.Held on nil = %v, %v", held, err)
	}
	select {
	case <-l.Lost():
	default:
		t.Error("Lost of a nil lock is not closed")
	}
	if l.Token() != "" || l.Fence() != 0 || p.Token() != "" || p.Fence() != 0 {
		t.Error("nil holdings: Token/Fence not zero")
	}
}

// A wait ended by its context wraps both ErrNotAcquired and ctx.Err().
func TestWaitEndedByContext(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e := engine(s)
		if _, err := e.TryLock(ctxT(t), "busy", LockOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctxT(t), "busy", SemaphoreOptions{Limit: 1, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := e.Lock(ctx, "busy", LockOptions{Wait: time.Minute})
		if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("Lock ended by cancel: %v, want ErrNotAcquired and Canceled", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err = e.AcquireSemaphore(ctx, "busy", SemaphoreOptions{Limit: 1, Wait: time.Minute})
		if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("AcquireSemaphore ended by deadline: %v, want ErrNotAcquired and DeadlineExceeded", err)
		}
	})
}
