package peers

// atomicredis against its peers, bsm/redislock (on go-redis) and
// go-redsync/redsync/v4 (on its redigo pool), on one redis-server, in
// interleaved rounds (internal/bench, as the main job's benchmarks):
//
//	go test -run '^$' -bench . -benchtime 3s
//
// BenchmarkUncontended: one goroutine, TryLock + Unlock, against the
// floor: SET NX PX + DEL through the same redigo pool, with a context.
// BenchmarkHotName: 16 goroutines on one name, unlocking at once.
// BenchmarkCrowd: 64 goroutines on one name, each holding it 10 ms.
// atomicredis waits with Lock (its FIFO queue); the peers wait as their
// users do, by retrying (the settings are printed first). TestMain prints
// the verdict table (targets) after the benchmarks.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
)

// The fixed settings, printed by printSettings.
const (
	lease      = 10 * time.Second // every holder's TTL: never reached
	waitFor    = time.Minute      // how long a waiter waits: never reached
	retryEvery = time.Millisecond // the peers' pause between tries when they wait

	// redsync's tries when it waits: enough to wait waitFor.
	redsyncTries = int(waitFor / retryEvery)

	// Every redigo pool (atomicredis's, redsync's, the floor's): up to
	// redigoMaxIdle idle connections, no bound on active ones.
	redigoMaxIdle = 128

	hotClients   = 16
	crowdClients = 64
	crowdHold    = 10 * time.Millisecond

	warmup       = 300 * time.Millisecond // before a crowd's window, plus a turn of the queue (clients × hold)
	hotWindow    = time.Second            // a hot-name round's measured window
	crowdWindow  = 1500 * time.Millisecond
	drainTimeout = 15 * time.Second // bound on a crowd's wind-down
)

// errNotObtained is a library's answer that the lock is held (a try), or
// that its wait ran out (its tries, its deadline).
var errNotObtained = errors.New("not obtained")

// unlock gives a lock back.
type unlock func(ctx context.Context) error

// lib is one library's lock on the bench server: try makes one attempt,
// lock waits (nil: the library does not wait).
type lib struct {
	try, lock func(ctx context.Context, name string) (unlock, error)
	close     func()
}

// contender is a library as a contender: its name, the commands it sends
// itself (INFO commandstats names; what its scripts call is inside their
// time) and how to open it with keys under the prefix ns.
type contender struct {
	name string
	sent []string
	open func(ns string) *lib
}

var (
	atomicredisC = contender{"atomicredis", []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "blpop", "brpop", "blmove", "blmpop", "brpoplpush"}, openAtomicredis}
	redislockC   = contender{"redislock", []string{"evalsha", "eval"}, openRedislock}
	redsyncC     = contender{"redsync", []string{"set", "evalsha", "eval"}, openRedsync}
	floorC       = contender{"floor", []string{"set", "del"}, openFloor}
)

func newRedigoPool() *redis.Pool {
	return &redis.Pool{
		MaxIdle:     redigoMaxIdle,
		IdleTimeout: time.Minute,
		Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", benchAddr) },
	}
}

func openAtomicredis(ns string) *lib {
	pool := newRedigoPool()
	e := atomicredis.New(pool, atomicredis.WithNamespace(ns))
	held := func(l *atomicredis.Lock, err error) (unlock, error) {
		if errors.Is(err, atomicredis.ErrNotAcquired) {
			return nil, fmt.Errorf("%w: %w", errNotObtained, err)
		}
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			return held(e.TryLock(ctx, name, atomicredis.LockOptions{TTL: lease}))
		},
		lock: func(ctx context.Context, name string) (unlock, error) {
			return held(e.Lock(ctx, name, atomicredis.LockOptions{TTL: lease, Wait: waitFor}))
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.Close(ctx)
			pool.Close()
		},
	}
}

// newGoredisClient is redislock's client: go-redis's defaults.
func newGoredisClient() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: benchAddr})
}

func openRedislock(ns string) *lib {
	c := newGoredisClient()
	rl := redislock.New(c)
	held := func(l *redislock.Lock, err error) (unlock, error) {
		if errors.Is(err, redislock.ErrNotObtained) {
			return nil, fmt.Errorf("%w: %w", errNotObtained, err)
		}
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			return held(rl.Obtain(ctx, ns+name, lease, nil)) // nil: NoRetry
		},
		lock: func(ctx context.Context, name string) (unlock, error) {
			wctx, cancel := context.WithTimeout(ctx, waitFor)
			defer cancel()
			u, err := held(rl.Obtain(wctx, ns+name, lease, &redislock.Options{RetryStrategy: redislock.LinearBackoff(retryEvery)}))
			if err != nil && ctx.Err() == nil && wctx.Err() != nil {
				err = fmt.Errorf("%w: waited %v: %w", errNotObtained, waitFor, err)
			}
			return u, err
		},
		close: func() { c.Close() },
	}
}

func openRedsync(ns string) *lib {
	pool := newRedigoPool()
	rs := redsync.New(redsyncredigo.NewPool(pool))
	acquire := func(ctx context.Context, name string, tryLock bool) (unlock, error) {
		var m *redsync.Mutex
		var err error
		if tryLock {
			m = rs.NewMutex(ns+name, redsync.WithExpiry(lease))
			err = m.TryLockContext(ctx)
		} else {
			m = rs.NewMutex(ns+name, redsync.WithExpiry(lease), redsync.WithTries(redsyncTries), redsync.WithRetryDelay(retryEvery))
			err = m.LockContext(ctx)
		}
		var taken *redsync.ErrTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
			return nil, fmt.Errorf("%w: %w", errNotObtained, err)
		}
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = errors.New("redsync: unlock found the lock gone")
			}
			return err
		}, nil
	}
	return &lib{
		try:   func(ctx context.Context, name string) (unlock, error) { return acquire(ctx, name, true) },
		lock:  func(ctx context.Context, name string) (unlock, error) { return acquire(ctx, name, false) },
		close: func() { pool.Close() },
	}
}

// openFloor is the physical limit of a lock cycle: SET NX PX, then DEL,
// each on a connection taken with the caller's context, sent with it.
func openFloor(ns string) *lib {
	pool := newRedigoPool()
	do := func(ctx context.Context, cmd string, args ...any) (any, error) {
		c, err := pool.GetContext(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return redis.DoContext(c, ctx, cmd, args...)
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			key := ns + name
			v, err := do(ctx, "SET", key, "token", "NX", "PX", lease.Milliseconds())
			if err != nil {
				return nil, err
			}
			if v == nil {
				return nil, errNotObtained
			}
			return func(ctx context.Context) error {
				_, err := do(ctx, "DEL", key)
				return err
			}, nil
		},
		close: func() { pool.Close() },
	}
}

// newExperiment is an experiment on the bench server (internal/bench)
// whose rounds read the server's counts through an admin connection of
// their own. A contender's failure to measure is its rows' verdict
// ("failed in round N"), not the run's: the table says what went wrong.
func newExperiment(b *testing.B) *bench.Experiment {
	b.Helper()
	x := bench.NewExperiment(b, bench.NewEnv(b, 0))
	x.Tolerant = true
	return x
}

// setup opens every contender of an experiment under a namespace of its
// own, whose keys it deletes when the benchmark ends.
func setup(x *bench.Experiment, cts []contender) map[string]*lib {
	ns := fmt.Sprintf("peers-%d:", time.Now().UnixNano())
	libs := map[string]*lib{}
	for _, ct := range cts {
		libs[ct.name] = ct.open(ns)
	}
	x.B.Cleanup(func() {
		for _, l := range libs {
			l.close()
		}
		keys, _ := redis.Strings(x.Env.Admin.Do("KEYS", ns+"*"))
		for _, k := range keys {
			x.Env.Admin.Do("DEL", k)
		}
	})
	return libs
}

// ---------------------------------------------------------------------------
// The experiments

// BenchmarkUncontended: one goroutine, TryLock + Unlock of one name
// (redislock: Obtain without retry + Release; redsync: TryLockContext +
// UnlockContext), against the floor.
func BenchmarkUncontended(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, 5) // rounds of operations are cheap
	x.Passes = 10
	x.Show = []string{"ns/op", "ops/s", "allocs/op", "cpu-us/op"}
	cts := []contender{atomicredisC, redislockC, redsyncC, floorC}
	libs := setup(x, cts)
	ctx := context.Background()
	for _, ct := range cts {
		l := libs[ct.name]
		x.Add(ct.name, func(r *bench.Round) error {
			return cycles(r, ct.sent, func() error {
				u, err := l.try(ctx, "bench")
				if err != nil {
					return err
				}
				return u(ctx)
			})
		})
	}
	x.Run()
}

// cycles times op, called one call after another for the visit's
// budget, after a few untimed calls at the round's first visit
// (connections dialled, scripts loaded), and at its last visit records
// the round's ns/op, ops/s, allocs/op (Go heap objects, the client's
// side) and the server's figures per op, over all its visits.
func cycles(r *bench.Round, sent []string, op func() error) error {
	if r.Pass == 0 {
		for i := 0; i < 20; i++ {
			if err := op(); err != nil {
				return err
			}
		}
	}
	s1, err := r.Read()
	if err != nil {
		return err
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	n, err := r.Budget.Ops(func(int) error { return op() })
	if err != nil {
		return err
	}
	wall := time.Since(start)
	runtime.ReadMemStats(&m1)
	s2, err := r.Read()
	if err != nil {
		return err
	}
	r.Did(n)
	u := s1.ToCommands(s2, sent)
	u.Wall = wall // the operations' own, without the INFO calls around them
	r.Acc.Add(u, n, m1.Mallocs-m0.Mallocs)
	if r.Last {
		u, n := r.Acc.U, float64(r.Acc.Ops)
		r.Add("ns/op", float64(u.Wall.Nanoseconds())/n)
		r.Add("ops/s", n/u.Wall.Seconds())
		r.Add("allocs/op", float64(r.Acc.Mallocs)/n)
		r.ServerFigures(u, n, "op")
	}
	return nil
}

// BenchmarkHotName: 16 goroutines on one name, each unlocking as soon as
// it holds it and asking again.
func BenchmarkHotName(b *testing.B) {
	crowdExperiment(b, hotClients, 0, hotWindow)
}

// BenchmarkCrowd: 64 goroutines on one name, each holding it 10 ms.
func BenchmarkCrowd(b *testing.B) {
	crowdExperiment(b, crowdClients, crowdHold, crowdWindow)
}

// crowdExperiment runs a crowd of clients goroutines per round for
// atomicredis and each peer, each round on a fresh name.
func crowdExperiment(b *testing.B, clients int, hold, window time.Duration) {
	x := newExperiment(b)
	x.Show = []string{"ns/op", "acq/s", "busiest%", "cpu-us/acq"}
	cts := []contender{atomicredisC, redislockC, redsyncC}
	libs := setup(x, cts)
	for _, ct := range cts {
		x.Add(ct.name, func(r *bench.Round) error {
			return crowd(r, ct, libs[ct.name], clients, hold, window)
		})
	}
	x.Run()
}

// take is one acquisition: which client, and when its lock call returned.
type take struct {
	client int
	at     time.Time
}

// crowd runs one round: clients goroutines that take the lock (waiting as
// the library waits), hold it for hold, give it back and start again.
// Speed, fairness and the server's figures are measured over window, once
// the crowd is in its steady state. A wait that runs out (redsync's tries,
// redislock's deadline) is counted (gave-up/acq) and the client asks
// again; any other error ends the round, and the row says so.
func crowd(r *bench.Round, ct contender, l *lib, clients int, hold, window time.Duration) error {
	name := fmt.Sprintf("crowd%d-%s-%d", clients, ct.name, r.Index)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		stopping atomic.Bool
		gaveUp   atomic.Int64
		mu       sync.Mutex
		takes    []take
		errs     []error
		wg       sync.WaitGroup
	)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for !stopping.Load() {
				u, err := l.lock(ctx, name)
				at := time.Now()
				if errors.Is(err, errNotObtained) {
					gaveUp.Add(1)
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					return
				}
				if hold > 0 && !stopping.Load() {
					time.Sleep(hold)
				}
				mu.Lock()
				takes = append(takes, take{c, at})
				mu.Unlock()
				if err := u(ctx); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("unlock: %w", err))
					mu.Unlock()
					return
				}
			}
		}(c)
	}
	time.Sleep(warmup + time.Duration(clients)*hold)
	s1, err1 := r.Read()
	g1 := gaveUp.Load()
	time.Sleep(window)
	s2, err2 := r.Read()
	g2 := gaveUp.Load()
	stopping.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainTimeout):
		cancel()
		<-done
		errs = append(errs, bench.NotMeasurable("the crowd took over %v to wind down", drainTimeout))
	}
	if err := errors.Join(append(errs, err1, err2)...); err != nil {
		return err
	}
	perClient := map[int]int{}
	acq := 0
	for _, tk := range takes {
		if !tk.at.Before(s1.At) && tk.at.Before(s2.At) {
			perClient[tk.client]++
			acq++
		}
	}
	if acq == 0 {
		return bench.NotMeasurable("no acquisition in %v", window)
	}
	busiest := 0
	for _, n := range perClient {
		busiest = max(busiest, n)
	}
	r.Did(acq)
	u := s1.ToCommands(s2, ct.sent)
	r.Add("ns/op", float64(u.Wall.Nanoseconds())/float64(acq))
	r.Add("acq/s", float64(acq)/u.Wall.Seconds())
	r.Add("busiest%", 100*float64(busiest)/float64(acq))
	r.Add("idle-clients", float64(clients-len(perClient)))
	r.Add("gave-up/acq", float64(g2-g1)/float64(acq))
	r.ServerFigures(u, float64(acq), "acq")
	return nil
}

// ---------------------------------------------------------------------------
// The rows

func sub(name string) func(unit string) [2]string {
	return func(unit string) [2]string { return [2]string{name, unit} }
}

var (
	unAR, unRL, unRS, unFloor = sub("BenchmarkUncontended/atomicredis"), sub("BenchmarkUncontended/redislock"), sub("BenchmarkUncontended/redsync"), sub("BenchmarkUncontended/floor")
	hotAR, hotRL, hotRS       = sub("BenchmarkHotName/atomicredis"), sub("BenchmarkHotName/redislock"), sub("BenchmarkHotName/redsync")
	crAR, crRL, crRS          = sub("BenchmarkCrowd/atomicredis"), sub("BenchmarkCrowd/redislock"), sub("BenchmarkCrowd/redsync")
	none                      = [2]string{}
)

// targets are the goals (item 1) and the figures reported beside
// them. A row is met when every round's ratio reaches the goal.
var targets = []bench.Target{
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ redislock", unAR("ops/s"), unRL("ops/s"), ">=", 1),
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ redsync", unAR("ops/s"), unRS("ops/s"), ">=", 1),
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ the floor", unAR("ops/s"), unFloor("ops/s"), ">=", 0.9),
	bench.Row("uncontended, ops/s: redislock ÷ the floor", unRL("ops/s"), unFloor("ops/s"), "", 0),
	bench.Row("uncontended, ops/s: redsync ÷ the floor", unRS("ops/s"), unFloor("ops/s"), "", 0),
	bench.Row("uncontended, allocations/op: atomicredis ÷ redislock", unAR("allocs/op"), unRL("allocs/op"), "", 0),
	bench.Row("uncontended, allocations/op: atomicredis ÷ redsync", unAR("allocs/op"), unRS("allocs/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis ÷ redislock", unAR("client-us/op"), unRL("client-us/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis ÷ redsync", unAR("client-us/op"), unRS("client-us/op"), "", 0),
	bench.Row("hot name, 16 goroutines, no hold, acq/s: atomicredis ÷ redislock", hotAR("acq/s"), hotRL("acq/s"), ">=", 1),
	bench.Row("hot name, 16 goroutines, no hold, acq/s: atomicredis ÷ redsync", hotAR("acq/s"), hotRS("acq/s"), ">=", 1),
	bench.Row("hot name, server CPU/acq: atomicredis ÷ redislock", hotAR("cpu-us/acq"), hotRL("cpu-us/acq"), "", 0),
	bench.Row("hot name, server CPU/acq: atomicredis ÷ redsync", hotAR("cpu-us/acq"), hotRS("cpu-us/acq"), "", 0),
	bench.Row("hot name, clients' CPU/acq: atomicredis ÷ redislock", hotAR("client-us/acq"), hotRL("client-us/acq"), "", 0),
	bench.Row("hot name, clients' CPU/acq: atomicredis ÷ redsync", hotAR("client-us/acq"), hotRS("client-us/acq"), "", 0),
	bench.Row("hot name, busiest goroutine's share % (fair 6.25): atomicredis", hotAR("busiest%"), none, "", 0),
	bench.Row("hot name, busiest goroutine's share %: redislock", hotRL("busiest%"), none, "", 0),
	bench.Row("hot name, busiest goroutine's share %: redsync", hotRS("busiest%"), none, "", 0),
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ redislock", crAR("acq/s"), crRL("acq/s"), "", 0),
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ redsync", crAR("acq/s"), crRS("acq/s"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ redislock", crAR("cpu-us/acq"), crRL("cpu-us/acq"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ redsync", crAR("cpu-us/acq"), crRS("cpu-us/acq"), "", 0),
	bench.Row("crowd, commands/acq: atomicredis ÷ redislock", crAR("cmds/acq"), crRL("cmds/acq"), "", 0),
	bench.Row("crowd, commands/acq: atomicredis ÷ redsync", crAR("cmds/acq"), crRS("cmds/acq"), "", 0),
	bench.Row("crowd, busiest goroutine's share % (fair 1.56): atomicredis", crAR("busiest%"), none, "", 0),
	bench.Row("crowd, busiest goroutine's share %: redislock", crRL("busiest%"), none, "", 0),
	bench.Row("crowd, busiest goroutine's share %: redsync", crRS("busiest%"), none, "", 0),
	bench.Row("crowd, goroutines with no acquisition in the window: redislock", crRL("idle-clients"), none, "", 0),
	bench.Row("crowd, goroutines with no acquisition in the window: redsync", crRS("idle-clients"), none, "", 0),
	bench.Row("crowd, waits that ran out per acquisition: redsync", crRS("gave-up/acq"), none, "", 0),
}

// ---------------------------------------------------------------------------
// The settings

// printSettings writes each contender's version and fixed settings.
func printSettings(w io.Writer) {
	versions := modVersions()
	gr := newGoredisClient()
	o := gr.Options()
	gr.Close()
	lines := []string{
		fmt.Sprintf("atomicredis %s on a redigo %s pool (MaxIdle %d, MaxActive 0: unbounded, no dial options): TryLock / Lock(Wait %v, FIFO queue), TTL %v; Unlock",
			versions["github.com/atomicredis/atomicredis"], versions["github.com/gomodule/redigo"], redigoMaxIdle, waitFor, lease),
		fmt.Sprintf("bsm/redislock %s on go-redis %s (its defaults: PoolSize %d, MinIdleConns %d, ReadTimeout %v, WriteTimeout %v, protocol RESP%d): Obtain(ttl %v) with no retry (NoRetry) to try; to wait, LinearBackoff(%v) under a %v deadline; Release",
			versions["github.com/bsm/redislock"], versions["github.com/redis/go-redis/v9"], o.PoolSize, o.MinIdleConns, o.ReadTimeout, o.WriteTimeout, o.Protocol, lease, retryEvery, waitFor),
		fmt.Sprintf("go-redsync/redsync/v4 %s on its redigo pool (one node, quorum 1; the pool as atomicredis's): NewMutex(WithExpiry(%v)) per acquisition; TryLockContext to try; to wait, LockContext with WithTries(%d), WithRetryDelay(%v) (its defaults: 32 tries, 50-250 ms); UnlockContext",
			versions["github.com/go-redsync/redsync/v4"], lease, redsyncTries, retryEvery),
		fmt.Sprintf("the floor: SET key token NX PX %d, then DEL key, each on a connection from a redigo pool as atomicredis's (GetContext), sent with the context (redis.DoContext)",
			lease.Milliseconds()),
		fmt.Sprintf("every caller's context: context.Background(); crowds: %d goroutines, no hold, window %v; %d goroutines holding %v, window %v; each after %v + a turn of the queue",
			hotClients, hotWindow, crowdClients, crowdHold, crowdWindow, warmup),
	}
	for _, l := range lines {
		fmt.Fprintln(w, "settings: "+l)
	}
}

// modVersions reads the versions this module builds with from its go.mod
// (go test runs in the module's directory; a test binary carries no
// module versions of its own): path → version, or "this tree (replace
// ../)" for a module replaced by a directory.
func modVersions() map[string]string {
	versions := map[string]string{}
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return versions
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		switch {
		case len(f) == 4 && f[0] == "replace" && f[2] == "=>":
			versions[f[1]] = "this tree (replace " + f[3] + ")"
		case len(f) >= 2 && strings.HasPrefix(f[1], "v") && versions[f[0]] == "":
			versions[f[0]] = f[1]
		}
	}
	return versions
}

// The rows name only benchmarks and units that the experiments report.
func TestTargetsNameWhatRuns(t *testing.T) {
	benches := map[string][]string{
		"BenchmarkUncontended": {"ns/op", "ops/s", "allocs/op", "cmds/op", "srv-us/op", "cpu-us/op", "client-us/op"},
		"BenchmarkHotName":     {"ns/op", "acq/s", "busiest%", "idle-clients", "gave-up/acq", "cmds/acq", "srv-us/acq", "cpu-us/acq", "client-us/acq"},
		"BenchmarkCrowd":       {"ns/op", "acq/s", "busiest%", "idle-clients", "gave-up/acq", "cmds/acq", "srv-us/acq", "cpu-us/acq", "client-us/acq"},
	}
	for _, r := range targets {
		for _, side := range [][2]string{r.Num, r.Den} {
			if side[0] == "" {
				continue
			}
			fn, who, _ := strings.Cut(side[0], "/")
			if !slices.Contains([]string{"atomicredis", "redislock", "redsync", "floor"}, who) || !slices.Contains(benches[fn], side[1]) {
				t.Errorf("row %q: %s %s is not reported", r.What, side[0], side[1])
			}
		}
	}
}

// The settings name the versions built with.
func TestModVersions(t *testing.T) {
	v := modVersions()
	for _, path := range []string{"github.com/bsm/redislock", "github.com/go-redsync/redsync/v4", "github.com/redis/go-redis/v9", "github.com/gomodule/redigo"} {
		if !strings.HasPrefix(v[path], "v") {
			t.Errorf("%s: version %q", path, v[path])
		}
	}
	if got := v["github.com/atomicredis/atomicredis"]; got != "this tree (replace ../)" {
		t.Errorf("atomicredis: %q", got)
	}
}
