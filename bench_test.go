package atomicredis

// Benchmarks: each operation as one script against the book's WATCH/MULTI
// code (book_test.go), and against the physical limit of plain round trips.
// Run: go test -run '^$' -bench .

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"
)

// benchAddr is the server the benchmarks use, chosen once in TestMain;
// benchMini says it is miniredis.
var (
	benchAddr string
	benchMini bool
)

var marketTable = flag.Bool("market", false, "run TestMarketTable: the book's Table 6.3 with a Lua column")

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); (f == nil || f.Value.String() == "") && !*marketTable {
		os.Exit(m.Run()) // tests pick their own servers
	}
	stop, err := pickBenchServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(2)
	}
	code := m.Run()
	printVerdicts(os.Stdout)
	stop()
	os.Exit(code)
}

// pickBenchServer: REDIS_ADDR if set; else a private redis-server if one
// is on PATH (unless BENCH_MINIREDIS=1); else miniredis. It prints which.
func pickBenchServer() (stop func(), err error) {
	forceMini := os.Getenv("BENCH_MINIREDIS") == "1"
	if addr := os.Getenv("REDIS_ADDR"); addr != "" && !forceMini {
		benchAddr = addr
		fmt.Printf("bench server: redis-server at %s (REDIS_ADDR)\n", addr)
		return func() {}, nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil && !forceMini {
		addr, stop, err := startRedis(path)
		if err != nil {
			return nil, err
		}
		benchAddr = addr
		fmt.Printf("bench server: private %s at %s (no persistence)\n", redisVersion(addr), addr)
		return stop, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	benchAddr, benchMini = m.Addr(), true
	why := "no redis-server on PATH"
	if forceMini {
		why = "BENCH_MINIREDIS=1"
	}
	fmt.Printf("bench server: miniredis (%s): figures measure miniredis's Go Lua interpreter, not Redis\n", why)
	return m.Close, nil
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, and returns a function that stops it.
func startRedis(path string) (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return startRedisOn(path, port)
}

// startRedisOn starts a redis-server without persistence on a given
// loopback port and waits until it answers.
func startRedisOn(path, port string) (addr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "atomicredis-redis")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	addr = "127.0.0.1:" + port
	for i := 0; i < 100; i++ {
		if c, err := redis.Dial("tcp", addr); err == nil {
			_, err = c.Do("PING")
			c.Close()
			if err == nil {
				return addr, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("redis-server on %s did not answer", addr)
}

var execLookPath = exec.LookPath

func redisVersion(addr string) string {
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		return "redis-server"
	}
	defer c.Close()
	info, _ := redis.String(c.Do("INFO", "server"))
	for _, line := range splitLines(info) {
		if v, ok := cutPrefix(line, "redis_version:"); ok {
			return "redis-server " + v
		}
	}
	return "redis-server"
}

// benchSetup gives a benchmark a pool on the chosen server and a fresh
// namespace, whose keys it deletes afterwards.
func benchSetup(b testing.TB) (*countingPool, string) {
	b.Helper()
	if benchAddr == "" {
		b.Fatal("no bench server (TestMain did not run with -bench or -market)")
	}
	p := &countingPool{Pool: newPool(b, benchAddr)}
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

// parallel runs clients goroutines that together complete b.N operations
// (op returns nil) and returns the time it took. An op error other than
// errRetry fails the benchmark; errRetry is a failed try, not an op.
func parallel(b *testing.B, clients int, op func(client int) error) time.Duration {
	b.Helper()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for done.Load() < int64(b.N) {
				switch err := op(c); {
				case err == nil:
					done.Add(1)
				case errors.Is(err, errRetry):
					time.Sleep(time.Millisecond) // the book's retry pause
				default:
					errs <- err
					return
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return elapsed
}

var errRetry = errors.New("try again")

func BenchmarkRoundTrip(b *testing.B) {
	pool, ns := benchSetup(b)
	ctx := context.Background()
	key := ns + "rt"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, _ := pool.GetContext(ctx)
		if _, err := c.Do("SET", key, "x", "NX", "PX", 10000); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Do("DEL", key); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	recordNsPerOp(b)
}

// BenchmarkLock: one client, uncontended acquire + release.
func BenchmarkLock(b *testing.B) {
	b.Run("lua", func(b *testing.B) {
		pool, ns := benchSetup(b)
		e, ctx := New(pool, WithNamespace(ns)), context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l, err := e.TryLock(ctx, "bench", LockOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		recordNsPerOp(b)
	})
	b.Run("watch", func(b *testing.B) {
		pool, ns := benchSetup(b)
		var retries atomic.Int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := pool.Get()
			id, err := bookAcquireLockWithTimeout(c, ns+"lock:bench", time.Second, 10*time.Second, &retries)
			if err != nil || id == "" {
				b.Fatal("acquire:", err)
			}
			if ok, err := bookReleaseLock(c, ns+"lock:bench", id); !ok || err != nil {
				b.Fatal("release:", err)
			}
			c.Close()
		}
		recordNsPerOp(b)
	})
}

// BenchmarkLockContended: 16 goroutines on one lock name, like the book's
// Table 11.2; acquisitions/s and tries per acquisition.
func BenchmarkLockContended(b *testing.B) {
	const clients = 16
	b.Run("lua", func(b *testing.B) {
		pool, ns := benchSetup(b)
		e, ctx := New(pool, WithNamespace(ns)), context.Background()
		elapsed := parallel(b, clients, func(int) error {
			l, err := e.Lock(ctx, "bench", LockOptions{Wait: time.Minute})
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		})
		// Every call but the Unlocks takes one connection: the enqueue,
		// renewals and pickup of a wait, and the listener's pops.
		reportContention(b, elapsed, "calls/acq", float64(pool.gets.Load()-int64(b.N)))
	})
	b.Run("watch", func(b *testing.B) {
		pool, ns := benchSetup(b)
		var retries atomic.Int64
		elapsed := parallel(b, clients, func(int) error {
			c := pool.Get()
			defer c.Close()
			id, err := bookAcquireLockWithTimeout(c, ns+"lock:bench", time.Minute, 10*time.Second, &retries)
			if err != nil {
				return err
			}
			_, err = bookReleaseLock(c, ns+"lock:bench", id)
			return err
		})
		reportContention(b, elapsed, "tries/acq", float64(int64(b.N)+retries.Load()))
	})
}

func reportContention(b *testing.B, elapsed time.Duration, unit string, calls float64) {
	reportMetric(b, float64(b.N)/elapsed.Seconds(), "acq/s")
	reportMetric(b, calls/float64(b.N), unit)
	reportMetric(b, float64(elapsed.Nanoseconds())/float64(b.N), "ns/op")
}

// BenchmarkSemaphore: acquire + release of a limit-5 semaphore, by 1 and by
// 16 clients; a refused try pauses 1 ms and tries again.
func BenchmarkSemaphore(b *testing.B) {
	const limit = 5
	for _, clients := range []int{1, 16} {
		suffix := fmt.Sprintf("/clients=%d", clients)
		b.Run("lua"+suffix, func(b *testing.B) {
			pool, ns := benchSetup(b)
			e, ctx := New(pool, WithNamespace(ns)), context.Background()
			var tries atomic.Int64
			elapsed := parallel(b, clients, func(int) error {
				tries.Add(1)
				p, err := e.AcquireSemaphore(ctx, "bench", SemaphoreOptions{Limit: limit})
				if errors.Is(err, ErrNotAcquired) {
					return errRetry
				}
				if err != nil {
					return err
				}
				return p.Release(ctx)
			})
			reportContention(b, elapsed, "tries/acq", float64(tries.Load()))
		})
		b.Run("book-fair"+suffix, func(b *testing.B) {
			pool, ns := benchSetup(b)
			var tries atomic.Int64
			elapsed := parallel(b, clients, func(int) error {
				tries.Add(1)
				c := pool.Get()
				defer c.Close()
				id, err := bookAcquireFairSemaphore(c, ns+"semaphore:bench", limit, 10*time.Second, time.Now())
				if err != nil {
					return err
				}
				if id == "" {
					return errRetry
				}
				_, err = bookReleaseFairSemaphore(c, ns+"semaphore:bench", id)
				return err
			})
			reportContention(b, elapsed, "tries/acq", float64(tries.Load()))
		})
		b.Run("book-fair-locked"+suffix, func(b *testing.B) {
			pool, ns := benchSetup(b)
			var tries, lockRetries atomic.Int64
			elapsed := parallel(b, clients, func(int) error {
				tries.Add(1)
				c := pool.Get()
				defer c.Close()
				id, err := bookAcquireSemaphoreWithLock(c, ns+"semaphore:bench", limit, 10*time.Second, &lockRetries)
				if err != nil {
					return err
				}
				if id == "" {
					return errRetry
				}
				_, err = bookReleaseFairSemaphore(c, ns+"semaphore:bench", id)
				return err
			})
			reportContention(b, elapsed, "tries/acq", float64(tries.Load()))
		})
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
func suggestFixture(b *testing.B, pool *countingPool, n int) suggestSet {
	suggestMu.Lock()
	defer suggestMu.Unlock()
	if s, ok := suggestSets[n]; ok {
		return s
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
			b.Fatal(err)
		}
	}
	suggestSets[n] = s
	return s
}

// BenchmarkSuggest: a 2-letter prefix, limit 10, over 1k and 100k members,
// alone and with a writer adding and removing members all the while.
func BenchmarkSuggest(b *testing.B) {
	type variant struct {
		name string
		run  func(b *testing.B, pool *countingPool, s suggestSet, prefix string, retries *atomic.Int64) ([]string, error)
	}
	variants := []variant{
		{"lua", func(b *testing.B, pool *countingPool, s suggestSet, prefix string, _ *atomic.Int64) ([]string, error) {
			return New(pool, WithNamespace(s.ns)).Suggest(context.Background(), "bench", prefix, 10)
		}},
		{"watch", func(b *testing.B, pool *countingPool, s suggestSet, prefix string, retries *atomic.Int64) ([]string, error) {
			c := pool.Get()
			defer c.Close()
			return bookAutocompleteOnPrefix(c, s.ns+"members:{bench}", prefix, retries)
		}},
		{"zrangebylex", func(b *testing.B, pool *countingPool, s suggestSet, prefix string, _ *atomic.Int64) ([]string, error) {
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
				b.Run(name, func(b *testing.B) {
					if benchMini && size > 1000 {
						b.Skip("miniredis sorts a sorted set on every rank lookup (O(N)): 100k members run on redis-server")
					}
					pool, _ := benchSetup(b)
					s := suggestFixture(b, pool, size)
					var retries atomic.Int64
					stop := startWriters(b, pool, s, writers)
					r := rand.New(rand.NewPCG(3, 4))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						m := s.members[r.IntN(len(s.members))]
						got, err := v.run(b, pool, s, m[:2], &retries)
						if err != nil {
							b.Fatal(err)
						}
						if len(got) == 0 {
							b.Fatalf("no match for the prefix of %q", m)
						}
					}
					b.StopTimer()
					stop()
					recordNsPerOp(b)
					reportMetric(b, float64(retries.Load())/float64(b.N), "retries/op")
				})
			}
		}
	}
}

// successor is the smallest string greater than every string starting
// with p (the end of ZRANGEBYLEX's range); p is lowercase here.
func successor(p string) string {
	return p[:len(p)-1] + string(p[len(p)-1]+1)
}

// startWriters adds and removes members of s in n goroutines until stopped;
// the set is as it was afterwards.
func startWriters(b *testing.B, pool *countingPool, s suggestSet, n int) (stop func()) {
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
func runMarket(tb testing.TB, pool *countingPool, ns string, v marketVariant, cfg marketConfig, target int64, maxTime time.Duration) marketStats {
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
	for err := range errs {
		tb.Fatal(err)
	}
	st.listed, st.bought, st.retries = listed.Load(), bought.Load(), retries.Load()
	st.wait = time.Duration(waitNs.Load())
	return st
}

// BenchmarkMarket: the book's marketplace; an op is one purchase.
func BenchmarkMarket(b *testing.B) {
	for _, v := range marketVariants {
		for _, cfg := range marketConfigs {
			b.Run(v.name+"/"+cfg.String(), func(b *testing.B) {
				pool, ns := benchSetup(b)
				b.ResetTimer()
				st := runMarket(b, pool, ns, v, cfg, int64(b.N), 30*time.Second)
				b.StopTimer()
				reportMarket(b, st)
			})
		}
	}
}

func reportMarket(b *testing.B, st marketStats) {
	if st.bought == 0 {
		reportMetric(b, 0, "bought/s")
		return
	}
	reportMetric(b, float64(st.elapsed.Nanoseconds())/float64(st.bought), "ns/op")
	reportMetric(b, float64(st.bought)/st.elapsed.Seconds(), "bought/s")
	reportMetric(b, float64(st.retries)/float64(st.bought), "retries/purchase")
	reportMetric(b, float64(st.wait.Microseconds())/1000/float64(st.bought), "ms/wait")
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
			st := runMarket(t, pool, ns, v, cfg, 1<<62, runFor)
			wait := "-"
			if st.bought > 0 {
				wait = fmt.Sprintf("%.2fms", float64(st.wait.Microseconds())/1000/float64(st.bought))
			}
			fmt.Printf("%-6s %-10s %10d %8d %10d %10s\n", cfg, v.name, st.listed, st.bought, st.retries, wait)
		}
	}
	fmt.Printf("(%v per row)\n", runFor)
}
