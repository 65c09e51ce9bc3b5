package peers

// atomicredis against its peers, bsm/redislock (on go-redis),
// go-redsync/redsync/v4 (on its redigo pool) and rueidislock (on its
// rueidis client), and through its goredis adapter on go-redis, on one
// redis-server, in interleaved rounds (internal/bench, as the main job's
// benchmarks):
//
//	go test -run '^$' -bench . -benchtime 3s
//
// BenchmarkUncontended: one goroutine, TryLock + Unlock, against two
// floors through the same redigo pool, with a context: SET NX PX + DEL,
// and SET NX PX + a compare-and-delete script (floor-cad).
// BenchmarkOwnNames: 16 goroutines, each TryLock + Unlock of a name of
// its own, against the same floors.
// BenchmarkHotName: 16 goroutines on one name, unlocking at once.
// BenchmarkCrowd: 64 goroutines on one name, each holding it 10 ms.
// Every contender runs twice in each: with the caller's context, and as
// <name>/cancel, each operation under a fresh cancellable context,
// cancelled after it (an HTTP handler's). atomicredis waits with Lock
// (its FIFO queue); the peers wait as their users do: redislock and
// redsync by retrying, rueidislock until a release in its process or a
// server invalidation wakes it (the settings are printed first).
// TestMain prints the verdict table (targets) after the benchmarks.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/gomodule/redigo/redis"
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

	ownClients   = 16
	hotClients   = 16
	crowdClients = 64
	crowdHold    = 10 * time.Millisecond

	warmup      = 300 * time.Millisecond // before a crowd's window, plus a turn of the queue (clients × hold)
	hotWindow   = time.Second            // a hot-name round's measured window
	crowdWindow = 1500 * time.Millisecond
	// Under -benchtime Nx (CI's brief run) the windows are shorter.
	briefHotWindow   = 500 * time.Millisecond
	briefCrowdWindow = time.Second
	drainTimeout     = 15 * time.Second // bound on a crowd's wind-down
)

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
// The contenders of each experiment, and their contexts

var (
	// lockers are the libraries, in every experiment.
	lockers = []contender{atomicredisC, atomicredisGoredisC, redislockC, redsyncC, rueidislockC}

	// contendersOf are each experiment's contenders: the libraries, and
	// the floors too where a cycle is a try and its unlock.
	contendersOf = map[string][]contender{
		"BenchmarkUncontended": append(slices.Clone(lockers), floorC, floorCADC),
		"BenchmarkOwnNames":    append(slices.Clone(lockers), floorC, floorCADC),
		"BenchmarkHotName":     lockers,
		"BenchmarkCrowd":       lockers,
		"BenchmarkBudget": {rungEmptyC, rungArgsC, rungReadsC, rungLeaseC, rungFenceC, rungOursC,
			rungLeanC, rungOneKeyC, rungXDC, rungX1C, rungMC, rungZC, rungZMC, atomicredisC, redislockC, floorCADC},
	}
)

// A variant is how a contender's operations get their context: the
// caller's, or under "/cancel" (the contender's name + suffix) each
// operation, a try or lock and its unlock, under a fresh
// context.WithCancel of it, cancelled once the unlock returned, as an
// HTTP handler's request context.
type variant struct {
	suffix string
	fresh  bool
}

var variants = []variant{{"", false}, {"/cancel", true}}

// under runs op under the variant's context derived from ctx.
func (v variant) under(ctx context.Context, op func(ctx context.Context) error) error {
	if !v.fresh {
		return op(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return op(ctx)
}

// addSides adds every contender of x's benchmark (contendersOf) to x in
// every variant, in that order ("atomicredis", "atomicredis/cancel",
// "atomicredis-goredis", ...): round is one round of a contender in a
// variant. A round that fails is said at once, in a line of progress.
func addSides(x *bench.Experiment, round func(r *bench.Round, ct contender, l *lib, v variant) error) {
	cts := contendersOf[x.B.Name()]
	libs := setup(x, cts)
	for _, ct := range cts {
		for _, v := range variants {
			x.Add(ct.name+v.suffix, func(r *bench.Round) error {
				err := round(r, ct, libs[ct.name], v)
				if err != nil {
					// Said now: a side no row names would otherwise drop out
					// of the output without a word.
					bench.Progressf("%s/%s%s, round %d: out of this experiment: %v", x.B.Name(), ct.name, v.suffix, r.Index+1, err)
				}
				return err
			})
		}
	}
}

// ---------------------------------------------------------------------------
// The experiments

// BenchmarkUncontended: one goroutine, TryLock + Unlock of one name
// (redislock: Obtain without retry + Release; redsync: TryLockContext +
// UnlockContext; rueidislock: TryWithContext + its CancelFunc), against
// the floors.
func BenchmarkUncontended(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, 5) // rounds of operations are cheap
	x.Passes = 10
	x.Show = []string{"ns/op", "ops/s", "allocs/op", "srv-us/op", "cpu-us/op", "client-us/op"}
	addSides(x, func(r *bench.Round, ct contender, l *lib, v variant) error {
		cycle := tryCycle(l, "bench")
		return cycles(r, ct.sent, 1, func(int) error { return v.under(context.Background(), cycle) })
	})
	x.Run()
}

// BenchmarkOwnNames: 16 goroutines, each TryLock + Unlock of a name of its
// own, against the floors. Under -benchtime Nx each goroutine does about
// N cycles in all, as the uncontended one does.
func BenchmarkOwnNames(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, 5)
	x.Passes = 10
	if x.Budget = bench.RoundBudget(x.Rounds); x.Budget.N > 0 {
		x.Budget.N *= ownClients
	}
	x.Show = []string{"ns/op", "ops/s", "allocs/op", "srv-us/op", "cpu-us/op", "client-us/op"}
	addSides(x, func(r *bench.Round, ct contender, l *lib, v variant) error {
		own := make([]func(ctx context.Context) error, ownClients)
		for c := range own {
			own[c] = tryCycle(l, fmt.Sprintf("own%d", c))
		}
		return cycles(r, ct.sent, ownClients, func(c int) error { return v.under(context.Background(), own[c]) })
	})
	x.Run()
}

// tryCycle is one cycle on name: a try, then its unlock (made once a
// visit, outside the operations that allocs/op counts).
func tryCycle(l *lib, name string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		u, err := l.try(ctx, name)
		if err != nil {
			return err
		}
		return u(ctx)
	}
}

// cycles times op, called by clients goroutines (bench.Parallel; one: one
// call after another) for the visit's budget, after a few untimed calls
// at the round's first visit (connections dialled, scripts loaded), and
// at its last visit records the round's ns/op, ops/s, allocs/op (Go heap
// objects, the client's side) and the server's figures per op, over all
// its visits.
func cycles(r *bench.Round, sent []string, clients int, op func(client int) error) error {
	run := func(bu bench.Budget) (int, error) {
		if clients == 1 {
			return bu.Ops(func(int) error { return op(0) })
		}
		return bench.Parallel(bu, clients, op)
	}
	if r.Pass == 0 {
		if _, err := run(bench.Budget{N: max(20, 2*clients)}); err != nil {
			return err
		}
	}
	s1, err := r.Read()
	if err != nil {
		return err
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	n, err := run(r.Budget)
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
	crowdExperiment(b, hotClients, 0, window(hotWindow, briefHotWindow))
}

// BenchmarkCrowd: 64 goroutines on one name, each holding it 10 ms.
func BenchmarkCrowd(b *testing.B) {
	crowdExperiment(b, crowdClients, crowdHold, window(crowdWindow, briefCrowdWindow))
}

// window is a crowd's measured window: brief under -benchtime Nx, where
// the rounds are counted operations, else long.
func window(long, brief time.Duration) time.Duration {
	if bench.RoundBudget(1).N > 0 {
		return brief
	}
	return long
}

// crowdExperiment runs a crowd of clients goroutines per round for
// atomicredis and each peer, each round on a fresh name.
func crowdExperiment(b *testing.B, clients int, hold, window time.Duration) {
	x := newExperiment(b)
	x.Show = []string{"ns/op", "acq/s", "busiest%", "srv-us/acq", "cpu-us/acq", "client-us/acq"}
	addSides(x, func(r *bench.Round, ct contender, l *lib, v variant) error {
		return crowd(r, ct, l, v, clients, hold, window)
	})
	x.Run()
}

// take is one acquisition: which client, and when its lock call returned.
type take struct {
	client int
	at     time.Time
}

// errStop ends a crowd's client: an error, recorded where it happened.
var errStop = errors.New("stop")

// crowd runs one round: clients goroutines that take the lock (waiting as
// the library waits), hold it for hold, give it back and start again,
// each cycle under the variant's context of the round's. Speed, fairness
// and the server's figures are measured over window, once the crowd is
// in its steady state. A wait that runs out (redsync's tries, redislock's
// deadline) is counted (gave-up/acq) and the client asks again; any other
// error ends the round, and the row says so.
func crowd(r *bench.Round, ct contender, l *lib, v variant, clients int, hold, window time.Duration) error {
	name := fmt.Sprintf("crowd%d-%s%s-%d", clients, ct.name, v.suffix, r.Index)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		stopping atomic.Bool
		gaveUp   atomic.Int64
		waiting  atomic.Int64 // clients in a lock call
		mu       sync.Mutex
		takes    []take
		errs     []error
		wg       sync.WaitGroup
	)
	fail := func(err error) error {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return errStop
	}
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			cycle := func(opCtx context.Context) error {
				waiting.Add(1)
				u, err := l.lock(opCtx, name)
				at := time.Now()
				waiting.Add(-1)
				if errors.Is(err, errNotObtained) {
					gaveUp.Add(1)
					return nil
				}
				if err != nil {
					if ctx.Err() != nil { // the round's end
						return errStop
					}
					return fail(err)
				}
				if hold > 0 && !stopping.Load() {
					time.Sleep(hold)
				}
				mu.Lock()
				takes = append(takes, take{c, at})
				mu.Unlock()
				if err := u(opCtx); err != nil {
					return fail(fmt.Errorf("unlock: %w", err))
				}
				return nil
			}
			for !stopping.Load() {
				if v.under(ctx, cycle) != nil {
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
		n := waiting.Load()
		cancel()
		<-done
		errs = append(errs, bench.NotMeasurable("the crowd took over %v to wind down, %d of %d clients still in their lock call", drainTimeout, n, clients))
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
