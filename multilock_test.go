package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// free fails t unless none of names is held.
func free(t *testing.T, e *Engine, names ...string) {
	t.Helper()
	for _, n := range names {
		if info := lockInfo(t, e, n); info.Held {
			t.Errorf("%s is held (fence %d), want free", n, info.Fence)
		}
	}
}

// TryLockAll takes all or none; LockAll waits for the busy ones.
func TestMultiLock_AllOrNone(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, other, ctx := engine(s), engine(s), ctxT(t)
		names := []string{"a", "b", "c", "d"}
		m, err := e.TryLockAll(ctx, names, LockOptions{TTL: 5 * time.Second, Owner: "me"})
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range m.Locks() {
			info := lockInfo(t, e, names[i])
			if info.Token != l.Token() || info.Fence != l.Fence() || info.Owner != "me" {
				t.Fatalf("%s: %+v, want held by lock %d (fence %d, owner me)", names[i], info, i, l.Fence())
			}
		}
		if held, err := m.Held(ctx); !held || err != nil {
			t.Fatalf("Held: %v, %v", held, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		free(t, e, names...)
		if clustered := s.Engines != nil; e.clustered.Load() != clustered { // one script, or one name at a time
			t.Fatalf("took them one at a time: %v; on a multi-node cluster: %v", e.clustered.Load(), clustered)
		}

		busy, err := other.TryLock(ctx, "c", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryLockAll(ctx, names, LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryLockAll with c held: %v, want ErrNotAcquired", err)
		}
		free(t, e, "a", "b", "d")

		got := make(chan *MultiLock, 1)
		go func() {
			m, err := e.LockAll(ctx, names, LockOptions{TTL: 5 * time.Second, Wait: 5 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		waitFor(t, func() bool { return lockInfo(t, e, "c").Waiting == 1 })
		if err := busy.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		m = <-got
		if m == nil {
			return
		}
		for i, l := range m.Locks() {
			if info := lockInfo(t, e, names[i]); info.Token != l.Token() {
				t.Fatalf("after waiting: %s: %+v, want lock %d's", names[i], info, i)
			}
		}
		if _, err := e.TryLockAll(ctx, []string{"x", "a"}, LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryLockAll of a name the engine holds: %v, want ErrNotAcquired", err)
		}
		// A name the engine holds is waited for, as Lock waits: here by its
		// own holder, so the wait runs out.
		const wait = 300 * time.Millisecond
		start := time.Now()
		if _, err := e.LockAll(ctx, []string{"x", "a"}, LockOptions{Wait: wait}); !errors.Is(err, ErrNotAcquired) || time.Since(start) < wait {
			t.Fatalf("LockAll of a name the engine holds: %v after %v, want ErrNotAcquired after its wait of %v", err, time.Since(start), wait)
		}
		free(t, e, "x")
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A LockAll whose wait ends releases what it took.
func TestMultiLock_ReleasesOnFailure(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, other, ctx := engine(s), engine(s), ctxT(t)
		names := []string{"p", "q", "r"}
		busy, err := other.TryLock(ctx, "q", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Unlock(ctx)
		if _, err := e.LockAll(ctx, names, LockOptions{Wait: 200 * time.Millisecond}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("LockAll with q held throughout: %v, want ErrNotAcquired", err)
		}
		free(t, e, "p", "r")
	})
}

// Two LockAll calls over the same names in opposite orders, again and
// again, never deadlock.
func TestMultiLock_CrossingOrders(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		names := []string{"n1", "n2", "n3", "n4", "n5"}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 4; w++ {
			e := engine(s)
			order := append([]string(nil), names...)
			if w%2 == 1 {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					m, err := e.LockAll(ctx, order, LockOptions{TTL: 5 * time.Second, Wait: 10 * time.Second})
					if err != nil {
						errs <- fmt.Errorf("round %d: %w", i, err)
						return
					}
					if err := m.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// Losing one lock loses the MultiLock: Lost closes, its Context ends, the
// other locks are released.
func TestMultiLock_LosesAllWithOne(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, ctx := engine(s), ctxT(t)
		names := []string{"u", "v", "w"}
		m, err := e.LockAll(ctx, names, LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := m.Context(context.Background())
		defer cancel()
		if ok, err := e.ForceUnlock(ctx, "v"); !ok || err != nil {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		select {
		case <-m.Lost():
		case <-time.After(3 * time.Second):
			t.Fatal("Lost did not close in 3 s")
		}
		select {
		case <-mctx.Done():
		case <-time.After(time.Second):
			t.Fatal("Context did not end")
		}
		waitFor(t, func() bool { return !lockInfo(t, e, "u").Held && !lockInfo(t, e, "w").Held })
		if err := m.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Unlock after the loss: %v, want ErrNotHeld", err)
		}
	})
}

// A lock's key that holds another type (a v4 engine's lock, a string;
// a sorted set) fails TryLockAll with nothing changed, on the last of four
// names, with the others' keys in use. (On a cluster, one script a slot:
// the other names were taken and given back; the bad key is as it was, no
// name held.)
func TestMultiLock_LockKeyOfWrongType(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		names := []string{"wa", "wb", "wc", "wd"}
		m, err := e.TryLockAll(ctx, names[:3], LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		key := object{kind: kindLock, name: "wd", ns: s.NS}.key("")
		for _, bad := range [][]any{{"SET", key, "v4-token 1796683402987094 0"}, {"ZADD", key, 1, "m"}} {
			s.Must(t, "DEL", key)
			s.Must(t, bad[0].(string), bad[1:]...)
			before := s.Snapshot(t)
			if _, err := e.TryLockAll(ctx, names, LockOptions{}); err == nil || errors.Is(err, ErrNotAcquired) {
				t.Errorf("key made by %q: TryLockAll: %v, want a Redis error", bad, err)
			}
			after := s.Snapshot(t)
			if s.Name == "cluster" { // one script a slot: the others were taken and given back
				maps.DeleteFunc(before, func(k, _ string) bool { return k != key })
				maps.DeleteFunc(after, func(k, _ string) bool { return k != key })
			}
			if !maps.Equal(before, after) {
				t.Errorf("key made by %q: the keys changed:\n%v\n%v", bad, before, after)
			}
			s.Must(t, "DEL", key)
			free(t, e, names...)
		}
	})
}

// Bad input writes nothing.
func TestMultiLock_Invalid(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		many := make([]string, MaxLockAll+1)
		for i := range many {
			many[i] = fmt.Sprint("m", i)
		}
		for what, names := range map[string][]string{
			"none": nil, "a duplicate": {"a", "b", "a"}, "too many": many, "a bad name": {"a", "{b}"},
		} {
			if _, err := e.TryLockAll(ctx, names, LockOptions{}); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", what, err)
			}
		}
		free(t, e, "a", "b", "m0")
	})
}

// refusingPool refuses its first n connections as a restarting server does
// (connection refused), each after delay, whatever the ctx, then serves
// from p.
type refusingPool struct {
	p     Pool
	mu    sync.Mutex
	n     int
	delay time.Duration
}

func (f *refusingPool) GetContext(ctx context.Context) (redis.Conn, error) {
	f.mu.Lock()
	refuse := f.n > 0
	f.n--
	f.mu.Unlock()
	if refuse {
		time.Sleep(f.delay)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return f.p.GetContext(ctx)
}

// A LockAll that waits rides out a refused connection as Lock does (see
// docs/locks.md: a wait retries it until it runs out): it goes on name by name,
// each retried, where its first try at all the names at once failed. A
// TryLockAll reports it. (Before, LockAll gave up at once.)
func TestMultiLock_RidesOutARefusedConnection(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("a plain pool in front of one server")
		}
		ctx := ctxT(t)
		o := LockOptions{TTL: 5 * time.Second, Wait: 2 * time.Second}
		e := New(&refusingPool{p: s.Pool, n: 1}, WithNamespace(s.NS))
		defer e.Close(ctx)
		m, err := e.LockAll(ctx, []string{"r1", "r2"}, o)
		if err != nil {
			t.Fatalf("LockAll (Wait 2s) after one refused connection: %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		try := New(&refusingPool{p: s.Pool, n: 1}, WithNamespace(s.NS))
		defer try.Close(ctx)
		if _, err := try.TryLockAll(ctx, []string{"r1", "r2"}, o); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("TryLockAll after one refused connection: %v, want the refusal", err)
		}
		free(t, engine(s), "r1", "r2")
	})
}

// LockAll's Wait is its wait in all: a first try at all the names at once
// that fails late counts against it, and the names taken one by one after
// it wait only what is left. (Before, they waited a whole Wait more.)
func TestMultiLock_WaitsItsWaitInAll(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		if s.Engines != nil {
			t.Skip("a plain pool in front of one server")
		}
		ctx := ctxT(t)
		other := engine(s)
		if _, err := other.TryLock(ctx, "w1", LockOptions{TTL: 20 * time.Second}); err != nil {
			t.Fatal(err)
		}
		e := New(&refusingPool{p: s.Pool, n: 1, delay: 1500 * time.Millisecond}, WithNamespace(s.NS))
		defer e.Close(ctx)
		start := time.Now()
		_, err := e.LockAll(ctx, []string{"w1", "w2"}, LockOptions{TTL: 5 * time.Second, Wait: 2 * time.Second})
		took := time.Since(start)
		if !errors.Is(err, ErrNotAcquired) {
			t.Errorf("LockAll of a held name: %v, want ErrNotAcquired", err)
		}
		if took > 2500*time.Millisecond {
			t.Errorf("LockAll with Wait 2s, its first try refused after 1.5 s, returned after %v", took.Round(time.Millisecond))
		}
		free(t, e, "w2")
	})
}

// Close releases a MultiLock's locks: each Lock's Lost closes, and so does
// the MultiLock's, which closes when any of its locks is lost. (Before,
// MultiLock.Lost stayed open.)
func TestMultiLock_LostOnClose(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		m, err := e.LockAll(ctx, []string{"ca", "cb"}, LockOptions{TTL: 5 * time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := m.Context(context.Background())
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for i, l := range m.Locks() {
			select {
			case <-l.Lost():
			case <-time.After(time.Second):
				t.Errorf("lock %d: Lost open after Close", i)
			}
		}
		select {
		case <-mctx.Done():
		case <-time.After(time.Second):
			t.Errorf("MultiLock.Context live after Close")
		}
		select {
		case <-m.Lost():
		case <-time.After(time.Second):
			t.Errorf("MultiLock.Lost open after Close, though each Lock.Lost closed")
		}
	})
}

// liveLocks counts the lock holdings e keeps that have not ended.
func liveLocks(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for h := range e.held {
		h.mu.Lock()
		if h.ops == lockOps && h.ended == nil {
			n++
		}
		h.mu.Unlock()
	}
	return n
}

// 16 goroutines, each on an engine of its own, take LockAll over 2 to 5
// names of 8 in random orders (so orders cross), with a 30 s wait, through
// the fault proxy (on the 3+3 cluster, a proxy in front of each node).
// Valid holders of a name never overlap, no LockAll runs out
// its wait (a deadlock would), every second sees acquisitions, and a
// failed call leaves none of its names held by its engine.
func TestMultiLock_UnderFaults(t *testing.T) {
	testserver.Apart(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		target := 1000 // each a LockAll of up to 5 contended names: about 30 a second through the proxy
		switch {
		case testing.Short():
			target = 100
		case s.Mini != nil:
			target = 300
		}
		const workers, pool = 16, 8
		es := make([]*Engine, workers)
		var proxy *faultProxy
		var nodes *proxiedCluster
		switch seeds := testserver.ClusterSeeds(); {
		case s.Addr != "":
			proxy = startProxy(t, s.Addr, faults{delayP: 0.2, maxDelay: 20 * time.Millisecond})
			p := newPool(t, proxy.addr())
			p.MaxIdle = 64
			for i := range es {
				es[i] = New(p, WithNamespace(s.NS))
			}
		case s.Engines != nil && len(seeds) > 0: // the 3+3 cluster
			var rc *redisc.Cluster
			rc, nodes = newProxiedCluster(t, seeds, faults{delayP: 0.2, maxDelay: 20 * time.Millisecond})
			for i := range es {
				es[i] = New(testcluster.Pool{Cluster: rc}, WithNamespace(s.NS))
			}
		default:
			for i := range es {
				es[i] = engine(s)
			}
		}
		defer func() {
			for _, e := range es {
				e.Close(context.Background())
			}
		}()
		resources := make([]fencedResource, pool)
		sections := make([][]section, pool)
		var secMu sync.Mutex
		var f mutexFigures
		var timeouts, leftHeld, failed atomic.Int64
		stopChaos := func() {}
		switch {
		case proxy != nil:
			stopChaos = proxy.chaos()
		case nodes != nil:
			stopChaos = nodes.chaos()
		}
		// Progress: acquisitions in every 3 seconds (a stall: 3 seconds in
		// a row without one; a busy machine has made 1 s without one, in
		// CI's miniredis run at load 10, with connections cut).
		stalls := 0
		done := make(chan struct{})
		var pw sync.WaitGroup
		pw.Add(1)
		go func() {
			defer pw.Done()
			last, idle := int64(0), 0
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Second):
					if n := atomic.LoadInt64(&f.acquisitions); n == last {
						if idle++; idle == 3 {
							stalls++
							idle = 0
						}
					} else {
						last, idle = n, 0
					}
				}
			}
		}()
		deadline := time.Now().Add(5 * time.Minute)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(e *Engine) {
				defer wg.Done()
				ctx := context.Background()
				for atomic.LoadInt64(&f.acquisitions) < int64(target) && time.Now().Before(deadline) {
					k := 2 + rand.IntN(4)
					idx := rand.Perm(pool)[:k]
					names := make([]string, k)
					for j, i := range idx {
						names[j] = "a" + strconv.Itoa(i)
					}
					m, err := e.LockAll(ctx, names, LockOptions{TTL: 200 * time.Millisecond, Wait: 30 * time.Second})
					if err != nil {
						failed.Add(1)
						if errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrNotHeld) {
							timeouts.Add(1)
							t.Errorf("LockAll %v: %v", names, err)
						}
						if n := liveLocks(e); n != 0 {
							leftHeld.Add(1)
							t.Errorf("LockAll %v failed (%v) and left %d of its locks held", names, err, n)
						}
						continue
					}
					atomic.AddInt64(&f.acquisitions, 1)
					start := time.Now()
					entered := make([]bool, k)
					for j, l := range m.Locks() {
						entered[j] = resources[idx[j]].enter(l.Fence())
					}
					time.Sleep(rand.N(2 * time.Millisecond))
					end := time.Now()
					for j, l := range m.Locks() {
						fenced := !entered[j] || !resources[idx[j]].stillMine(l.Fence())
						valid := f.released(l.Unlock(ctx), fenced)
						secMu.Lock()
						sections[idx[j]] = append(sections[idx[j]], section{start, end, valid})
						secMu.Unlock()
					}
				}
			}(es[w])
		}
		wg.Wait()
		close(done)
		pw.Wait()
		stopChaos()
		for _, secs := range sections {
			f.overlaps += int64(overlapsAmongValid(secs))
		}
		cuts := int64(0)
		switch {
		case proxy != nil:
			cuts = proxy.cuts.Load()
		case nodes != nil:
			cuts = nodes.cuts()
		}
		t.Logf("%s: %d LockAll acquisitions of 2-5 names of %d, %d failed calls (%d ran out their 30 s wait), %d left a name held, %d overlaps among valid holders, %d fence violations, %d lost, %d stalls of 3 s without progress, %d connections cut",
			s.Name, f.acquisitions, pool, failed.Load(), timeouts.Load(), leftHeld.Load(), f.overlaps, f.fenceViolations, f.lost, stalls, cuts)
		if f.overlaps != 0 || f.fenceViolations != 0 || stalls != 0 {
			t.Errorf("%d overlaps, %d fence violations, %d stalls of 3 s without progress", f.overlaps, f.fenceViolations, stalls)
		}
		if f.acquisitions < int64(target) {
			t.Errorf("only %d of %d acquisitions", f.acquisitions, target)
		}
	})
}

// One engine serves a whole process: 16 goroutines on it over crossing
// sets of 2 to 5 of 8 names all get their locks, never two holders of a
// name at once, with progress every second.
func TestMultiLock_OneEngineCrossingSets(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
		var inUse [8]atomic.Int32
		var acquired atomic.Int64
		var overlaps, errs atomic.Int64
		var firstErr atomic.Value
		const run = 3 * time.Second
		end := time.Now().Add(run)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for time.Now().Before(end) {
					idx := rng.Perm(8)[:2+rng.IntN(4)]
					set := make([]string, len(idx))
					for i, j := range idx {
						set[i] = names[j]
					}
					m, err := e.LockAll(ctx, set, LockOptions{TTL: 5 * time.Second, Wait: 10 * time.Second})
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err)
						continue
					}
					acquired.Add(1)
					for _, j := range idx {
						if inUse[j].Add(1) != 1 {
							overlaps.Add(1)
						}
					}
					time.Sleep(time.Millisecond)
					for _, j := range idx {
						inUse[j].Add(-1)
					}
					if err := m.Unlock(ctx); err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		var stalls []string
		for last := int64(0); time.Now().Before(end); {
			time.Sleep(time.Second)
			if n := acquired.Load(); n == last {
				stalls = append(stalls, time.Until(end).Round(time.Second).String())
			} else {
				last = n
			}
		}
		wg.Wait()
		t.Logf("%d LockAll calls in %v, %d errors, %d overlaps", acquired.Load(), run, errs.Load(), overlaps.Load())
		if errs.Load() != 0 {
			t.Errorf("%d errors; the first: %v", errs.Load(), firstErr.Load())
		}
		if overlaps.Load() != 0 {
			t.Errorf("%d overlaps: two holders of one name at once", overlaps.Load())
		}
		if len(stalls) != 0 {
			t.Errorf("no LockAll in a second %d times (with %s left)", len(stalls), strings.Join(stalls, ", "))
		}
	})
}

// LockAll and TryLockAll take MaxLockAll names, the most they document.
func TestMultiLock_TakesMaxLockAllNames(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		names := make([]string, MaxLockAll)
		for i := range names {
			names[i] = fmt.Sprint("n", i)
		}
		m, err := e.TryLockAll(ctx, names, LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatalf("TryLockAll of MaxLockAll (%d) names: %v", MaxLockAll, err)
		}
		if got := len(m.Locks()); got != MaxLockAll {
			t.Fatalf("%d locks, want %d", got, MaxLockAll)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if m, err = e.LockAll(ctx, names, LockOptions{TTL: 5 * time.Second}); err != nil {
			t.Fatalf("LockAll of MaxLockAll (%d) names: %v", MaxLockAll, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		free(t, e, names...)
	})
}

// Without a watchdog each lock a TryLockAll took lives for its TTL, and is
// free once the TTL has passed, however long the fence retention.
func TestMultiLock_LocksLiveTheirTTL(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s, WithFenceRetention(time.Hour)), ctxT(t)
		const ttl = 2 * time.Second
		names := []string{"t1", "t2", "t3"}
		if _, err := e.TryLockAll(ctx, names, LockOptions{TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			key := object{kind: kindLock, name: name, ns: s.NS}.key("")
			if pttl := s.PTTL(t, key); pttl <= 0 || pttl > ttl {
				t.Errorf("%s expires in %v, want at most its TTL of %v", name, pttl, ttl)
			}
		}
		s.Advance(ttl + 10*time.Millisecond)
		free(t, e, names...)
	})
}

// A LockAll that waited for a busy name, without a watchdog, keeps none:
// its locks are free once their TTL has passed.
func TestMultiLock_WaitedLocksKeepNoWatchdog(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e, other, ctx := engine(s), engine(s), ctxT(t)
		busy, err := other.TryLock(ctx, "k2", LockOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := e.LockAll(ctx, []string{"k1", "k2"}, LockOptions{TTL: 600 * time.Millisecond, Wait: 10 * time.Second})
			got <- err
		}()
		waitFor(t, func() bool { return lockInfo(t, e, "k2").Waiting == 1 })
		if err := busy.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("LockAll after the busy name was unlocked: %v", err)
		}
		// Unwatched, both run out at 600 ms; a watchdog would keep them
		// for ever.
		waitFor(t, func() bool {
			return !lockInfo(t, e, "k1").Held && !lockInfo(t, e, "k2").Held
		})
	})
}

// lock_acquire_all's reply: every fence, or the busy lock's index; any
// other shape (a short list of fences among them) is an error.
func TestMultiLock_DecodeReply(t *testing.T) {
	got, err := decodeLockAll([]any{int64(1), int64(7), int64(9)}, 2)
	if err != nil || !got.took || !slices.Equal(got.fences, []int64{7, 9}) {
		t.Errorf("decodeLockAll of a grant = %+v, %v", got, err)
	}
	if got, err := decodeLockAll([]any{int64(0), int64(2)}, 2); err != nil || got.took || got.busy != 1 {
		t.Errorf("decodeLockAll of a refusal = %+v, %v; want busy 1", got, err)
	}
	for _, bad := range []any{nil, int64(1), []any{int64(1), int64(7)}, []any{int64(0), int64(3)}, []any{int64(0), int64(0)}, []any{int64(2), int64(1), int64(1)}} {
		if got, err := decodeLockAll(bad, 2); err == nil {
			t.Errorf("decodeLockAll(%v, 2) = %+v, want an error", bad, got)
		}
	}
}
