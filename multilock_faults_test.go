package atomicredis

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

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
func TestLockAllUnderFaults(t *testing.T) {
	testserver.Parallel(t)
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
		// Progress: acquisitions in every second.
		stalls := 0
		done := make(chan struct{})
		var pw sync.WaitGroup
		pw.Add(1)
		go func() {
			defer pw.Done()
			last := int64(0)
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Second):
					if n := atomic.LoadInt64(&f.acquisitions); n == last {
						stalls++
					} else {
						last = n
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
		t.Logf("%s: %d LockAll acquisitions of 2-5 names of %d, %d failed calls (%d ran out their 30 s wait), %d left a name held, %d overlaps among valid holders, %d fence violations, %d lost, %d seconds without progress, %d connections cut",
			s.Name, f.acquisitions, pool, failed.Load(), timeouts.Load(), leftHeld.Load(), f.overlaps, f.fenceViolations, f.lost, stalls, cuts)
		if f.overlaps != 0 || f.fenceViolations != 0 || stalls != 0 {
			t.Errorf("%d overlaps, %d fence violations, %d seconds without progress", f.overlaps, f.fenceViolations, stalls)
		}
		if f.acquisitions < int64(target) {
			t.Errorf("only %d of %d acquisitions", f.acquisitions, target)
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
func TestEvalUnderFaults(t *testing.T) {
	testserver.Parallel(t)
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
		f.underChaos(proxy, workers, target, func(w int) {
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
		if refused.Load() == 0 {
			t.Error("no write was refused: the faults did not bite, the check proves little")
		}
	})
}
