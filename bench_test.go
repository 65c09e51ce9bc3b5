package atomicredis

// Benchmarks: each operation as one script against the book's WATCH/MULTI
// code (book_test.go), and against the physical limit of plain round trips.
// Run: go test -run '^$' -bench .

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/gomodule/redigo/redis"
)

// benchSetup gives a benchmark a pool on the chosen server and a fresh
// namespace, whose keys it deletes afterwards.
func benchSetup(b testing.TB) (*countingPool, string) {
	b.Helper()
	if benchAddr == "" {
		b.Fatal("no bench server (TestMain did not run with -bench or -market)")
	}
	p := &countingPool{Pool: bench.Limit(newPool(b, benchAddr))}
	p.MaxIdle = 128
	ns := testNamespace()
	b.Cleanup(func() {
		c := p.Get()
		defer c.Close()
		keys, _ := redis.Strings(c.Do("KEYS", "*"+ns+"*"))
		for i := 0; i < len(keys); i += 1000 {
			args := redis.Args{}.AddFlat(keys[i:min(i+1000, len(keys))])
			c.Do("DEL", args...)
		}
	})
	return p, ns
}

// countingPool counts the connections taken: one per script call, so the
// engine's own retries can be counted from outside.
type countingPool struct {
	*redis.Pool
	gets atomic.Int64
}

func (p *countingPool) GetContext(ctx context.Context) (redis.Conn, error) {
	p.gets.Add(1)
	return p.Pool.GetContext(ctx)
}

// BenchmarkLock: one client, uncontended acquire + release: the script
// pair, the book's WATCH lock, and the physical limit, two plain round
// trips (SET NX PX, DEL).
func BenchmarkLock(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, opRounds())
	e, ctx := x.env.engine(), context.Background()
	cycle := func(e *Engine) func(int) error {
		return func(int) error {
			l, err := e.TryLock(ctx, "bench", LockOptions{})
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}
	}
	x.Add("lua", func(r *bench.Round) error { return measureAllocs(r, cycle(e)) })
	// The same with an observer that does nothing: what events cost.
	observed := New(x.env.Pool, WithNamespace(x.env.ns+"obs:"), WithObserver(func(Event) {}))
	x.Add("lua+observer", func(r *bench.Round) error { return measureAllocs(r, cycle(observed)) })
	// v1's two scripts (testdata), on a key of their own: the server time
	// of a cycle before queues and fences that expire.
	v1Keys := []any{x.env.ns + "v1:{bench}", x.env.ns + "v1:{bench}:fence"}
	x.AddOps("v1", func(i int) error {
		c := x.env.Pool.Get()
		defer c.Close()
		token := "v1-" + strconv.Itoa(i)
		v, err := redis.Int64s(v1LockAcquire.Do(c, v1Keys[0], v1Keys[1], x.env.ns+"v1:{bench}:void:"+token, token, 10000))
		if err != nil || len(v) != 2 || v[0] != 1 {
			return fmt.Errorf("v1 acquire: %v, %v", v, err)
		}
		_, err = v1LockRelease.Do(c, v1Keys[0], token)
		return err
	})
	var retries atomic.Int64
	x.AddOps("watch", func(int) error {
		c := x.env.Pool.Get()
		defer c.Close()
		id, err := bookAcquireLockWithTimeout(c, x.env.ns+"lock:bench", time.Second, 10*time.Second, &retries)
		if err != nil || id == "" {
			return fmt.Errorf("acquire: %q, %v", id, err)
		}
		if ok, err := bookReleaseLock(c, x.env.ns+"lock:bench", id); !ok || err != nil {
			return fmt.Errorf("release: %v, %v", ok, err)
		}
		return nil
	})
	key := x.env.ns + "rt"
	x.AddOps("round-trip", func(int) error {
		c := x.env.Pool.Get()
		defer c.Close()
		if _, err := c.Do("SET", key, "x", "NX", "PX", 10000); err != nil {
			return err
		}
		_, err := c.Do("DEL", key)
		return err
	})
	x.Run()
}

// v1's lock scripts, the baseline of the uncontended cycle's server time.
var (
	v1LockAcquire = redis.NewScript(3, mustRead("testdata/v1_lock_acquire.lua"))
	v1LockRelease = redis.NewScript(1, mustRead("testdata/v1_lock_release.lua"))
)

// measureAllocs is Round.Measure that also records the allocations (Go's
// heap objects, in the whole process) per operation while op runs, not
// while the round reads the server's figures before and after (INFO
// commandstats: its allocations, spread over the 60 operations of a round
// at CI's -benchtime 300x, added 3 to 4 a cycle, more as the server had
// seen more scripts). On miniredis the server's own allocations are in the
// count: it reports none there.
func measureAllocs(r *bench.Round, op func(int) error) error {
	var m0, m1 runtime.MemStats
	_, ops, err := r.Timed(func(bu bench.Budget) (int, error) {
		runtime.ReadMemStats(&m0)
		defer runtime.ReadMemStats(&m1)
		return bu.Ops(op)
	})
	if err == nil && ops > 0 && !benchMini {
		r.Add("allocs/op", float64(m1.Mallocs-m0.Mallocs)/float64(ops))
	}
	return err
}

func init() {
	targets = append(targets,
		bench.Row("lock cycle: observer (doing nothing) time ÷ none", [2]string{"BenchmarkLock/lua+observer", "ns/op"}, [2]string{"BenchmarkLock/lua", "ns/op"}, "<=", 1.05),
		bench.Row("lock cycle: server µs ÷ v1's scripts", [2]string{"BenchmarkLock/lua", "srv-us/op"}, [2]string{"BenchmarkLock/v1", "srv-us/op"}, "<=", 1.0).Aim(),
		bench.Row("lock cycle: allocations", [2]string{"BenchmarkLock/lua", "allocs/op"}, [2]string{}, "<=", 20),
	)
}

// opRounds is the least number of rounds of an experiment whose rounds
// are cheap (operations back to back, not crowds): 5, or 3 on miniredis.
func opRounds() int {
	if benchMini {
		return 3
	}
	return 5
}

// BenchmarkLockContended: 16 goroutines on one lock name, like the book's
// Table 11.2; acquisitions/s, and tries per acquisition: the book's
// lock's SETNX tries; the engine's, 1 + the share of Lock calls that
// queued (its one try, then a wait for the handoff). Rounds of at least 600 acquisitions
// each, at least 7 of them: at -benchtime 300x a round of 60, a few
// milliseconds of 16 goroutines, moved by any hiccup of the machine by
// more than the ratio's distance from its goal.
func BenchmarkLockContended(b *testing.B) {
	const clients = 16
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, opRounds()+2)
	x.Budget = bench.RoundBudget(x.Rounds)
	if x.Budget.N > 0 && !benchMini {
		x.Budget.N = max(x.Budget.N, 600)
	}
	x.Show = []string{"ns/op", "acq/s", "tries/acq", "cpu-us/op"}
	ctx := context.Background()
	var queued atomic.Int64
	e := New(x.env.Pool, WithNamespace(x.env.ns), WithObserver(func(ev Event) {
		if ev.Type == EventQueued {
			queued.Add(1)
		}
	}))
	x.Add("lua", func(r *bench.Round) error {
		return contended(r, clients, func(int) error {
			l, err := e.Lock(ctx, "bench", LockOptions{Wait: time.Minute})
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}, &queued)
	})
	x.Add("watch", func(r *bench.Round) error {
		var retries atomic.Int64
		return contended(r, clients, func(int) error {
			c := x.env.Pool.Get()
			defer c.Close()
			id, err := bookAcquireLockWithTimeout(c, x.env.ns+"lock:bench", time.Minute, 10*time.Second, &retries)
			if err != nil {
				return err
			}
			_, err = bookReleaseLock(c, x.env.ns+"lock:bench", id)
			return err
		}, &retries)
	})
	x.Run()
}

// contended runs a round of clients goroutines doing op (bench.Parallel) and
// records acq/s and, when failed counts the failed tries, tries/acq.
func contended(r *bench.Round, clients int, op func(client int) error, failed *atomic.Int64) error {
	var f0 int64
	if failed != nil {
		f0 = failed.Load()
	}
	u, ops, err := r.Timed(func(bu bench.Budget) (int, error) { return bench.Parallel(bu, clients, op) })
	if err != nil {
		return err
	}
	r.Add("acq/s", float64(ops)/u.Wall.Seconds())
	if failed != nil {
		r.Add("tries/acq", float64(int64(ops)+failed.Load()-f0)/float64(ops))
	}
	return nil
}

// BenchmarkSemaphore: acquire + release of a limit-5 semaphore, by 1 and by
// 16 clients, against the book's fair semaphore with and without its
// lock; a refused try pauses 1 ms and tries again. One experiment per
// number of clients.
func BenchmarkSemaphore(b *testing.B) {
	const limit = 5
	for _, clients := range []int{1, 16} {
		x := newExperiment(b)
		x.Rounds = max(x.Rounds, opRounds())
		x.Show = []string{"ns/op", "acq/s", "tries/acq"}
		e, ctx := x.env.engine(), context.Background()
		suffix := fmt.Sprintf("/clients=%d", clients)
		variant := func(name string, try func() (release func() error, err error)) {
			x.Add(name+suffix, func(r *bench.Round) error {
				var refused atomic.Int64
				return contended(r, clients, func(int) error {
					release, err := try()
					if err != nil {
						return err
					}
					if release == nil {
						refused.Add(1)
						return bench.ErrRetry
					}
					return release()
				}, &refused)
			})
		}
		variant("lua", func() (func() error, error) {
			p, err := e.TryAcquireSemaphore(ctx, "bench", SemaphoreOptions{Limit: limit})
			if errors.Is(err, ErrNotAcquired) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return func() error { return p.Release(ctx) }, nil
		})
		key := x.env.ns + "semaphore:bench"
		book := func(acquire func(c redis.Conn) (string, error)) func() (func() error, error) {
			return func() (func() error, error) {
				c := x.env.Pool.Get()
				id, err := acquire(c)
				if err != nil || id == "" {
					c.Close()
					return nil, err
				}
				return func() error {
					defer c.Close()
					_, err := bookReleaseFairSemaphore(c, key, id)
					return err
				}, nil
			}
		}
		variant("book-fair", book(func(c redis.Conn) (string, error) {
			return bookAcquireFairSemaphore(c, key, limit, 10*time.Second, time.Now())
		}))
		var lockRetries atomic.Int64
		variant("book-fair-locked", book(func(c redis.Conn) (string, error) {
			return bookAcquireSemaphoreWithLock(c, key, limit, 10*time.Second, &lockRetries)
		}))
		x.Run()
	}
}

// suggestSets holds the populated member sets, one per size, shared by the
// Suggest benchmarks of one run.
var (
	suggestMu   sync.Mutex
	suggestSets = map[int]suggestSet{}
)

type suggestSet struct {
	ns      string
	members []string
}

// suggestFixture returns an engine namespace holding a set "bench" of n
// random lowercase names (the book's alphabet, so its version works too).
func suggestFixture(pool Pool, n int) (suggestSet, error) {
	suggestMu.Lock()
	defer suggestMu.Unlock()
	if s, ok := suggestSets[n]; ok {
		return s, nil
	}
	r := rand.New(rand.NewPCG(uint64(n), 7))
	seen := map[string]bool{}
	var members []string
	for len(members) < n {
		var sb strings.Builder
		for l := 6 + r.IntN(5); l > 0; l-- {
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
		if m := sb.String(); !seen[m] {
			seen[m] = true
			members = append(members, m)
		}
	}
	s := suggestSet{ns: testNamespace(), members: members}
	e := New(pool, WithNamespace(s.ns))
	for i := 0; i < n; i += 10000 {
		if err := e.AddMembers(context.Background(), "bench", members[i:min(i+10000, n)]...); err != nil {
			return s, err
		}
	}
	suggestSets[n] = s
	return s, nil
}

// BenchmarkSuggest: a 2-letter prefix, limit 10, over 1k and 100k members,
// alone and with a writer adding and removing members all the while: the
// script, the book's WATCH code, and a bare ZRANGEBYLEX (the floor), all
// in one experiment.
func BenchmarkSuggest(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, opRounds())
	x.Show = []string{"ns/op", "srv-us/op", "cpu-us/op"}
	pool := x.env.Pool
	variants := []struct {
		name string
		run  func(s suggestSet, prefix string, retries *atomic.Int64) ([]string, error)
	}{
		{"lua", func(s suggestSet, prefix string, _ *atomic.Int64) ([]string, error) {
			return New(pool, WithNamespace(s.ns)).Suggest(context.Background(), "bench", prefix, 10)
		}},
		{"watch", func(s suggestSet, prefix string, retries *atomic.Int64) ([]string, error) {
			c := pool.Get()
			defer c.Close()
			return bookAutocompleteOnPrefix(c, s.ns+"members:{bench}", prefix, retries)
		}},
		{"zrangebylex", func(s suggestSet, prefix string, _ *atomic.Int64) ([]string, error) {
			c := pool.Get()
			defer c.Close()
			return redis.Strings(c.Do("ZRANGEBYLEX", s.ns+"members:{bench}", "["+prefix, "("+successor(prefix), "LIMIT", 0, 10))
		}},
	}
	for _, v := range variants {
		for _, size := range []int{1000, 100000} {
			for _, writers := range []int{0, 1} {
				name := fmt.Sprintf("%s/%dk", v.name, size/1000)
				if writers > 0 {
					name += "-writers"
				}
				switch {
				case benchMini && size > 1000:
					x.Skip(name, "miniredis sorts a sorted set on every rank lookup (O(N)): 100k members run on redis-server")
					continue
				case benchMini && writers > 0 && v.name == "watch":
					// A WATCH that misses the writer's ZREMs lets the
					// book's code read ranks that moved: wrong answers.
					x.Skip(name, "miniredis's ZREM does not fire a WATCH (v2.40), so the book's code races the writer")
					continue
				}
				x.Add(name, func(r *bench.Round) error {
					s, err := suggestFixture(pool, size)
					if err != nil {
						return err
					}
					var retries atomic.Int64
					stop := startWriters(pool, s, writers)
					defer stop()
					rnd := rand.New(rand.NewPCG(3, uint64(r.Index)))
					_, ops, err := r.Timed(func(bu bench.Budget) (int, error) {
						start, i := time.Now(), 0
						for ; bu.More(i, start); i++ {
							m := s.members[rnd.IntN(len(s.members))]
							got, err := v.run(s, m[:2], &retries)
							if err != nil {
								return i, err
							}
							if len(got) == 0 {
								return i, fmt.Errorf("no match for the prefix of %q", m)
							}
						}
						return i, nil
					})
					if err != nil {
						return err
					}
					r.Add("retries/op", float64(retries.Load())/float64(ops))
					return nil
				})
			}
		}
	}
	x.Run()
}

// successor is the smallest string greater than every string starting
// with p (the end of ZRANGEBYLEX's range); p is lowercase here.
func successor(p string) string {
	return p[:len(p)-1] + string(p[len(p)-1]+1)
}

// startWriters adds and removes members of s in n goroutines until stopped;
// the set is as it was afterwards.
func startWriters(pool *redis.Pool, s suggestSet, n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := pool.Get()
			defer c.Close()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for !done.Load() {
				m := s.members[r.IntN(len(s.members))] + "~" // absent from the set
				c.Do("ZADD", s.ns+"members:{bench}", 0, m)
				c.Do("ZREM", s.ns+"members:{bench}", m)
			}
		}(w)
	}
	return func() { done.Store(true); wg.Wait() }
}

// The marketplace of chapter 4 and Table 6.3: listers put items on the
// market, buyers buy them.

type marketConfig struct{ listers, buyers int }

func (m marketConfig) String() string { return fmt.Sprintf("%dL%dB", m.listers, m.buyers) }

var marketConfigs = []marketConfig{{5, 5}, {1, 1}, {5, 1}}

type marketStats struct {
	listed, bought, retries int64
	wait                    time.Duration // summed over successful purchases
	elapsed                 time.Duration
}

// marketVariant lists and buys one item; retries counts WATCH failures or
// lock retries.
type marketVariant struct {
	name     string
	list     func(c redis.Conn, m *market, seller, itemID string, price int, retries *atomic.Int64) error
	purchase func(c redis.Conn, m *market, buyer, itemID, seller string, price int, retries *atomic.Int64) (bool, error)
}

type market struct{ ns, key string }

var (
	marketListScript     = redis.NewScript(2, mustRead("testdata/market_list.lua"))
	marketPurchaseScript = redis.NewScript(4, mustRead("testdata/market_purchase.lua"))
)

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err) // test data shipped with the package
	}
	return string(b)
}

var marketVariants = []marketVariant{
	{"watch",
		func(c redis.Conn, m *market, seller, itemID string, price int, retries *atomic.Int64) error {
			_, err := bookListItem(c, m.key, itemID, seller, price, retries)
			return err
		},
		func(c redis.Conn, m *market, buyer, itemID, seller string, price int, retries *atomic.Int64) (bool, error) {
			return bookPurchaseItem(c, m.key, buyer, itemID, seller, price, retries)
		}},
	{"lock",
		func(c redis.Conn, m *market, seller, itemID string, price int, retries *atomic.Int64) error {
			return bookListItemWithLock(c, m.key, m.key, itemID, seller, price, retries)
		},
		func(c redis.Conn, m *market, buyer, itemID, seller string, price int, retries *atomic.Int64) (bool, error) {
			return bookPurchaseItemWithLock(c, m.key, m.key, buyer, itemID, seller, retries)
		}},
	{"fine-lock",
		func(c redis.Conn, m *market, seller, itemID string, price int, retries *atomic.Int64) error {
			return bookListItemWithLock(c, m.key, m.key+itemID+"."+seller, itemID, seller, price, retries)
		},
		func(c redis.Conn, m *market, buyer, itemID, seller string, price int, retries *atomic.Int64) (bool, error) {
			return bookPurchaseItemWithLock(c, m.key, m.key+itemID+"."+seller, buyer, itemID, seller, retries)
		}},
	{"lua",
		func(c redis.Conn, m *market, seller, itemID string, price int, _ *atomic.Int64) error {
			_, err := marketListScript.Do(c, "inventory:"+seller, m.key, itemID, itemID+"."+seller, price)
			return err
		},
		func(c redis.Conn, m *market, buyer, itemID, seller string, price int, _ *atomic.Int64) (bool, error) {
			ok, err := redis.Bool(marketPurchaseScript.Do(c, "users:"+buyer, "users:"+seller, m.key, "inventory:"+buyer,
				itemID+"."+seller, itemID, price))
			return ok, err
		}},
}

// runMarket runs listers and buyers until the buyers have bought target
// items or maxTime has passed.
func runMarket(pool *redis.Pool, ns string, v marketVariant, cfg marketConfig, target int64, maxTime time.Duration) (marketStats, error) {
	m := &market{ns: ns, key: ns + "market:"}
	setup := pool.Get()
	for i := 0; i < cfg.buyers; i++ {
		setup.Do("HSET", "users:"+ns+"buyer"+strconv.Itoa(i), "funds", 1<<50)
	}
	setup.Close()
	var st marketStats
	var listed, bought, retries, waitNs atomic.Int64
	var stop atomic.Bool
	deadline := time.Now().Add(maxTime)
	var listersWG, buyersWG sync.WaitGroup
	errs := make(chan error, cfg.listers+cfg.buyers)
	start := time.Now()
	for l := 0; l < cfg.listers; l++ {
		listersWG.Add(1)
		go func(l int) {
			defer listersWG.Done()
			c := pool.Get()
			defer c.Close()
			seller := ns + "seller" + strconv.Itoa(l)
			for n := 0; !stop.Load(); n++ {
				itemID := "i" + strconv.Itoa(n)
				if _, err := c.Do("SADD", "inventory:"+seller, itemID); err != nil {
					errs <- err
					return
				}
				if err := v.list(c, m, seller, itemID, 1+n%100, &retries); err != nil {
					errs <- err
					return
				}
				listed.Add(1)
			}
		}(l)
	}
	for k := 0; k < cfg.buyers; k++ {
		buyersWG.Add(1)
		go func(k int) {
			defer buyersWG.Done()
			c := pool.Get()
			defer c.Close()
			r := rand.New(rand.NewPCG(uint64(k), 11))
			buyer := ns + "buyer" + strconv.Itoa(k)
			for bought.Load() < target && time.Now().Before(deadline) {
				items, err := redis.Strings(c.Do("ZRANGE", m.key, 0, 9, "WITHSCORES"))
				if err != nil {
					errs <- err
					return
				}
				if len(items) == 0 {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				i := 2 * r.IntN(len(items)/2)
				itemID, seller, _ := strings.Cut(items[i], ".")
				price, _ := strconv.Atoi(items[i+1])
				t0 := time.Now()
				ok, err := v.purchase(c, m, buyer, itemID, seller, price, &retries)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					waitNs.Add(int64(time.Since(t0)))
					bought.Add(1)
				}
			}
		}(k)
	}
	buyersWG.Wait()
	st.elapsed = time.Since(start)
	stop.Store(true)
	listersWG.Wait()
	close(errs)
	st.listed, st.bought, st.retries = listed.Load(), bought.Load(), retries.Load()
	st.wait = time.Duration(waitNs.Load())
	return st, <-errs
}

// BenchmarkMarket: the book's marketplace; an op is one purchase. One
// experiment per configuration, each round on a market of its own.
func BenchmarkMarket(b *testing.B) {
	for _, cfg := range marketConfigs {
		x := newExperiment(b)
		x.Show = []string{"ns/op", "bought/s", "retries/purchase"}
		for _, v := range marketVariants {
			x.Add(v.name+"/"+cfg.String(), func(r *bench.Round) error {
				ns := fmt.Sprintf("%sr%d-%s:", x.env.ns, r.Index, v.name)
				target, maxTime := int64(r.Budget.N), 30*time.Second
				if r.Budget.N == 0 {
					target, maxTime = 1<<62, r.Budget.D
				}
				st, err := runMarket(x.env.Pool, ns, v, cfg, target, maxTime)
				if err != nil {
					return err
				}
				if st.bought == 0 {
					return bench.NotMeasurable("nothing bought in %v", st.elapsed.Round(time.Millisecond))
				}
				r.Did(int(st.bought))
				r.Add("ns/op", float64(st.elapsed.Nanoseconds())/float64(st.bought))
				r.Add("bought/s", float64(st.bought)/st.elapsed.Seconds())
				r.Add("retries/purchase", float64(st.retries)/float64(st.bought))
				r.Add("ms/wait", float64(st.wait.Microseconds())/1000/float64(st.bought))
				return nil
			})
		}
		x.Run()
	}
}

// TestMarketTable prints the book's Table 6.3 (listed, bought, retries,
// mean wait per purchase) with a Lua column. go test -run MarketTable -market
func TestMarketTable(t *testing.T) {
	if !*marketTable {
		t.Skip("the marketplace table runs with -market")
	}
	const runFor = 3 * time.Second
	fmt.Printf("\n%-6s %-10s %10s %8s %10s %10s\n", "config", "variant", "listed", "bought", "retries", "wait/buy")
	for _, cfg := range marketConfigs {
		for _, v := range marketVariants {
			pool, ns := benchSetup(t)
			st, err := runMarket(pool.Pool, ns, v, cfg, 1<<62, runFor)
			if err != nil {
				t.Fatal(err)
			}
			wait := "-"
			if st.bought > 0 {
				wait = fmt.Sprintf("%.2fms", float64(st.wait.Microseconds())/1000/float64(st.bought))
			}
			fmt.Printf("%-6s %-10s %10d %8d %10d %10s\n", cfg, v.name, st.listed, st.bought, st.retries, wait)
		}
	}
	fmt.Printf("(%v per row)\n", runFor)
}

// recentV2Suggest is v2's SuggestRecent script (prefix matches only), the
// baseline the tiers are measured against.
var recentV2Suggest = testScript(1, mustRead("testdata/v2_recent_suggest.lua"))

// BenchmarkSuggestRecent: a full recent list of 100 names (capitalised,
// 8 to 12 letters), a 2-letter query taken from a random name's start or
// middle, limit 10; the three tiers against v2's prefix-only script, in
// interleaved rounds.
func BenchmarkSuggestRecent(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, opRounds())
	e, ctx := x.env.engine(), context.Background()
	r := rand.New(rand.NewPCG(100, 1))
	var names []string
	for len(names) < 100 {
		var sb strings.Builder
		sb.WriteByte(byte('A' + r.IntN(26)))
		for l := 7 + r.IntN(5); l > 0; l-- {
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
		names = append(names, sb.String())
		if err := e.AddRecent(ctx, "bench", sb.String()); err != nil {
			bench.Check(b, err)
		}
	}
	queries := make([]string, 64)
	for i := range queries {
		n := names[r.IntN(len(names))]
		at := 0
		if i%2 == 1 {
			at = 1 + r.IntN(len(n)-2)
		}
		queries[i] = n[at : at+2]
	}
	list := object{kind: kindRecent, name: "bench", ns: e.ns}
	x.AddOps("tiers", func(i int) error {
		_, err := e.SuggestRecent(ctx, "bench", queries[i%len(queries)], 10)
		return err
	})
	x.AddOps("v2", func(i int) error {
		_, err := redis.Strings(e.eval(ctx, list, recentV2Suggest, list.key(""), queries[i%len(queries)], 10))
		return err
	})
	x.Run()
}

func init() {
	targets = append(targets,
		bench.Row("SuggestRecent, 100 items: tiers time ÷ v2's prefix only", [2]string{"BenchmarkSuggestRecent/tiers", "ns/op"}, [2]string{"BenchmarkSuggestRecent/v2", "ns/op"}, "<=", 1.1),
	)
}
