package atomicredis

// Read-write locks (docs/objects.md, "Read-write locks"): readers share,
// a writer holds alone, waiters are served in arrival order with a waiting
// writer ahead of every reader that came after it, and every hold has its
// own lease.

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// rwKey is a key of the test's read-write lock name.
func rwKey(s *testserver.Server, name, suffix string) string {
	return s.NS + "rw:{" + name + "}" + suffix
}

func TestRW_ReadersShareWriterExcludes(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		o := LockOptions{TTL: 5 * time.Second}
		r1, err := e.TryRLock(ctx, "doc", o)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := e.RLock(ctx, "doc", o)
		if err != nil {
			t.Fatal(err)
		}
		first := r1.Fence()
		for i, r := range []*Lock{r1, r2} {
			if !strings.HasPrefix(r.Token(), "r-") || len(r.Token()) != 38 || r.Fence() != first+int64(i) {
				t.Errorf("reader %d: token %q fence %d, want r-<uuid> and fence %d", i+1, r.Token(), r.Fence(), first+int64(i))
			}
		}
		if _, err := e.TryWLock(ctx, "doc", o); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryWLock with two readers: %v, want ErrNotAcquired", err)
		}
		// A plain lock of the same name is another object.
		l, err := e.TryLock(ctx, "doc", o)
		if err != nil {
			t.Fatalf("TryLock \"doc\" beside a read-write lock \"doc\": %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := s.Keys(t), []string{s.NS + "lock:{doc}", rwKey(s, "doc", ""), rwKey(s, "doc", ":fence")}; !slices.Equal(got, want) {
			t.Errorf("keys %q, want %q", got, want)
		}
		if err := r1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryWLock(ctx, "doc", o); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryWLock with one reader left: %v, want ErrNotAcquired", err)
		}
		if held, err := r2.Held(ctx); !held || err != nil {
			t.Errorf("the other reader after one left: Held = %v, %v", held, err)
		}
		if err := r2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := s.Keys(t), []string{s.NS + "lock:{doc}", rwKey(s, "doc", ":fence")}; !slices.Equal(got, want) {
			t.Errorf("keys after the readers left %q, want %q", got, want)
		}

		w, err := e.TryWLock(ctx, "doc", o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(w.Token(), "w-") || w.Fence() != first+2 {
			t.Errorf("writer: token %q fence %d, want w-<uuid> and %d (one counter for readers and writers)", w.Token(), w.Fence(), first+2)
		}
		if _, err := e.TryRLock(ctx, "doc", o); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryRLock with a writer: %v, want ErrNotAcquired", err)
		}
		if _, err := e.TryWLock(ctx, "doc", o); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryWLock with a writer: %v, want ErrNotAcquired", err)
		}
		if ttl, err := w.TTL(ctx); err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
			t.Errorf("writer TTL = %v, %v; want (4s, 5s]", ttl, err)
		}
		if err := w.Extend(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if ttl, err := w.TTL(ctx); err != nil || ttl <= 19*time.Second || ttl > 20*time.Second {
			t.Errorf("writer TTL after Extend(20s) = %v, %v", ttl, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Unlock(ctx); !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), `read-write lock "doc"`) {
			t.Errorf("second Unlock: %v, want ErrNotHeld naming the read-write lock", err)
		}
		if err := w.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Extend after Unlock: %v, want ErrNotHeld", err)
		}
		if held, err := w.Held(ctx); held || err != nil {
			t.Errorf("Held after Unlock = %v, %v", held, err)
		}
		if _, err := w.TTL(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("TTL after Unlock: %v, want ErrNotHeld", err)
		}
		r3, err := e.TryRLock(ctx, "doc", o)
		if err != nil || r3.Fence() != first+3 {
			t.Fatalf("a reader after the writer: fence %d, %v; want %d", r3.Fence(), err, first+3)
		}
	})
}

// Every hold has its own lease: one reader's running out leaves the others
// held, and Extend moves only the caller's.
func TestRW_PerHoldLease(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		short, err := e.TryRLock(ctx, "lease", LockOptions{TTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		long, err := e.TryRLock(ctx, "lease", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		s.Advance(300 * time.Millisecond)
		if held, err := short.Held(ctx); held || err != nil {
			t.Errorf("the short reader past its lease: Held = %v, %v", held, err)
		}
		for name, err := range map[string]error{"Unlock": short.Unlock(ctx), "Extend": short.Extend(ctx, time.Minute)} {
			if !errors.Is(err, ErrNotHeld) {
				t.Errorf("%s of a lapsed reader: %v, want ErrNotHeld", name, err)
			}
		}
		if ttl, err := long.TTL(ctx); err != nil || ttl < 50*time.Second {
			t.Errorf("the long reader: TTL %v, %v; want its own minute", ttl, err)
		}
		if _, err := e.TryWLock(ctx, "lease", LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryWLock with the long reader holding: %v", err)
		}
		if err := long.Extend(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		s.Advance(200 * time.Millisecond)
		w, err := e.TryWLock(ctx, "lease", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatalf("TryWLock once every reader's lease ran out: %v", err)
		}

		// Extensions are numbered per hold: one older than one applied
		// changes nothing (as lock_extend).
		c := s.Pool.Get()
		defer c.Close()
		ext := func(ms, seq int64) int64 {
			n, err := redis.Int64(scriptRWExtend.Do(c, rwKey(s, "lease", ""), rwKey(s, "lease", ":holds"), w.Token(), ms, seq))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := ext(time.Hour.Milliseconds(), 5); n != 1 {
			t.Errorf("extension 5: %d, want 1", n)
		}
		if n := ext(100, 4); n != 2 {
			t.Errorf("extension 4 after 5: %d, want 2 (stale)", n)
		}
		if ttl, err := w.TTL(ctx); err != nil || ttl < 50*time.Minute {
			t.Errorf("TTL after a stale extension %v, %v: want the hour", ttl, err)
		}
		if n := ext(100, 6); n != 1 {
			t.Errorf("extension 6: %d, want 1", n)
		}
		if n, _ := redis.Int64(scriptRWExtend.Do(c, rwKey(s, "lease", ""), rwKey(s, "lease", ":holds"), "r-nobody", 100, 9)); n != 0 {
			t.Errorf("extension of a token that holds nothing: %d, want 0", n)
		}
	})
}

// A watchdog extends its own hold only: a dead reader beside a watched one
// lapses (Redisson PR #7098 extended other instances' dead read holds).
func TestRW_WatchdogPerHold(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		// Leases of 1 s, watched for 3: at a load of 10 here, 300 ms ones
		// were lost now and then.
		watched, err := e.TryRLock(ctx, "wd", LockOptions{TTL: time.Second, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		dead, err := engine(s).TryRLock(ctx, "wd", LockOptions{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if held, err := watched.Held(ctx); !held || err != nil {
			t.Errorf("the watched reader after 3s of 1s leases: Held = %v, %v", held, err)
		}
		if held, err := dead.Held(ctx); held || err != nil {
			t.Errorf("the dead reader after 3s: Held = %v, %v; want lapsed", held, err)
		}
		select {
		case <-watched.Lost():
			t.Error("Lost closed while the watchdog extended")
		default:
		}
		if err := watched.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		waitWatchdogs(t, 0)
		if _, err := e.TryWLock(ctx, "wd", LockOptions{}); err != nil {
			t.Errorf("TryWLock after the readers: %v", err)
		}
	})
}

// Many goroutines, mixed readers and writers: never a writer with anyone
// else inside, and readers really are inside together.
func TestRW_Exclusion(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		base, err := engine(s).TryWLock(ctx, "x", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := base.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		workers, cycles := 16, 100
		if testing.Short() {
			cycles = 30
		}
		var readers, writers, peak, violations, acquired, writes atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < workers; g++ {
			e := engine(s)
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < cycles; i++ {
					write := (g+i)%5 == 0
					take := e.RLock
					if write {
						take = e.WLock
					}
					l, err := take(ctx, "x", LockOptions{TTL: 10 * time.Second, Wait: time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					acquired.Add(1)
					if write {
						writes.Add(1)
						if writers.Add(1) != 1 || readers.Load() != 0 {
							violations.Add(1)
						}
						time.Sleep(50 * time.Microsecond)
						writers.Add(-1)
					} else {
						n := readers.Add(1)
						if writers.Load() != 0 {
							violations.Add(1)
						}
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						time.Sleep(200 * time.Microsecond)
						readers.Add(-1)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		t.Logf("%s: %d acquisitions (%d writes), %d violations, peak %d readers inside at once", s.Name, acquired.Load(), writes.Load(), violations.Load(), peak.Load())
		if violations.Load() != 0 {
			t.Errorf("%d times a writer was inside with someone else", violations.Load())
		}
		if peak.Load() < 2 {
			t.Errorf("peak %d readers inside at once: readers did not share", peak.Load())
		}
		if fence, _ := redis.Int64(s.Do("GET", rwKey(s, "x", ":fence"))); fence != base.Fence()+acquired.Load() || acquired.Load() != int64(workers*cycles) {
			t.Errorf("fence %d after %d of %d acquisitions", fence, acquired.Load(), workers*cycles)
		}
	})
}

// A writer that queues while readers stream in gets in before every reader
// that arrived after it: the order the server granted, by fence, says so.
func TestRW_WriterNotStarved(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, cancel := context.WithCancel(ctxT(t))
		e := engine(s) // the default queue entry: a reader handed the lock confirms within its rest (150 ms flaked under load)
		first, err := e.TryRLock(ctx, "st", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		type grant struct {
			fence int64
			after bool // the reader's call was made after the writer was seen queued
		}
		var mu sync.Mutex
		var grants []grant
		var writerQueued atomic.Bool
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					after := writerQueued.Load()
					r, err := e.RLock(ctx, "st", LockOptions{TTL: time.Minute, Wait: 30 * time.Second})
					if err != nil {
						if ctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					mu.Lock()
					grants = append(grants, grant{r.Fence(), after})
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
					if err := r.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		var once sync.Once
		finish := func() { once.Do(func() { close(stop); cancel(); wg.Wait() }) }
		t.Cleanup(finish)                 // a failed test stops the stream too
		time.Sleep(50 * time.Millisecond) // the stream flows
		wrote := make(chan int64, 1)
		start := time.Now()
		go func() {
			w, err := e.WLock(ctx, "st", LockOptions{TTL: time.Minute, Wait: 30 * time.Second})
			if err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				wrote <- 0
				return
			}
			time.Sleep(5 * time.Millisecond)
			w.Unlock(ctx)
			wrote <- w.Fence()
		}()
		for {
			head, _ := redis.Strings(s.Do("ZRANGE", rwKey(s, "st", ":queue"), 0, 0))
			if len(head) == 1 && strings.HasPrefix(head[0], "w-") {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Fatal("the writer never showed in the queue")
			}
			time.Sleep(100 * time.Microsecond)
		}
		writerQueued.Store(true)
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		var wFence int64
		select {
		case wFence = <-wrote:
		case <-time.After(10 * time.Second):
			t.Fatal("the writer starved: 10s under a stream of readers")
		}
		took := time.Since(start)
		time.Sleep(50 * time.Millisecond) // readers after the writer
		finish()
		var before, after, jumped int
		for _, g := range grants {
			switch {
			case g.after && g.fence < wFence:
				jumped++
			case g.after:
				after++
			case g.fence < wFence:
				before++
			}
		}
		t.Logf("%s: the writer (fence %d) got in %v after queueing; %d reader grants before it, %d arrivals after it granted after it, %d jumped it", s.Name, wFence, took, before, after, jumped)
		if jumped != 0 {
			t.Errorf("%d readers that arrived after the queued writer were granted before it", jumped)
		}
		if before == 0 || after == 0 {
			t.Errorf("%d grants before the writer, %d after: the stream did not run", before, after)
		}
	})
}

// Releasing a writer lets in the whole run of readers at the head of the
// queue at once, up to the next writer; readers behind that writer wait for
// it, though readers hold; the last reader out lets the writer in.
func TestRW_HandoffRun(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		e.queueTTL = 3 * time.Second // extensions every second: a handoff must not wait for them
		w1, err := e.TryWLock(ctx, "run", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		modes := []string{"r", "r", "r", "w", "r"}
		got := make([]chan *Lock, len(modes))
		release := make([]chan struct{}, len(modes))
		done := make([]chan struct{}, len(modes))
		for i, m := range modes {
			got[i], release[i], done[i] = make(chan *Lock, 1), make(chan struct{}), make(chan struct{})
			take := e.RLock
			if m == "w" {
				take = e.WLock
			}
			go func(i int) {
				defer close(done[i])
				l, err := take(ctx, "run", LockOptions{TTL: time.Minute, Wait: 30 * time.Second})
				got[i] <- l
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				<-release[i]
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}(i)
			waitQueued(s, t, rwKey(s, "run", ":queue"), i+1)
		}
		holds := make([]*Lock, len(modes))
		// admitted waits for the waiters in want to be let in, promptly (well
		// within an extension period), and checks that nobody else was.
		admitted := func(step string, want ...int) {
			t.Helper()
			for _, i := range want {
				select {
				case holds[i] = <-got[i]:
				case <-time.After(500 * time.Millisecond):
					t.Fatalf("%s: waiter %d (%s) not let in within 500ms", step, i, modes[i])
				}
			}
			time.Sleep(20 * time.Millisecond)
			for i := range modes {
				if len(got[i]) == 1 {
					t.Fatalf("%s: waiter %d (%s) was let in too", step, i, modes[i])
				}
			}
		}
		leave := func(i int) {
			close(release[i])
			<-done[i]
		}
		if err := w1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The release script itself admitted the run: the server shows its
		// three holds before any waiter could have extended.
		if n, _ := redis.Int(s.Do("ZCARD", rwKey(s, "run", ""))); n != 3 {
			t.Errorf("holds right after the writer's Unlock: %d, want the 3 readers at the head", n)
		}
		admitted("the writer left", 0, 1, 2)
		leave(0)
		leave(1)
		admitted("two of the three readers left")
		leave(2)
		admitted("the last reader left", 3)
		leave(3)
		admitted("the second writer left", 4)
		leave(4)
		var fences []int64
		for _, l := range holds {
			fences = append(fences, l.Fence())
		}
		f := w1.Fence()
		if want := []int64{f + 1, f + 2, f + 3, f + 4, f + 5}; !sameInt64s(fences, want) {
			t.Errorf("fences %v, want %v: the server's grant order is the queue's", fences, want)
		}
	})
}

func sameInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A reader that died holding (its process gone: watchdog stopped,
// connections closed, no Unlock) keeps a writer out only until its own
// lease ends; the other readers' leaving does not wait for it, nor does it
// wait for them.
func TestRW_DeadReader(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), waitEngine(s)
		const lease = 400 * time.Millisecond
		deadPool := newPool(t, s.Addr)
		dead := New(deadPool, WithNamespace(s.NS))
		start := time.Now()
		if _, err := dead.TryRLock(ctx, "dr", LockOptions{TTL: lease, Watchdog: true}); err != nil {
			t.Fatal(err)
		}
		deadPool.Close() // the process dies: nothing extends the hold, nothing releases it
		dead.Close(ctx)  // stops the watchdog; its release fails on the closed pool
		live, err := e.TryRLock(ctx, "dr", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Duration, 1)
		go func() {
			w, err := e.WLock(ctx, "dr", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
			if err != nil {
				t.Error(err)
				got <- 0
				return
			}
			got <- time.Since(start)
			w.Unlock(ctx)
		}()
		waitQueued(s, t, rwKey(s, "dr", ":queue"), 1)
		if err := live.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		took := <-got
		t.Logf("%s: the writer got in %v after the dead reader's %v lease began (queue TTL %v)", s.Name, took, lease, testQueueTTL)
		if took < lease-20*time.Millisecond {
			t.Errorf("the writer got in after %v, inside the dead reader's %v lease", took, lease)
		}
		if took > lease+3*testQueueTTL+time.Second {
			t.Errorf("the writer needed %v behind a dead reader's %v lease", took, lease)
		}
	})
}

// rwSection is one holder's time inside, a reader's or a writer's.
type rwSection struct {
	section
	writer bool
}

// rwViolations counts the starts of valid sections that found a valid
// writer inside, or (for a writer) anyone; and the peak of valid readers
// inside at once.
func rwViolations(secs []rwSection) (violations, peakReaders int) {
	type ev struct {
		t      time.Time
		delta  int
		writer bool
	}
	var evs []ev
	for _, s := range secs {
		if s.valid {
			evs = append(evs, ev{s.start, 1, s.writer}, ev{s.end, -1, s.writer})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t.Equal(evs[j].t) {
			return evs[i].delta < evs[j].delta // an end before a start at the same instant
		}
		return evs[i].t.Before(evs[j].t)
	})
	readers, writers := 0, 0
	for _, e := range evs {
		if e.delta > 0 && (writers > 0 || e.writer && readers > 0) {
			violations++
		}
		if e.writer {
			writers += e.delta
		} else {
			readers += e.delta
		}
		peakReaders = max(peakReaders, readers)
	}
	return violations, peakReaders
}

// rwResource is what a read-write lock guards, using the holders' fences
// as docs/objects.md says: a reader is admitted if its fence is above the last
// writer's; a writer if its fence is above every fence seen, or equal with
// the same token.
type rwResource struct {
	mu                  sync.Mutex
	maxSeen, lastWriter int64
	maxToken            string
}

func (r *rwResource) enter(l *Lock, writer bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := l.Fence()
	if writer {
		if f < r.maxSeen || f == r.maxSeen && l.Token() != r.maxToken {
			return false
		}
		r.lastWriter = f
	} else if f <= r.lastWriter {
		return false
	}
	if f > r.maxSeen {
		r.maxSeen, r.maxToken = f, l.Token()
	}
	return true
}

// stillValid: no writer entered after the reader; nobody after the writer.
func (r *rwResource) stillValid(l *Lock, writer bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if writer {
		return r.maxSeen == l.Fence()
	}
	return r.lastWriter < l.Fence()
}

func TestRW_CheckersCount(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	secs := []rwSection{
		{section{at(0), at(10), true}, false}, {section{at(5), at(15), true}, false}, // readers share
		{section{at(15), at(20), true}, true},                                        // a writer after them
		{section{at(18), at(19), false}, false},                                      // invalid: not counted
		{section{at(19), at(25), true}, false},                                       // a reader inside the writer
		{section{at(30), at(40), true}, true}, {section{at(35), at(45), true}, true}, // two writers
	}
	if v, peak := rwViolations(secs); v != 2 || peak != 2 {
		t.Errorf("rwViolations = %d, peak %d; want 2, 2", v, peak)
	}
	var r rwResource
	l := func(f int64, tok string) *Lock { return &Lock{holding{fence: f, token: tok}} }
	r1, r2, w3, r4, w2 := l(1, "r-a"), l(2, "r-b"), l(3, "w-c"), l(4, "r-d"), l(2, "w-e")
	if !r.enter(r1, false) || !r.enter(r2, false) || !r.enter(w3, true) || !r.enter(w3, true) {
		t.Error("readers, then a writer above them (twice, same token): refused")
	}
	if r.stillValid(r2, false) || !r.stillValid(w3, true) {
		t.Error("a reader the writer came after is still valid, or the writer is not")
	}
	if r.enter(r2, false) || r.enter(w2, true) || r.enter(l(3, "w-other"), true) {
		t.Error("a reader under the writer's fence, a lower writer or an equal one with another token: admitted")
	}
	if !r.enter(r4, false) || r.stillValid(w3, true) {
		t.Error("a reader above the writer: refused, or the writer still valid after it")
	}
}

// Under a proxy that delays a fifth of all chunks by up to 20 ms and cuts
// connections at random, with 40 ms leases and 2% of holders outliving
// theirs: no valid writer is ever inside with anyone, valid readers do
// share, and no holder the fences caught had a valid release.
func TestRW_UnderFaults(t *testing.T) {
	testserver.Apart(t) // slow, and reads nothing the process or server shares
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		target := checkerScale(s)
		const workers, names, engines = 32, 8, 4
		es, proxy := faultyEngines(t, s, engines)
		resources := make([]rwResource, names)
		sections := make([][]rwSection, names)
		var secMu sync.Mutex
		var f mutexFigures
		var writes atomic.Int64
		f.underChaos(proxy, workers, target, f.bitten, func(w int) {
			e, ctx := es[w%engines], context.Background()
			n := rand.IntN(names)
			writer := rand.IntN(4) == 0
			take := e.RLock
			if writer {
				take = e.WLock
			}
			l, err := take(ctx, "m"+strconv.Itoa(n), LockOptions{TTL: 40 * time.Millisecond, Wait: 10 * time.Second})
			if err != nil {
				atomic.AddInt64(&f.errs, 1)
				return
			}
			atomic.AddInt64(&f.acquisitions, 1)
			if writer {
				writes.Add(1)
			}
			start := time.Now()
			res := &resources[n]
			entered := res.enter(l, writer)
			if !entered {
				atomic.AddInt64(&f.refusedAtEntry, 1)
			}
			switch r := rand.IntN(100); {
			case r < 2: // outlive the lease
				time.Sleep(50 * time.Millisecond)
			case r < 60:
				time.Sleep(rand.N(2 * time.Millisecond))
			}
			fenced := !entered || !res.stillValid(l, writer)
			end := time.Now()
			err = l.Unlock(ctx)
			valid := f.released(err, fenced)
			secMu.Lock()
			sections[n] = append(sections[n], rwSection{section{start, end, valid}, writer})
			secMu.Unlock()
		})
		peak := 0
		for _, secs := range sections {
			v, p := rwViolations(secs)
			f.overlaps += int64(v)
			peak = max(peak, p)
		}
		t.Logf("%s: %d acquisitions (%d writes), %d violations among valid holders, peak %d valid readers at once, %d fence violations, %d lost leases, %d fenced out (%d refused at entry), %d errors, %d connections cut",
			s.Name, f.acquisitions, writes.Load(), f.overlaps, peak, f.fenceViolations, f.lost, f.fencedOut, f.refusedAtEntry, f.errs, proxy.cuts.Load())
		if f.overlaps != 0 || f.fenceViolations != 0 {
			t.Errorf("exclusion broken: %d violations, %d fence violations", f.overlaps, f.fenceViolations)
		}
		if peak < 2 {
			t.Errorf("peak %d valid readers at once: readers did not share, the check proves little", peak)
		}
		f.checkBite(t, target)
	})
}

// Acquisitions cut off mid-call, and waits cancelled as the handoff
// reaches them, leave nothing behind: no hold, no queue entry, no wake-up.
func TestRW_CutOff(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		e := waitEngine(s)
		for _, take := range []func(context.Context, string, LockOptions) (*Lock, error){e.TryRLock, e.TryWLock, e.RLock, e.WLock} {
			cutOff(t, func(ctx context.Context) (func(context.Context) error, error) {
				l, err := take(ctx, "cut", LockOptions{TTL: time.Minute})
				if err != nil {
					return nil, err
				}
				return l.Unlock, nil
			})
		}
		if err := e.Close(context.Background()); err != nil { // wait for the abandons
			t.Fatal(err)
		}
		ctx, handed := ctxT(t), 0
		for i := 0; i < 30; i++ {
			e := waitEngine(s)
			holdW := i%2 == 0 // a writer holds and a reader waits, or the reverse
			hold, wait := e.TryWLock, e.RLock
			if !holdW {
				hold, wait = e.TryRLock, e.WLock
			}
			holder, err := hold(ctx, "cut", LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			got := make(chan *Lock, 1)
			go func() {
				l, _ := wait(wctx, "cut", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
				got <- l
			}()
			waitQueued(s, t, rwKey(s, "cut", ":queue"), 1)
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
		t.Logf("%s: 800 cut-off acquisitions, then 30 cancels racing a handoff (%d waiters got the lock first)", s.Name, handed)
		for _, key := range s.Keys(t) {
			if key != rwKey(s, "cut", ":fence") && !strings.HasPrefix(key, rwKey(s, "cut", ":void:")) {
				t.Errorf("left behind: %s", key)
			}
		}
	})
}

// A writer that gives up waiting lets in the readers queued behind it at
// once (its abandon script admits them), not at their next extension.
func TestRW_AbandonedWriterLetsReadersIn(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		e.queueTTL = 3 * time.Second // extensions every second
		r0, err := e.TryRLock(ctx, "aw", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wErr := make(chan error, 1)
		go func() { _, err := e.WLock(wctx, "aw", LockOptions{Wait: time.Minute}); wErr <- err }()
		waitQueued(s, t, rwKey(s, "aw", ":queue"), 1)
		got := make(chan time.Time, 1)
		go func() {
			r, err := e.RLock(ctx, "aw", LockOptions{TTL: time.Minute, Wait: 30 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- time.Now()
			r.Unlock(ctx)
		}()
		waitQueued(s, t, rwKey(s, "aw", ":queue"), 2)
		time.Sleep(50 * time.Millisecond) // past the reader's first call
		start := time.Now()
		cancel()
		if err := <-wErr; !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled writer: %v", err)
		}
		took := (<-got).Sub(start)
		t.Logf("%s: the reader behind a cancelled writer got in %v after the cancel", s.Name, took)
		if took > 300*time.Millisecond {
			t.Errorf("the reader behind a cancelled writer waited %v: the abandon did not let it in", took)
		}
		if err := r0.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TryRLock and TryWLock never jump a queue of live waiters: a reader not
// even when readers hold and a writer waits, nor while the holds vanished
// before the head has taken over.
func TestRW_NoQueueJumping(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), waitEngine(s)
		if _, err := e.TryRLock(ctx, "nj", LockOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lock, 1)
		go func() {
			w, err := e.WLock(ctx, "nj", LockOptions{TTL: time.Minute, Wait: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		waitQueued(s, t, rwKey(s, "nj", ":queue"), 1)
		if _, err := e.TryRLock(ctx, "nj", LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("TryRLock with readers holding and a writer queued: %v, want ErrNotAcquired", err)
		}
		s.Must(t, "DEL", rwKey(s, "nj", ""), rwKey(s, "nj", ":holds")) // the reader's hold is gone
		// The first try lets the queued writer in, and is refused; so is the
		// next, while the writer holds.
		for _, try := range []func(context.Context, string, LockOptions) (*Lock, error){e.TryWLock, e.TryRLock} {
			if _, err := try(ctx, "nj", LockOptions{}); !errors.Is(err, ErrNotAcquired) {
				t.Errorf("a try on a free lock with a writer queued: %v, want ErrNotAcquired", err)
			}
		}
		if w := <-got; w == nil || w.Unlock(ctx) != nil {
			t.Errorf("the queued writer did not hold")
		}
	})
}

// After SCRIPT FLUSH every read-write script recovers through EVAL.
func TestRW_ScriptFlush(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		r, err := e.TryRLock(ctx, "sf", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, op := range []func() error{
			func() error { return r.Extend(ctx, time.Minute) },
			func() error { _, err := r.TTL(ctx); return err },
			func() error { return r.Unlock(ctx) },
			func() error { w, err := e.WLock(ctx, "sf", LockOptions{}); r = w; return err },
			func() error { return r.Unlock(ctx) },
		} {
			s.Must(t, "SCRIPT", "FLUSH")
			if err := op(); err != nil {
				t.Fatalf("op %d after SCRIPT FLUSH: %v", i, err)
			}
		}
	})
}

// A hold whose holds hash was replaced by another type: Unlock and Extend
// fail with WRONGTYPE and change nothing.
func TestRW_WrongTypeHolds(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		r, err := e.TryRLock(ctx, "wt", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		s.Must(t, "RPUSH", rwKey(s, "wt", ":holds"), "x")
		before := s.Snapshot(t)
		for name, err := range map[string]error{"Unlock": r.Unlock(ctx), "Extend": r.Extend(ctx, time.Hour)} {
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("%s with a list for the holds: %v, want WRONGTYPE", name, err)
			}
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("changed keys: %v -> %v", before, after)
		}
	})
}

// A fence key holding text is refused before anything is written.
func TestRW_CorruptFence(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx, e := ctxT(t), engine(s)
		s.Must(t, "SET", rwKey(s, "g", ":fence"), "abc")
		before := s.Snapshot(t)
		for name, try := range map[string]func(context.Context, string, LockOptions) (*Lock, error){"TryRLock": e.TryRLock, "WLock": e.WLock} {
			if _, err := try(ctx, "g", LockOptions{}); err == nil || !strings.Contains(err.Error(), "does not hold a counter") {
				t.Errorf("%s with a corrupt fence: %v", name, err)
			}
		}
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("changed keys: %v -> %v", before, after)
		}
	})
}

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
func TestRW_OwnerStored(t *testing.T) {
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
func TestRW_OwnerLeaves(t *testing.T) {
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
func TestRW_OwnerTooLong(t *testing.T) {
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

// A read hold's extension leaves no key without an expiry: the holds hash
// its extension number makes (a reader without an Owner has none before)
// expires with the leases, by Extend and by the watchdog's batch alike.
func TestRW_ExtendedHoldsExpire(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		holds := object{kind: kindRW, name: "hx", ns: s.NS}.key(":holds")
		r, err := e.TryRLock(ctx, "hx", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Extend(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if d := s.PTTL(t, holds); d <= 0 {
			t.Errorf("after Extend the holds hash expires in %v; want with the lease", d)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := e.TryRLock(ctx, "hx", LockOptions{TTL: 600 * time.Millisecond, Watchdog: true})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return s.PTTL(t, holds) != -2*time.Millisecond }) // the watchdog's first batch
		if d := s.PTTL(t, holds); d <= 0 {
			t.Errorf("after the watchdog's renewal the holds hash expires in %v; want with the lease", d)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
