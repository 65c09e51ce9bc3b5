// Package bench is how the benchmarks of atomicredis measure, shared by
// the root package's benchmarks and by the peers module's: experiments
// in interleaved rounds, the server's own figures, and the verdict table
// printed after a run. It imports nothing of atomicredis.
//
// A benchmark is an experiment: its contenders (the Lua script, the book's
// WATCH code, a peer library, ...) run in interleaved rounds, A B C then
// C B A, so that a machine that speeds up or slows down meets them alike,
// and every round's figures are kept. A row of the table (Target)
// compares two figures round by round: it shows the median of the rounds'
// ratios, their range (min–max), and a verdict: "met" or "MISSED" when
// every round falls on the same side of the goal, "within noise" when the
// range straddles it, "not measured" (with why) when a contender could not
// measure here; a goal is a claim of the library, a target not yet
// reached (Target.Aim: "target: not yet" where a claim would be MISSED),
// or the bound Redis allows (Target.Bounded). Every row is shown, whatever
// it measured. Every round prints a line of progress (Progressf), and a
// ticker says what runs after Quiet of silence. Beside the wall-clock
// figures a row shows, on
// redis-server, the server's own: command time (INFO commandstats) and CPU
// (INFO cpu) per operation, and the clients' CPU where it was measured.
//
// A new comparison takes a few lines:
//
//	func BenchmarkHot(b *testing.B) {
//		x := bench.NewExperiment(b, bench.NewEnv(b, 16))
//		x.Rounds = max(x.Rounds, 5) // rounds of operations are cheap
//		x.AddOps("lua", func(i int) error { ... one operation ... })
//		x.AddOps("watch", func(i int) error { ... })
//		x.Run() // rounds, then BenchmarkHot/lua and BenchmarkHot/watch with the medians
//	}
//
//	var rows = []bench.Target{bench.Row("hot name: lua speed ÷ watch",
//		[2]string{"BenchmarkHot/watch", "ns/op"}, [2]string{"BenchmarkHot/lua", "ns/op"}, ">=", 1.4)}
//
// AddOps times one operation after another for the round's budget
// (-benchtime shared by the rounds); Add takes a round of any shape (a
// crowd of clients, a latency sample), which records its figures with
// Round.Add, and may time work with Round.Timed.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Rounds and budgets

// Rounds is how many interleaved rounds an experiment runs: 3 at
// -benchtime 300x (CI) or at the default 1s, more as -benchtime grows (Nx:
// N/100; a duration: 3 per second), at most 30. On miniredis, whose
// figures only show that the benchmarks run, a third of that.
func Rounds() int {
	n := 3
	if f := flag.Lookup("test.benchtime"); f != nil {
		s := f.Value.String()
		if x, ok := strings.CutSuffix(s, "x"); ok {
			if v, err := strconv.Atoi(x); err == nil {
				n = v / 100
			}
		} else if d, err := time.ParseDuration(s); err == nil {
			n = int(3 * d.Seconds())
		}
	}
	n = min(max(n, 3), 30)
	if chosen.Mini {
		n = max(n/3, 1)
	}
	return n
}

// Budget is how much one contender does in one round: N operations
// (-benchtime Nx: N in all, shared by the rounds), or as many as fit in D
// (-benchtime as a duration, likewise shared).
type Budget struct {
	N int
	D time.Duration
}

// RoundBudget is one contender's budget in each of rounds rounds.
func RoundBudget(rounds int) Budget {
	if f := flag.Lookup("test.benchtime"); f != nil {
		s := f.Value.String()
		if x, ok := strings.CutSuffix(s, "x"); ok {
			if v, err := strconv.Atoi(x); err == nil {
				return Budget{N: max(v/rounds, 1)}
			}
		} else if d, err := time.ParseDuration(s); err == nil {
			return Budget{D: d / time.Duration(rounds)}
		}
	}
	return Budget{D: time.Second / time.Duration(rounds)}
}

// More reports whether a contender that has done done operations since
// start has budget left; it always allows one.
func (bu Budget) More(done int, start time.Time) bool {
	if bu.N > 0 {
		return done < bu.N
	}
	return done == 0 || time.Since(start) < bu.D
}

// Ops calls op (i counts from 0) one call after another while bu has
// budget left, and returns how many calls returned nil; an error ends it.
func (bu Budget) Ops(op func(i int) error) (int, error) {
	start := time.Now()
	i := 0
	for ; bu.More(i, start); i++ {
		if err := op(i); err != nil {
			return i, err
		}
	}
	return i, nil
}

// share is one of passes visits' part of bu: at least one operation.
func (bu Budget) share(passes int) Budget {
	s := Budget{N: bu.N / passes, D: bu.D / time.Duration(passes)}
	if bu.N > 0 {
		s.N = max(s.N, 1)
	}
	return s
}

// ---------------------------------------------------------------------------
// Experiments

// Experiment is one benchmark's contenders, measured in interleaved rounds.
type Experiment struct {
	B      *testing.B
	Env    *Env     // what Round.Timed reads the server through
	Rounds int      // Rounds() unless set before Run
	Budget Budget   // of one contender in one round: RoundBudget(Rounds) unless set before Run
	Show   []string // the units the sub-benchmarks report (a line holds four); nil: all but cmds/op
	// Passes is how many times a round visits each contender, each time
	// with that share of its budget, the order reversed at every visit
	// (A B C, C B A, A B C, ...): on a machine whose load moves within a
	// round, contenders whose operations are short meet it alike. A round
	// keeps the figures its last visit records (Round.Timed records what
	// all its visits measured). 0 is 1; at most one visit per 10 operations.
	Passes int
	// Tolerant: an error from a round (other than NotMeasurable's) is the
	// contender's verdict, "failed in round N: ...", not the benchmark's
	// failure.
	Tolerant bool

	sides []side
	figs  figures           // contender → unit → one value per round (NaN where a round had none)
	units []string          // every unit: wall clock, the benchmark's own, the server's
	ops   map[string]int    // operations measured, by contender
	why   map[string]string // contenders that cannot measure here, and why
}

type side struct {
	name  string
	round func(r *Round) error
}

// NewExperiment is an experiment whose rounds read the server through env.
func NewExperiment(b *testing.B, env *Env) *Experiment {
	b.Helper()
	Doing("%s, setting up", b.Name())
	return &Experiment{B: b, Env: env, Rounds: Rounds(), figs: figures{},
		ops: map[string]int{}, why: map[string]string{}}
}

// Add adds a contender: round runs one round of it (one visit, with
// Passes).
func (x *Experiment) Add(name string, round func(r *Round) error) {
	x.sides = append(x.sides, side{name, round})
}

// AddOps adds a contender whose round calls op (i counts from 0 within the
// visit) one call after another for the round's budget (Round.Measure).
func (x *Experiment) AddOps(name string, op func(i int) error) {
	x.Add(name, func(r *Round) error { return r.Measure(op) })
}

// Skip declares that a contender cannot measure here, and why: it runs no
// round, and the rows that use it say why.
func (x *Experiment) Skip(name, why string) {
	x.Add(name, nil)
	x.why[name] = why
}

// Run runs the rounds, then reports one sub-benchmark per contender, in
// the order added, with the medians of its rounds.
func (x *Experiment) Run() {
	x.B.Helper()
	if x.Budget == (Budget{}) {
		x.Budget = RoundBudget(x.Rounds)
	}
	passes := max(x.Passes, 1)
	if x.Budget.N > 0 {
		passes = min(passes, max(x.Budget.N/10, 1)) // at least 10 operations a visit
	}
	share := x.Budget.share(passes)
	for i := 0; i < x.Rounds; i++ {
		Progressf("%s round %d/%d", x.B.Name(), i+1, x.Rounds)
		rs := map[string]*Round{}
		for p := 0; p < passes; p++ {
			order := slices.Clone(x.sides)
			if (i*passes+p)%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range order {
				if _, out := x.why[s.name]; out {
					continue
				}
				r := rs[s.name]
				if r == nil {
					r = &Round{x: x, Name: s.name, Index: i, Budget: share, figs: map[string]float64{}}
					rs[s.name] = r
				}
				r.Pass, r.Last = p, p == passes-1
				Doing("%s round %d/%d, %s", x.B.Name(), i+1, x.Rounds, s.name)
				x.visit(s, r)
			}
		}
	}
	quietly(x.report)
	Doing("after %s, between benchmarks", x.B.Name())
}

// visit runs one visit of a contender's round and files what it gave.
func (x *Experiment) visit(s side, r *Round) {
	err := s.round(r)
	var cm *cannotMeasure
	switch {
	case errors.As(err, &cm):
		x.why[s.name] = fmt.Sprintf("%s (round %d)", cm.why, r.Index+1)
		delete(x.figs, s.name)
	case err != nil && x.Tolerant:
		// A failure to measure is the row's verdict, not the run's: the
		// table says what went wrong.
		x.why[s.name] = fmt.Sprintf("failed in round %d: %v", r.Index+1, err)
		delete(x.figs, s.name)
	case err != nil && Trouble(err) != "":
		// The machine's trouble, not the library's: the rows say so, and
		// the run goes on.
		x.why[s.name] = fmt.Sprintf("%s (round %d): %v", Trouble(err), r.Index+1, err)
		delete(x.figs, s.name)
	case err != nil:
		notMeasured(x.B.Name()+"/"+s.name, fmt.Sprintf("failed in round %d (its --- FAIL above): %v", r.Index+1, err))
		x.B.Fatalf("%s, round %d: %v", s.name, r.Index+1, err)
	case r.Last:
		x.keep(s.name, r.Index, r.figs)
	}
}

// Trouble says, for an error that tells of the machine rather than of the
// library, what went wrong, in a few words; "" for any other error. The
// benchmarks wait minutes and lease for seconds: a call that runs out of
// time (an Unlock bounded by a release timeout) tells of a machine too
// busy to answer in time; a server that refuses a connection (its
// maxclients), runs out of memory or drops connections tells of the
// server it runs on.
func Trouble(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	has := func(s ...string) bool {
		for _, s := range s {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "a call ran out of time on a busy machine"
	case has("max number of clients reached"):
		return "the server refused a connection (its maxclients)"
	case errors.Is(err, redis.ErrPoolExhausted), has("connection pool exhausted"):
		return "the pool had no connection to give"
	case has("OOM command not allowed"):
		return "the server ran out of memory (its maxmemory)"
	case has("LOADING ", "BUSY "):
		return "the server was busy loading or running a script"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		has("connection refused", "connection reset", "broken pipe"):
		return "a connection to the server failed"
	case errors.As(err, &ne) && ne.Timeout(), has("i/o timeout"):
		return "a read from the server ran out of time on a busy machine"
	}
	return ""
}

// keep files round i's figures of a contender, NaN for a unit it lacks.
func (x *Experiment) keep(name string, i int, figs map[string]float64) {
	for unit := range figs {
		if !slices.Contains(x.units, unit) {
			x.units = append(x.units, unit)
		}
	}
	sort.Slice(x.units, func(a, b int) bool {
		ra, rb := unitRank(x.units[a]), unitRank(x.units[b])
		return ra < rb || ra == rb && x.units[a] < x.units[b]
	})
	if x.figs[name] == nil {
		x.figs[name] = map[string][]float64{}
	}
	for _, unit := range x.units {
		vs := x.figs[name][unit]
		for len(vs) < i {
			vs = append(vs, math.NaN())
		}
		v, ok := figs[unit]
		if !ok {
			v = math.NaN()
		}
		x.figs[name][unit] = append(vs, v)
	}
}

// unitRank orders a sub-benchmark's figures: wall clock first, the
// server's and the clients' CPU last.
func unitRank(unit string) int {
	switch {
	case unit == "ns/op":
		return 0
	case strings.HasPrefix(unit, "srv-us/"), strings.HasPrefix(unit, "cpu-us/"), strings.HasPrefix(unit, "client-us/"):
		return 2
	}
	return 1
}

// report runs one sub-benchmark per contender, reporting the median of its
// rounds for each unit (of a max- figure, the largest: one lost wake-up is
// one too many), and files every round's figures for the verdict table.
// Its iteration count is the operations measured (or the rounds, for an
// experiment that counts none): Go's ramp-up would otherwise print a count
// of its own making.
func (x *Experiment) report() {
	for _, s := range x.sides {
		x.B.Run(s.name, func(b *testing.B) {
			if why, out := x.why[s.name]; out {
				notMeasured(b.Name(), why)
				b.Skip("cannot measure: " + why)
			}
			for _, unit := range x.units {
				if x.Show != nil && !slices.Contains(x.Show, unit) || x.Show == nil && unit == "cmds/op" {
					continue
				}
				vs := x.figs[s.name][unit]
				if v := summary(unit, vs); !math.IsNaN(v) {
					b.ReportMetric(v, unit)
				}
			}
			fileRounds(b.Name(), x.figs[s.name])
			if lastRun(b.N) {
				n := x.Rounds
				if x.ops[s.name] > 0 {
					n = x.ops[s.name]
				}
				//lint:ignore SA3001 nothing runs b.N times here: the count printed is what the medians were measured over
				b.N = n
			}
		})
	}
}

// lastRun reports whether Go is done calling a sub-benchmark that only
// reports, after this call with b.N n: its ramp-up ends at -benchtime's
// count (Nx), or, for a duration, at the cap of 1e9 iterations that a
// benchmark taking no time reaches. Go prints the b.N of the last call.
// (Setting b.N in an earlier call would derail the ramp-up.)
func lastRun(n int) bool {
	if f := flag.Lookup("test.benchtime"); f != nil {
		if x, ok := strings.CutSuffix(f.Value.String(), "x"); ok {
			v, err := strconv.Atoi(x)
			return err == nil && n == v
		}
	}
	return n >= 1e9
}

// summary is the median of vs (the largest of a max- figure), NaNs left out.
func summary(unit string, vs []float64) float64 {
	vs = finite(vs)
	if len(vs) == 0 {
		return math.NaN()
	}
	if strings.HasPrefix(unit, "max-") {
		return slices.Max(vs)
	}
	return median(vs)
}

func finite(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

// median of vs; NaN when empty.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	sort.Float64s(s)
	switch {
	case len(s) == 0:
		return math.NaN()
	case len(s)%2 == 1:
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// figures are an experiment's results: contender → unit → one value per
// round.
type figures map[string]map[string][]float64

// cannotMeasure is a round's error that says the contender cannot measure
// here (a machine too busy for the round to finish in its time, a server
// without what it needs), not that something is wrong: the rows that use
// it say why, and the run goes on. So does an error of the machine
// rather than of the library (Trouble: a call out of time, a server that
// refuses a connection); any other error fails the benchmark (unless the
// experiment is Tolerant).
type cannotMeasure struct{ why string }

func (c *cannotMeasure) Error() string { return "cannot measure: " + c.why }

// NotMeasurable is a round's error saying that its contender cannot
// measure here, and why (fmt.Sprintf's format and args).
func NotMeasurable(format string, args ...any) error {
	return &cannotMeasure{fmt.Sprintf(format, args...)}
}

// ---------------------------------------------------------------------------
// Rounds

// Round is one contender's turn in one round: one call of its round
// function per visit (Experiment.Passes), with the same Round.
type Round struct {
	Name   string // the contender's
	Index  int    // the round's number, from 0
	Pass   int    // this visit, from 0
	Last   bool   // the round's last visit: its figures are kept after it
	Budget Budget // what the contender may do in this visit
	Acc    Tally  // what the visits so far measured (Timed's, or the round function's own)

	x    *Experiment
	figs map[string]float64
}

// Add records one of the round's figures.
func (r *Round) Add(unit string, v float64) { r.figs[unit] = v }

// Did counts n operations measured, for the sub-benchmark's iteration
// count.
func (r *Round) Did(n int) { r.x.ops[r.Name] += n }

// Read takes the server's counts through the experiment's Env.
func (r *Round) Read() (ServerCounts, error) { return r.x.Env.Read() }

// Timed runs work, which does operations within budget and returns how
// many, and records ns/op (wall clock), cmds/op (commands clients sent)
// and, on redis-server, the server's srv-us/op (its time in those
// commands: INFO commandstats) and cpu-us/op (INFO cpu), from readings
// taken just before and after, summed over the round's visits so far. It
// returns what this visit measured, for the caller's own figures.
func (r *Round) Timed(work func(bu Budget) (ops int, err error)) (Usage, int, error) {
	s1, err := r.Read()
	if err != nil {
		return Usage{}, 0, err
	}
	ops, err := work(r.Budget)
	if err != nil {
		return Usage{}, 0, err
	}
	s2, err := r.Read()
	if err != nil {
		return Usage{}, 0, err
	}
	if ops == 0 {
		return Usage{}, 0, NotMeasurable("no operation completed")
	}
	r.Did(ops)
	u := s1.To(s2)
	r.Acc.Add(u, ops, 0)
	all, n := r.Acc.U, float64(r.Acc.Ops)
	r.Add("ns/op", float64(all.Wall.Nanoseconds())/n)
	r.Add("cmds/op", all.Cmds/n)
	if !chosen.Mini {
		r.Add("srv-us/op", all.Usec/n)
		r.Add("cpu-us/op", all.CPU*1e6/n)
	}
	return u, ops, nil
}

// Measure is Timed for op called one call after another on this goroutine.
func (r *Round) Measure(op func(i int) error) error {
	_, _, err := r.Timed(func(bu Budget) (int, error) { return bu.Ops(op) })
	return err
}

// ServerFigures records, on redis-server, the server's figures per
// operation of u over ops operations (cmds/, srv-us/ and cpu-us/ with the
// suffix: "op", "acq", ...) and the clients' CPU beside them (client-us/;
// on miniredis the clients' process is the server's, and none is
// recorded).
func (r *Round) ServerFigures(u Usage, ops float64, suffix string) {
	if chosen.Mini {
		return
	}
	r.Add("cmds/"+suffix, u.Cmds/ops)
	r.Add("srv-us/"+suffix, u.Usec/ops)
	r.Add("cpu-us/"+suffix, u.CPU*1e6/ops)
	r.Add("client-us/"+suffix, u.Client*1e6/ops)
}

// Tally sums what a round's visits measured.
type Tally struct {
	U       Usage
	Ops     int
	Mallocs uint64
}

// Add adds one visit's usage, operations and allocations.
func (t *Tally) Add(u Usage, ops int, mallocs uint64) {
	t.U.Wall += u.Wall
	t.U.Cmds += u.Cmds
	t.U.Calls += u.Calls
	t.U.Usec += u.Usec
	t.U.CPU += u.CPU
	t.U.Client += u.Client
	t.Ops += ops
	t.Mallocs += mallocs
}

// ErrRetry is an op's failed try, not an operation (Parallel).
var ErrRetry = errors.New("try again")

// Parallel runs clients goroutines that together complete the budget's
// operations (op returns nil), and returns how many they completed; after
// ErrRetry a client pauses 1 ms (the book's retry pause) and tries again.
// Any other error ends the round.
func Parallel(bu Budget, clients int, op func(client int) error) (int, error) {
	var claimed, done atomic.Int64
	var failed atomic.Bool
	start := time.Now()
	claim := func() bool {
		if failed.Load() {
			return false
		}
		if bu.N > 0 {
			return claimed.Add(1) <= int64(bu.N)
		}
		return done.Load() == 0 || time.Since(start) < bu.D
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for claim() {
				err := op(c)
				for errors.Is(err, ErrRetry) {
					time.Sleep(time.Millisecond)
					err = op(c)
				}
				if err != nil {
					failed.Store(true)
					errs <- err
					return
				}
				done.Add(1)
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	return int(done.Load()), <-errs
}
