package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// AcquireSemaphore's zero Wait waits, as Lock's does; TryAcquireSemaphore
// makes one attempt.
func TestAcquire_ZeroWaitMeansTheDefault(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		p, err := e.TryAcquireSemaphore(ctx, "zw", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, "zw", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryAcquireSemaphore on a full semaphore: %v", err)
		}
		time.AfterFunc(100*time.Millisecond, func() { p.Release(ctx) })
		q, err := e.AcquireSemaphore(ctx, "zw", SemaphoreOptions{Limit: 1})
		if err != nil {
			t.Fatalf("AcquireSemaphore with the zero Wait behind a permit freed after 100ms: %v", err)
		}
		q.Release(ctx)
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
func TestAcquire_GiveUpSendsNothingExtra(t *testing.T) {
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

// A wait ended by its context wraps both ErrNotAcquired and ctx.Err().
func TestAcquire_WaitEndedByContext(t *testing.T) {
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

// Waiters get the lock in the order they queued: each is started only once
// the server shows the one before it queued.
func TestAcquire_HandoffFIFO(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		for _, kind := range []string{"lock", "semaphore"} {
			t.Run(kind, func(t *testing.T) {
				e := waitEngine(s)
				take := func(wait time.Duration) (func() error, error) {
					if kind == "lock" {
						l, err := e.Lock(ctx, "fifo", LockOptions{TTL: time.Minute, Wait: wait})
						if err != nil {
							return nil, err
						}
						return func() error { return l.Unlock(ctx) }, nil
					}
					p, err := e.AcquireSemaphore(ctx, "fifo", SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: wait})
					if err != nil {
						return nil, err
					}
					return func() error { return p.Release(ctx) }, nil
				}
				queue := s.NS + map[string]string{"lock": "lock", "semaphore": "sem"}[kind] + ":{fifo}:queue"
				release, err := take(time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				const n = 8
				var mu sync.Mutex
				var order []int
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						rel, err := take(time.Minute)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
						if err := rel(); err != nil {
							t.Error(err)
						}
					}(i)
					waitQueued(s, t, queue, i+1)
				}
				if err := release(); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				t.Logf("%s: granted in order %v", kind, order)
				for i, w := range order {
					if i != w {
						t.Fatalf("granted in order %v, want arrival order", order)
					}
				}
				if err := e.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if n := countQueued(s, t, queue); n != 0 {
					t.Errorf("%d entries left in the queue", n)
				}
			})
		}
	})
}

// TryLock and a one-shot AcquireSemaphore never jump a queue of live
// waiters, not even while the object is free between a crash and the
// moment the head takes it.
func TestAcquire_NoQueueJumping(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), waitEngine(s)
		if _, err := e.TryLock(ctx, "nj", LockOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := e.Lock(ctx, "nj", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		waitQueued(s, t, s.NS+"lock:{nj}:queue", 1)
		s.Must(t, "HSET", s.NS+"lock:{nj}", "d", 0) // the holder's lease is gone (flagged by the waiter: its end is in 'd')
		_, err := e.TryLock(ctx, "nj", LockOptions{})
		if !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryLock on a free lock with a waiter queued: %v, want ErrNotAcquired", err)
		}
		if err := <-got; err != nil {
			t.Errorf("the queued waiter: %v", err)
		}

		if _, err := e.TryAcquireSemaphore(ctx, "nj", SemaphoreOptions{Limit: 1, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		go func() {
			p, err := e.AcquireSemaphore(ctx, "nj", SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: 10 * time.Second})
			if err == nil {
				err = p.Release(ctx)
			}
			got <- err
		}()
		waitQueued(s, t, s.NS+"sem:{nj}:queue", 1)
		if _, err := e.TryAcquireSemaphore(ctx, "nj", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("one-shot AcquireSemaphore with a waiter queued: %v, want ErrNotAcquired", err)
		}
		s.Must(t, "DEL", s.NS+"sem:{nj}", s.NS+"sem:{nj}:owner") // the permit is gone
		if _, err := e.TryAcquireSemaphore(ctx, "nj", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("one-shot AcquireSemaphore on a free slot with a waiter queued: %v, want ErrNotAcquired", err)
		}
		if err := <-got; err != nil {
			t.Errorf("the queued semaphore waiter: %v", err)
		}
	})
}

// A holder that crashes (never unlocks): the head of the queue takes the
// lock when the lease ends, told when by the server.
func TestAcquire_HandoffAfterCrashedHolder(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), waitEngine(s)
		if _, err := e.TryLock(ctx, "crash", LockOptions{TTL: 300 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := e.Lock(ctx, "crash", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Logf("the waiter took the lock %v after queueing behind a 300ms lease", took)
		if took > 300*time.Millisecond+3*testQueueTTL+time.Second {
			t.Errorf("the waiter needed %v", took)
		}
		if ttl, err := l.TTL(ctx); err != nil || ttl < 50*time.Second {
			t.Errorf("the new holder's lease %v, %v: want its own minute", ttl, err)
		}
	})
}

// A waiter that dies while queued (its entry is never extended): the next
// waiter is delayed by at most the dead entry's lifetime, not by a lease.
func TestAcquire_DeadWaiterSkipped(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), waitEngine(s)
		holder, err := e.TryLock(ctx, "dw", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// A waiter that queues and then dies: its one call, and no extension.
		dead := "dead-waiter"
		k := func(suffix string) any { return s.NS + "lock:{dw}" + suffix }
		if _, err := redis.Int64s(scriptLockAcquire.Do(s.Pool.Get(), k(""),
			dead, time.Minute.Milliseconds(), 1, testQueueTTL.Milliseconds(), "dead")); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Duration, 1)
		go func() {
			l, err := e.Lock(ctx, "dw", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
			l.Unlock(ctx)
			got <- 0
		}()
		waitQueued(s, t, s.NS+"lock:{dw}:queue", 2)
		start := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		<-got
		took := time.Since(start)
		t.Logf("behind a dead waiter, the live one took the lock %v after the release (queue TTL %v)", took, testQueueTTL)
		if took > 3*testQueueTTL+time.Second {
			t.Errorf("the live waiter needed %v behind a dead one", took)
		}
	})
}

// queueOutlives reads, in one script, the server's clock, a queue's two
// keys' PTTLs and the deadlines of the entries in its waiters hash, and
// fails t unless both keys expire after every live entry's deadline.
func queueOutlives(s *testserver.Server, t *testing.T, prefix string) {
	t.Helper()
	v, err := redis.Int64s(s.Do("EVAL", `
local t = redis.call('TIME')
local last = 0
for _, e in ipairs(redis.call('HVALS', KEYS[2])) do
  last = math.max(last, tonumber(string.match(e, '^(%d+) ')))
end
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), last,
  redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}`, 2, prefix+":queue", prefix+":waiters"))
	if err != nil {
		t.Fatal(err)
	}
	now, last := v[0], v[1]
	for i, key := range []string{"queue", "waiters"} {
		if pttl := v[2+i]; last > now && now+pttl < last {
			t.Fatalf("%s:%s expires in %d ms, before its last entry's deadline %d ms from now", prefix, key, pttl, last-now)
		}
	}
}

// lockOutlivesItsQueue fails t unless the named plain lock's hash expires
// after every live entry's deadline.
func lockOutlivesItsQueue(s *testserver.Server, t *testing.T, name string) {
	t.Helper()
	v, err := redis.Int64s(s.Do("EVAL", `
local t = redis.call('TIME')
local s = {string.match(redis.call('HGET', KEYS[1], 'q') or '', '^(%d+) (%d+)')}
local last = 0
for i = tonumber(s[1]) or 1, tonumber(s[2]) or 0 do
  local e = redis.call('HGET', KEYS[1], 'e:' .. i)
  if e then last = math.max(last, tonumber(string.match(e, '^%S+ (%d+)'))) end
end
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), last, redis.call('PTTL', KEYS[1])}`, 1, s.NS+"lock:{"+name+"}"))
	if err != nil {
		t.Fatal(err)
	}
	if now, last, pttl := v[0], v[1], v[2]; last > now && now+pttl < last {
		t.Fatalf("lock %q expires in %d ms, before its last entry's deadline %d ms from now", name, pttl, last-now)
	}
}

// A queue outlives every live entry in it. A plain lock's queue lives in
// its one key (scripts/lib/lock.lua), which is kept past every live
// entry's deadline, and a waiter that died leaves no key of its own (its
// entry goes with the next handoff, or with the key). The queues of
// read-write locks and semaphores, keys of their own, expire no more than
// two entry lifetimes past their last write.
func TestAcquire_QueueKeysExpireWithTheirEntries(t *testing.T) {
	testserver.Parallel(t) // waits out entry lifetimes on purpose
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), waitEngine(s)
		holder, err := e.TryLock(ctx, "qk", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		prefix := s.NS + "lock:{qk}"
		rawWaiter(s, t, "qk", "dead", "gone", testQueueTTL)
		lockOutlivesItsQueue(s, t, "qk")
		if keys := s.Keys(t); len(keys) != 1 {
			t.Fatalf("a lock with a waiter: keys %q, want its one", keys)
		}

		got := make(chan error, 1)
		go func() {
			l, err := e.Lock(ctx, "qk", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		waitQueued(s, t, prefix+":queue", 2)
		for end := time.Now().Add(8 * testQueueTTL); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			lockOutlivesItsQueue(s, t, "qk")
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}

		// Read-write locks and semaphores.
		wl, err := e.TryWLock(ctx, "qk-rw", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.TryAcquireSemaphore(ctx, "qk-sem", SemaphoreOptions{Limit: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wctx, cancel := context.WithCancel(ctx)
		wg.Add(2)
		go func() { defer wg.Done(); e.RLock(wctx, "qk-rw", LockOptions{TTL: time.Minute, Wait: 10 * time.Second}) }()
		go func() {
			defer wg.Done()
			e.AcquireSemaphore(wctx, "qk-sem", SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: 10 * time.Second})
		}()
		prefixes := []string{s.NS + "rw:{qk-rw}", s.NS + "sem:{qk-sem}"}
		for _, prefix := range prefixes {
			waitQueued(s, t, prefix+":queue", 1)
		}
		for end := time.Now().Add(4 * testQueueTTL); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			for _, prefix := range prefixes {
				queueOutlives(s, t, prefix)
			}
		}
		cancel()
		wg.Wait()
		wl.Unlock(ctx)
		p.Release(ctx)
	})
}

// A waiter cut off by its context leaves nothing behind: no queue entry, no
// wake-up in the inbox, nothing held, also when the cancel races the
// handoff.
func TestAcquire_CancelledWaiterLeavesNothing(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		handed := 0
		for i := 0; i < 30; i++ {
			e := waitEngine(s) // closed each round: its abandons have run
			holder, err := e.TryLock(ctx, "cw", LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			got := make(chan *Lock, 1)
			go func() {
				l, _ := e.Lock(wctx, "cw", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
				got <- l
			}()
			waitQueued(s, t, s.NS+"lock:{cw}:queue", 1)
			time.AfterFunc(time.Duration(i%10)*100*time.Microsecond, cancel)
			holder.Unlock(ctx)
			if l := <-got; l != nil {
				handed++
				l.Unlock(ctx)
			}
			cancel()
			if err := e.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("30 cancels racing a handoff; %d waiters got the lock first", handed)
		for _, key := range s.Keys(t) {
			if key != s.NS+"lock:{cw}" {
				t.Errorf("left behind: %s", key)
			}
		}
		// The lock's one key may stay, free (its last fence kept for the
		// rest of the lease, the abandons' marks for a call timeout), with
		// no entry in its queue.
		if holder, _ := testserver.LockHolder(s.Do("HGET", s.NS+"lock:{cw}", "v")); holder != "" {
			t.Errorf("left behind: the lock held by %s", holder)
		}
		if q := lockQueue(s, t, "cw"); len(q) != 0 {
			t.Errorf("left behind: queue entries %+v", q)
		}
	})
}

// A bounded pool (MaxActive 4, Wait) with 16 goroutines contending on 8
// names: the waiters must not take every connection and starve the
// holders' Unlock and watchdogs. The queue entries keep their default
// lifetime (1 s): with 150 ms, a waiter handed a lock had 135 ms to
// confirm it, and at load 4 here one waited longer for a connection and
// lost it (as it should: then its Unlock returns ErrNotHeld).
func TestAcquire_BoundedPoolNoDeadlock(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		pool := &redis.Pool{MaxActive: 4, MaxIdle: 4, Wait: true,
			Dial: func() (redis.Conn, error) { return redis.Dial("tcp", s.Addr) }}
		t.Cleanup(func() { pool.Close() })
		e := New(pool, WithNamespace(s.NS))
		ctx := ctxT(t)
		var done atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					l, err := e.Lock(ctx, fmt.Sprintf("bp%d", g%8), LockOptions{TTL: 5 * time.Second, Wait: 30 * time.Second, Watchdog: true})
					if err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					done.Add(1)
				}
			}(g)
		}
		wg.Wait()
		took := time.Since(start)
		t.Logf("160 lock cycles on 8 names through a pool of 4 connections in %v", took)
		if done.Load() != 160 {
			t.Errorf("%d of 160 cycles", done.Load())
		}
		if took > 20*time.Second {
			t.Errorf("160 cycles took %v: waiters are starving holders of connections", took)
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A queue entry lapses at exactly its deadline by the server's clock: a
// release 1 ms before it hands the lock to that entry's waiter, a release
// at it passes over the entry to the next live waiter. (miniredis's
// clock, moved by hand: a real server's cannot be stopped on a
// millisecond.)
func TestAcquire_HandoffSkipsAnEntryAtItsDeadline(t *testing.T) {
	s := testserver.Mini(t)
	ctx, e := ctxT(t), engine(s)
	const entry = time.Second
	for _, c := range []struct {
		name  string
		after time.Duration // from the head's queueing to the release
		want  string        // who holds the lock after the release
	}{
		{"before", entry - time.Millisecond, "head"},
		{"at", entry, "next"},
	} {
		holder, err := e.TryLock(ctx, c.name, LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		rawWaiter(s, t, c.name, "head", "nobody", entry)
		rawWaiter(s, t, c.name, "next", "nobody", time.Hour)
		s.Advance(c.after)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := e.LockInfo(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Token != c.want {
			t.Errorf("released %v after the head queued with a %v entry: holder %q with %v left (\"\": free), want %q", c.after, entry, info.Token, info.TTL, c.want)
		}
	}
}

// A waiter is told its place: how many entries are ahead of it when it
// queues (its error says so when its wait runs out before an extension);
// and the head, with nobody ahead, is told how long the holder's lease
// has left (it takes the lock then, not at its next extension), where a
// waiter further back is told nothing (-1).
func TestAcquire_WaitersAreToldTheirPlace(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		ctx, e := ctxT(t), engine(s)
		w := engine(s)
		w.queueTTL = slowExtensions
		// w's wake subscription is up before its waiter below queues: one
		// coming up after would have it look again at once, and that
		// extension reads its place afresh.
		if _, err := e.TryLock(ctx, "keep", LockOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		kctx, cancel := context.WithCancel(ctx)
		kept := make(chan struct{})
		go func() {
			defer close(kept)
			w.Lock(kctx, "keep", LockOptions{TTL: time.Minute, Wait: time.Minute})
		}()
		defer func() { cancel(); <-kept }()
		waitQueued(s, t, s.NS+"lock:{keep}:queue", 1)
		waitSubscribed(s, t, w)

		if _, err := e.TryLock(ctx, "place", LockOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		k := func(suffix string) any { return s.NS + "lock:{place}" + suffix }
		c := s.Pool.Get()
		defer c.Close()
		for i, token := range []string{"a", "b"} {
			v, err := redis.Int64s(scriptLockAcquire.Do(c, k(""),
				token, time.Minute.Milliseconds(), 1, time.Minute.Milliseconds(), "nobody"))
			if err != nil || len(v) != 4 {
				t.Fatalf("queueing %s: %v, %v", token, v, err)
			}
			if hint, rank := v[1], v[2]; rank != int64(i) || (i == 0) != (hint > 0 && hint <= time.Minute.Milliseconds()) || (i > 0 && hint != -1) {
				t.Errorf("waiter %d queues with rank %d and a hint of %d ms; want rank %d and the holder's PTTL for the head, -1 behind it", i+1, rank, hint, i)
			}
		}
		// The wait ends long before the first extension.
		_, err := w.Lock(ctx, "place", LockOptions{TTL: time.Minute, Wait: 100 * time.Millisecond})
		if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), " 2 ahead in the queue") {
			t.Errorf("a waiter queued behind two: %v, want ErrNotAcquired saying 2 ahead in the queue", err)
		}
	})
}

// A waiter that gave up is never handed the lock: its Lock returns only
// once its abandon has landed, so the release that follows frees the lock
// for the next caller.
func TestAcquire_GaveUpWaiterIsNotHanded(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		holders, waiters, next := engine(s), engine(s), engine(s)
		for round := range 20 {
			name := fmt.Sprintf("gone%d", round)
			h, err := holders.TryLock(ctx, name, LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := waiters.Lock(ctx, name, LockOptions{Wait: 100 * time.Millisecond}); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("round %d: Lock on a held name: %v, want ErrNotAcquired", round, err)
			}
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l, err := next.TryLock(ctx, name, LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatalf("round %d: TryLock after the holder unlocked, its only waiter having given up: %v", round, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Waits cancelled on a name held for an hour leave no key that outlives
// the call timeout after they end.
func TestAcquire_AbandonedWaitsLeaveNoLongKeys(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		const callTimeout = 2 * time.Second
		e := engine(s, WithCallTimeout(callTimeout))
		h, err := engine(s).TryLock(ctx, "held", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(20*time.Millisecond, cancel)
			if _, err := e.Lock(cctx, "held", LockOptions{TTL: time.Hour, Wait: time.Minute}); !errors.Is(err, context.Canceled) {
				t.Fatalf("a cancelled wait: %v, want context.Canceled", err)
			}
			cancel()
		}
		lock := object{kind: kindLock, name: "held", ns: s.NS}
		for _, k := range s.Keys(t) {
			if k == lock.key("") || k == lock.key(":fence") {
				continue
			}
			if d := s.PTTL(t, k); d < 0 || d > callTimeout {
				t.Errorf("%s: PTTL %v after the waits ended; want at most the call timeout %v", k, d, callTimeout)
			}
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Abandon marks that lapsed do not pile up on a name that stays flagged
// (waiters queued all along): the next flagged write deletes their fields.
func TestAcquire_LapsedMarksCleared(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		if _, err := engine(s).TryLock(ctx, "pile", LockOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		key := s.NS + "lock:{pile}"
		rawWaiter(s, t, "pile", "w1", "x", time.Hour)
		marks := func() (marks, entries int) {
			t.Helper()
			fields, err := redis.Strings(s.Do("HKEYS", key))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fields {
				switch {
				case strings.HasPrefix(f, "x:"):
					marks++
				case strings.HasPrefix(f, "e:"):
					entries++
				}
			}
			return marks, entries
		}
		c := s.Pool.Get()
		defer c.Close()
		for _, token := range []string{"gone1", "gone2"} {
			if _, err := scriptLockAbandon.Do(c, key, token, 100, s.NS+"wake:"); err != nil {
				t.Fatal(err)
			}
		}
		if m, _ := marks(); m != 2 {
			t.Fatalf("%d abandon marks, want 2", m)
		}
		s.Advance(300 * time.Millisecond)
		rawWaiter(s, t, "pile", "w2", "x", time.Hour)
		if m, e := marks(); m != 0 || e != 2 {
			t.Errorf("after a join past the marks' deadline: %d marks, %d entries; want 0 and 2", m, e)
		}
	})
}

// Abandon marks that pile up while a stream of abandons keeps the latest
// mark's deadline ahead are deleted together by the first flagged write
// after all have lapsed: more fields than Lua's unpack takes at once
// (about 8,000), so they go a thousand a command, and the lock is still
// A waiter that joins a flagged lock whose queue emptied (its last entry
// abandoned, the mark keeping the lock flagged) is the queue's head: rank
// 0, with the holder's remaining lease, after which it takes over; the
// hash is kept as long as its entry.
func TestAcquire_JoinAfterTheQueueEmptiedIsHead(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		if _, err := engine(s).TryLock(ctx, "again", LockOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		key := s.NS + "lock:{again}"
		c := s.Pool.Get()
		defer c.Close()
		join := func(token string, entry time.Duration) []int64 {
			t.Helper()
			v, err := redis.Int64s(scriptLockAcquire.Do(c, key, token, time.Minute.Milliseconds(), 1, entry.Milliseconds(), "x"))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if got := join("w1", 90*time.Second); len(got) != 4 || got[0] != 0 || got[2] != 0 {
			t.Fatalf("the first waiter: %v, want queued at the head", got)
		}
		if _, err := scriptLockAbandon.Do(c, key, "w1", 2*time.Minute.Milliseconds(), s.NS+"wake:"); err != nil {
			t.Fatal(err)
		}
		got := join("w2", time.Hour)
		if len(got) != 4 || got[0] != 0 || got[1] <= 0 || got[2] != 0 {
			t.Errorf("the only waiter behind the holder: %v, want {0, the lease's remaining ms, rank 0, arrival}", got)
		}
		if ttl := s.PTTL(t, key); ttl < 59*time.Minute {
			t.Errorf("the lock's PTTL %v after a join of an hour's entry: the hash must outlive every entry", ttl)
		}
		if q := lockQueue(s, t, "again"); len(q) != 1 || q[0].token != "w2" {
			t.Errorf("queue %v, want w2 alone", q)
		}
	})
}

// queued for and released.
func TestAcquire_ManyLapsedMarksCleared(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		l, err := engine(s).TryLock(ctx, "heap", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		key := s.NS + "lock:{heap}"
		c := s.Pool.Get()
		defer c.Close()
		const marks = 8500
		if _, err := scriptLockAbandon.Do(c, key, "gone0", 100, s.NS+"wake:"); err != nil { // loads it
			t.Fatal(err)
		}
		for i := 1; i < marks; i++ { // one pipeline
			if err := c.Send("EVALSHA", scriptLockAbandon.Hash(), 1, key, fmt.Sprintf("gone%d", i), 100, s.NS+"wake:"); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < marks; i++ {
			if _, err := c.Receive(); err != nil {
				t.Fatal(err)
			}
		}
		s.Advance(300 * time.Millisecond)
		rawWaiter(s, t, "heap", "w", "x", time.Hour)
		fields, err := redis.Strings(s.Do("HKEYS", key))
		if err != nil {
			t.Fatal(err)
		}
		if len(fields) > 10 {
			t.Errorf("%d fields after a join past %d lapsed marks, want the holding, the queue and one entry", len(fields), marks)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	})
}

// A wait that ended leaves its token's mark for the call timeout: a late
// acquire of that token, still on its way when the abandon landed, takes
// nothing though the lock is free by then (here one sent by hand half a
// call timeout after the abandon).
func TestAcquire_AbandonMarkLastsTheCallTimeout(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		const callTimeout = 2 * time.Second
		e := engine(s, WithCallTimeout(callTimeout))
		h, err := engine(s).TryLock(ctx, "late", LockOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		if _, err := e.Lock(cctx, "late", LockOptions{TTL: time.Hour, Wait: time.Minute}); !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled wait: %v, want context.Canceled", err)
		}
		lock := object{kind: kindLock, name: "late", ns: s.NS}
		fields, err := redis.Strings(s.Do("HKEYS", lock.key("")))
		var marks []string
		for _, f := range fields {
			if strings.HasPrefix(f, "x:") {
				marks = append(marks, f)
			}
		}
		if err != nil || len(marks) != 1 {
			t.Fatalf("abandon marks %q (%v), want one", marks, err)
		}
		token := strings.TrimPrefix(marks[0], "x:")
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s.Advance(callTimeout / 2)
		k := func(suffix string) any { return lock.key(suffix) }
		c := s.Pool.Get()
		defer c.Close()
		v, err := redis.Int64s(scriptLockAcquire.Do(c, k(""),
			token, time.Hour.Milliseconds(), 1, time.Second.Milliseconds(), "late-engine"))
		if err != nil || len(v) != 1 || v[0] != 2 {
			t.Fatalf("the abandoned token's late acquire, half a call timeout after the abandon: %v, %v; want [2] (abandoned)", v, err)
		}
		if info := lockInfo(t, e, "late"); info.Held {
			t.Fatalf("the lock is held (fence %d) by a call whose caller was told it failed", info.Fence)
		}
	})
}
