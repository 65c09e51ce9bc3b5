package atomicredis

// Benchmarks of many names and one hot name: a lock per shopping cart,
// with few connections; one waiter on each of 100 names; the memory an idle
// name leaves; what a wake-up costs a cluster's other nodes. The hot name
// itself is BenchmarkWaitNoHold (bench_handoff_test.go).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

func init() {
	targets = append(targets,
		bench.Row("cart crowd, acquire p99: pool of 64 ÷ unlimited", [2]string{"BenchmarkWaitCartCrowd/pool-64", "p99-ms"}, [2]string{"BenchmarkWaitCartCrowd/unlimited", "p99-ms"}, "<=", 1.5),
		bench.Row("cart crowd, pool of 64: waits over 100 ms (%)", [2]string{"BenchmarkWaitCartCrowd/pool-64", "over100ms%"}, [2]string{}, "", 0),
		bench.Row("cart crowd, pool of 64: wake subscriptions per engine", [2]string{"BenchmarkWaitCartCrowd/pool-64", "max-subs/engine"}, [2]string{}, "<=", 1),
		bench.Row("100 names, one waiter each: release→return p99 ÷ PING p99", [2]string{"BenchmarkWaitManyNames/handoff", "p99-ms"}, [2]string{"BenchmarkWaitManyNames/ping", "p99-ms"}, "<=", 10),
		bench.Row("100 names: release→return p50 ÷ PING p50", [2]string{"BenchmarkWaitManyNames/handoff", "p50-ms"}, [2]string{"BenchmarkWaitManyNames/ping", "p50-ms"}, "", 0),
		bench.Row("100,000 idle names: bytes each, within the retention", [2]string{"BenchmarkNamesMemory/locks", "bytes/name"}, [2]string{}, "", 0),
		bench.Row("100,000 idle names: keys each, within the retention", [2]string{"BenchmarkNamesMemory/locks", "keys/name"}, [2]string{}, "<=", 1),
		bench.Row("100,000 idle names: keys left after the retention", [2]string{"BenchmarkNamesMemory/locks", "keys-after"}, [2]string{}, "<=", 0),
		bench.Row("cluster: publish messages the other nodes get per wake-up", [2]string{"BenchmarkWaitCluster/handoff", "msgs/wake"}, [2]string{}, "", 0),
		bench.Row("cluster: other nodes' CPU per wake-up (µs, all of them)", [2]string{"BenchmarkWaitCluster/handoff", "others-cpu-us/wake"}, [2]string{}, "", 0),
		bench.Row("cluster: owner's CPU per handoff (µs)", [2]string{"BenchmarkWaitCluster/handoff", "owner-cpu-us/wake"}, [2]string{}, "", 0),
		bench.Row("wake delivery p50: releaser pushes to an inbox ÷ script publishes", [2]string{"BenchmarkWakeShapes/inbox", "p50-ms"}, [2]string{"BenchmarkWakeShapes/publish", "p50-ms"}, "", 0),
	)
}

// cartJobs are the seed's orders: names carts, each ordered dup times, in
// a random order.
func cartJobs(round, names, dup int) []string {
	var jobs []string
	for i := 0; i < names; i++ {
		for d := 0; d < dup; d++ {
			jobs = append(jobs, fmt.Sprintf("cart:%d:%d", round, i))
		}
	}
	r := rand.New(rand.NewPCG(uint64(round), 17))
	r.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	return jobs
}

// BenchmarkWaitCartCrowd: a lock per shopping cart, 200 carts each ordered
// 5 times at once, 50 workers on 2 engines (processes), 5 ms of work under
// each lock: how long an order waits for its lock, with the quick start's
// pool (MaxActive 64, Wait) against an unlimited one, and how many wake
// subscriptions and connections each engine holds.
func BenchmarkWaitCartCrowd(b *testing.B) {
	x := newExperiment(b)
	x.Show = []string{"p50-ms", "p99-ms", "over100ms%", "max-subs/engine"}
	for _, c := range []struct {
		name      string
		maxActive int
	}{{"pool-64", 64}, {"unlimited", bench.PoolLimit()}} { // the limit: more than the 50 workers use
		x.Add(c.name, func(r *bench.Round) error { return cartRound(r, x.env, c.maxActive) })
	}
	x.Run()
}

func cartRound(r *bench.Round, env *benchEnv, maxActive int) error {
	const engines, workers, carts, dup, work = 2, 50, 200, 5, 5 * time.Millisecond
	var es []*Engine
	var pools []*redis.Pool
	for i := 0; i < engines; i++ {
		p := &redis.Pool{MaxActive: maxActive, MaxIdle: 64, Wait: true, IdleTimeout: time.Minute,
			Dial: func() (redis.Conn, error) { return redis.Dial("tcp", benchAddr) }}
		pools = append(pools, p)
		es = append(es, New(p, WithNamespace(env.ns)))
	}
	defer func() {
		closeAll(es...)()
		for _, p := range pools {
			p.Close()
		}
	}()
	jobs := make(chan string)
	go func() {
		for _, j := range cartJobs(r.Index, carts, dup) {
			jobs <- j
		}
		close(jobs)
	}()
	var mu sync.Mutex
	var waits []time.Duration
	var failed atomic.Value
	stop := make(chan struct{})
	var maxSubs, maxConns atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() { // the subscriptions and connections each engine holds
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for i, e := range es {
				v, err := redis.Values(env.Admin.Do("PUBSUB", "NUMSUB", e.wake.channel))
				if n, _ := redis.Int64(v[1], err); n > maxSubs.Load() {
					maxSubs.Store(n)
				}
				if n := int64(pools[i].ActiveCount() - pools[i].IdleCount()); n > maxConns.Load() {
					maxConns.Store(n)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(e *Engine) {
			defer wg.Done()
			ctx := context.Background()
			for name := range jobs {
				start := time.Now()
				l, err := e.Lock(ctx, name, LockOptions{TTL: benchLease, Wait: benchWait})
				if err != nil {
					failed.Store(err)
					continue
				}
				mu.Lock()
				waits = append(waits, time.Since(start))
				mu.Unlock()
				time.Sleep(work)
				if err := l.Unlock(ctx); err != nil {
					failed.Store(err)
				}
			}
		}(es[w%engines])
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	over := 0
	for _, w := range waits {
		if w > 100*time.Millisecond {
			over++
		}
	}
	r.Did(len(waits))
	r.Add("p50-ms", percentile(waits, 0.5))
	r.Add("p99-ms", percentile(waits, 0.99))
	r.Add("over100ms%", 100*float64(over)/float64(len(waits)))
	r.Add("max-subs/engine", float64(maxSubs.Load()))
	r.Add("max-conns/engine", float64(maxConns.Load()))
	return nil
}

// BenchmarkWaitManyNames: 100 names, one waiter on each, all in one engine
// whose pool has 16 connections: from each release call to its waiter's
// return, against a PING on the same pool in the same round.
func BenchmarkWaitManyNames(b *testing.B) {
	x := newExperiment(b)
	env, ctx := x.env, context.Background()
	const names = 100
	pool := &redis.Pool{MaxActive: 16, MaxIdle: 16, Wait: true, IdleTimeout: time.Minute,
		Dial: func() (redis.Conn, error) { return redis.Dial("tcp", benchAddr) }}
	defer pool.Close()
	x.Add("handoff", func(r *bench.Round) error {
		w := New(pool, WithNamespace(env.ns))
		holders := env.engine()
		defer closeAll(w, holders)()
		var held []*Lock
		for i := 0; i < names; i++ {
			l, err := holders.TryLock(ctx, fmt.Sprintf("many:%d:%d", r.Index, i), LockOptions{TTL: benchLease})
			if err != nil {
				return err
			}
			held = append(held, l)
		}
		type got struct {
			l   *Lock
			at  time.Time
			err error
		}
		chs := make([]chan got, names)
		for i := range chs {
			chs[i] = make(chan got, 1)
			go func(i int) {
				l, err := w.Lock(ctx, fmt.Sprintf("many:%d:%d", r.Index, i), LockOptions{TTL: benchLease, Wait: benchWait})
				chs[i] <- got{l, time.Now(), err}
			}(i)
		}
		if err := env.until(func() (bool, error) {
			v, err := redis.Values(env.Admin.Do("PUBSUB", "NUMSUB", w.wake.channel))
			n, _ := redis.Int(v[1], err)
			if n != 1 || err != nil {
				return false, err
			}
			for i := 0; i < names; i++ {
				q, err := redis.Int(env.Admin.Do("ZCARD", env.ns+fmt.Sprintf("lock:{many:%d:%d}:queue", r.Index, i)))
				if q != 1 || err != nil {
					return false, err
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond) // the waiters' look once subscribed is done
		var lags []time.Duration
		for i, l := range held {
			t0 := time.Now()
			if err := l.Unlock(ctx); err != nil {
				return err
			}
			g := <-chs[i]
			if g.err != nil {
				return g.err
			}
			lags = append(lags, g.at.Sub(t0))
			if err := g.l.Unlock(ctx); err != nil {
				return err
			}
		}
		addLatencies(r, lags)
		return nil
	})
	x.Add("ping", func(r *bench.Round) error { return pingRound(r, pool, names) })
	x.Run()
}

// BenchmarkNamesMemory: 100,000 lock names each taken and released once,
// as a service that locks per cart does: the keys and bytes they leave
// during the fence retention (here 20 s), and after it. redis-server only
// (miniredis has no memory accounting).
func BenchmarkNamesMemory(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = 1
	if benchMini {
		x.Skip("locks", "miniredis has no memory accounting: runs on redis-server")
		x.Run()
		return
	}
	const names, retention = 100_000, 20 * time.Second
	env := x.env
	x.Add("locks", func(r *bench.Round) error {
		e := New(env.Pool, WithNamespace(env.ns), WithFenceRetention(retention))
		defer closeAll(e)()
		keys := func() (int, error) {
			n := 0
			for cursor := "0"; ; {
				v, err := redis.Values(env.Admin.Do("SCAN", cursor, "MATCH", env.ns+"lock:*", "COUNT", 10000))
				if err != nil {
					return 0, err
				}
				cursor, _ = redis.String(v[0], nil)
				ks, _ := redis.Strings(v[1], nil)
				n += len(ks)
				if cursor == "0" {
					return n, nil
				}
			}
		}
		used := func() (int64, error) {
			info, err := redis.String(env.Admin.Do("INFO", "memory"))
			return infoInt(info, "used_memory"), err
		}
		before, err := used()
		if err != nil {
			return err
		}
		var next atomic.Int64
		var failed atomic.Value
		var wg sync.WaitGroup
		start := time.Now()
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for i := next.Add(1); i <= names; i = next.Add(1) {
					l, err := e.TryLock(ctx, "cart:"+strconv.FormatInt(i, 10), LockOptions{TTL: benchLease})
					if err == nil {
						err = l.Unlock(ctx)
					}
					if err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
		if took := time.Since(start); took > retention/2 {
			return bench.NotMeasurable("taking %d names took %v, half the retention: counters would expire before they are counted", names, took)
		}
		during, err := keys()
		if err != nil {
			return err
		}
		after, err := used()
		if err != nil {
			return err
		}
		time.Sleep(retention + time.Second)
		left, err := keys()
		if err != nil {
			return err
		}
		r.Did(names)
		r.Add("keys/name", float64(during)/names)
		r.Add("bytes/name", float64(after-before)/names)
		r.Add("keys-after", float64(left))
		return nil
	})
	x.Run()
}

func infoInt(info, field string) int64 {
	v, _ := testserver.InfoField(info, field)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// BenchmarkWaitCluster: what a wake-up costs the other nodes of the
// cluster of REDIS_CLUSTER_ADDRS. A PUBLISH in a cluster goes to every
// node over the cluster bus, which is why one subscription anywhere hears
// it: 1,000 handoffs between two goroutines on one lock, and the publish
// messages and CPU the nodes that do not own the lock spent on them.
func BenchmarkWaitCluster(b *testing.B) {
	seeds := testserver.ClusterSeeds()
	if len(seeds) == 0 {
		bench.Skip(b, "REDIS_CLUSTER_ADDRS not set")
	}
	x := newExperiment(b)
	x.Rounds = 1
	s := testcluster.New(b, seeds)
	nodes, err := clusterNodes(testcluster.Of(s))
	if err != nil {
		bench.Check(b, err)
	}
	x.Add("handoff", func(r *bench.Round) error {
		e := engine(s)
		defer closeAll(e)()
		ctx := context.Background()
		const handoffs = 1000
		name := "cluster-hot-" + strconv.Itoa(r.Index)
		owner := ""
		if owners, err := testcluster.SlotOwners(testcluster.Of(s)); err == nil {
			owner = owners[keySlot(s.NS+"lock:{"+name+"}")]
		}
		read := func() (map[string][2]float64, error) { // node → publish messages received, CPU s
			out := map[string][2]float64{}
			for _, addr := range nodes {
				c, err := redis.Dial("tcp", addr)
				if err != nil {
					return nil, err
				}
				ci, err1 := redis.String(c.Do("CLUSTER", "INFO"))
				cpu, err2 := redis.String(c.Do("INFO", "cpu"))
				c.Close()
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("%s: %v %v", addr, err1, err2)
				}
				sys, user := infoFloat(cpu, "used_cpu_sys"), infoFloat(cpu, "used_cpu_user")
				out[addr] = [2]float64{float64(infoInt(ci, "cluster_stats_messages_publish_received")), sys + user}
			}
			return out, nil
		}
		var done atomic.Int64
		var failed atomic.Value
		before, err := read()
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Load() < handoffs {
					l, err := e.Lock(ctx, name, LockOptions{TTL: benchLease, Wait: benchWait})
					if err != nil {
						failed.Store(err)
						return
					}
					done.Add(1)
					if err := l.Unlock(ctx); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
		after, err := read()
		if err != nil {
			return err
		}
		var msgs, others, own float64
		for addr, v := range after {
			d := [2]float64{v[0] - before[addr][0], v[1] - before[addr][1]}
			if addr == owner {
				own += d[1]
				continue
			}
			msgs += d[0]
			others += d[1]
		}
		wakes := float64(done.Load())
		r.Did(int(wakes))
		r.Add("msgs/wake", msgs/wakes)
		r.Add("others-cpu-us/wake", others*1e6/wakes)
		r.Add("owner-cpu-us/wake", own*1e6/wakes)
		fmt.Printf("%s: %d nodes; the lock's owner %s\n", b.Name(), len(nodes), owner)
		return nil
	})
	x.Run()
}

func infoFloat(info, field string) float64 {
	v, _ := testserver.InfoField(info, field)
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

// clusterNodes lists every node of the cluster, primaries and replicas.
func clusterNodes(c interface {
	Get() redis.Conn
}) ([]string, error) {
	conn := c.Get()
	defer conn.Close()
	out, err := redis.String(conn.Do("CLUSTER", "NODES"))
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, addr)
	}
	sort.Strings(nodes)
	return nodes, nil
}

// BenchmarkWakeShapes: the two ways to carry a wake-up that the engine's
// design weighed, alone: a PUBLISH inside the releasing script, which a
// subscription receives; and an inbox list, which the releasing client
// pushes to once its script has named whom it handed to, and a blocking
// pop receives. From the releasing call's start to the waiter's receipt,
// each release a stand-in script of the same size.
func BenchmarkWakeShapes(b *testing.B) {
	x := newExperiment(b)
	x.Budget = bench.Budget{N: 300}
	env := x.env
	release := redis.NewScript(1, `redis.pcall('PUBLISH', KEYS[1], ARGV[1]) return 1`)
	noPublish := redis.NewScript(1, `return 1`)
	dial := func() (redis.Conn, error) { return redis.Dial("tcp", benchAddr) }
	x.Add("publish", func(r *bench.Round) error {
		sub, err := dial()
		if err != nil {
			return err
		}
		defer sub.Close()
		ch := env.ns + "wake-shape"
		if _, err := sub.Do("SUBSCRIBE", ch); err != nil {
			return err
		}
		c, err := dial()
		if err != nil {
			return err
		}
		defer c.Close()
		var lags []time.Duration
		for i := 0; i < r.Budget.N; i++ {
			got := make(chan error, 1)
			go func() { _, err := sub.Receive(); got <- err }()
			t0 := time.Now()
			if _, err := release.Do(c, ch, "token fence arrival"); err != nil {
				return err
			}
			if err := <-got; err != nil {
				return err
			}
			lags = append(lags, time.Since(t0))
		}
		addLatencies(r, lags)
		return nil
	})
	x.Add("inbox", func(r *bench.Round) error {
		pop, err := dial()
		if err != nil {
			return err
		}
		defer pop.Close()
		c, err := dial()
		if err != nil {
			return err
		}
		defer c.Close()
		inbox := env.ns + "inbox-shape"
		var lags []time.Duration
		for i := 0; i < r.Budget.N; i++ {
			got := make(chan error, 1)
			go func() { _, err := pop.Do("BLPOP", inbox, 1); got <- err }()
			time.Sleep(100 * time.Microsecond) // the pop is waiting, as a listener would be
			t0 := time.Now()
			if _, err := noPublish.Do(c, inbox, "token fence arrival"); err != nil {
				return err
			}
			if _, err := c.Do("RPUSH", inbox, "token fence arrival"); err != nil {
				return err
			}
			if err := <-got; err != nil {
				return err
			}
			lags = append(lags, time.Since(t0))
		}
		addLatencies(r, lags)
		return nil
	})
	x.Run()
}
