package atomicredis

// The verdict table that TestMain prints after a benchmark run, and the
// experiments that feed it.
//
// A benchmark is an experiment: its contenders (the Lua script, the book's
// WATCH code, v1's polling, ...) run in interleaved rounds, A B C then
// C B A, so that a machine that speeds up or slows down meets them alike,
// and every round's figures are kept. A row of the table compares two
// figures round by round: it shows the median of the rounds' ratios, their
// range (min–max), and a verdict: "met" or "MISSED" when every round falls
// on the same side of the goal, "within noise" when the range straddles
// it, "not measured" (with why) when a contender could not measure here.
// Beside the wall-clock figures a row shows, on redis-server, the server's
// own: command time (INFO commandstats) and CPU (INFO cpu) per operation.
//
// A new comparison takes a few lines:
//
//	func BenchmarkHot(b *testing.B) {
//		x := newExperiment(b)
//		x.rounds = max(x.rounds, opRounds()) // rounds of operations are cheap: at least 5
//		e := x.env.engine()                  // on x.env.pool, in x.env.ns
//		x.addOps("lua", func(i int) error { ... one operation ... })
//		x.addOps("watch", func(i int) error { ... })
//		x.run() // rounds, then BenchmarkHot/lua and BenchmarkHot/watch with the medians
//	}
//
//	func init() {
//		targets = append(targets, target{"hot name: lua speed ÷ watch",
//			[2]string{"BenchmarkHot/watch", "ns/op"}, [2]string{"BenchmarkHot/lua", "ns/op"}, ">=", 1.4})
//	}
//
// addOps times one operation after another for the round's budget
// (-benchtime shared by the rounds); add takes a round of any shape (a
// crowd of clients, a latency sample), which records its figures with
// round.add, and may time work with round.timed.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Rounds and budgets

// rounds is how many interleaved rounds an experiment runs: 3 at
// -benchtime 300x (CI) or at the default 1s, more as -benchtime grows (Nx:
// N/100; a duration: 3 per second), at most 30. On miniredis, whose
// figures only show that the benchmarks run, a third of that.
func rounds() int {
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
	if benchMini {
		n = max(n/3, 1)
	}
	return n
}

// budget is how much one contender does in one round: n operations
// (-benchtime Nx: N in all, shared by the rounds), or as many as fit in d
// (-benchtime as a duration, likewise shared).
type budget struct {
	n int
	d time.Duration
}

func roundBudget(rounds int) budget {
	if f := flag.Lookup("test.benchtime"); f != nil {
		s := f.Value.String()
		if x, ok := strings.CutSuffix(s, "x"); ok {
			if v, err := strconv.Atoi(x); err == nil {
				return budget{n: max(v/rounds, 1)}
			}
		} else if d, err := time.ParseDuration(s); err == nil {
			return budget{d: d / time.Duration(rounds)}
		}
	}
	return budget{d: time.Second / time.Duration(rounds)}
}

// more reports whether a contender that has done done operations since
// start has budget left; it always allows one.
func (bu budget) more(done int, start time.Time) bool {
	if bu.n > 0 {
		return done < bu.n
	}
	return done == 0 || time.Since(start) < bu.d
}

// ---------------------------------------------------------------------------
// Experiments

// experiment is one benchmark's contenders, measured in interleaved rounds.
type experiment struct {
	b      *testing.B
	env    *benchEnv
	rounds int    // rounds() unless set before run
	budget budget // of one contender in one round: roundBudget(rounds) unless set before run
	sides  []side
	figs   figures           // contender → unit → one value per round (NaN where a round had none)
	units  []string          // every unit: wall clock, the benchmark's own, the server's
	show   []string          // the units the sub-benchmarks report (a line holds four); nil: all but cmds/op
	ops    map[string]int    // operations measured, by contender
	why    map[string]string // contenders that cannot measure here, and why
}

type side struct {
	name  string
	round func(r *round) error
}

// newExperiment is an experiment on the bench server, with a namespace of
// its own (deleted afterwards) and a pool (x.env.pool) that counts the
// commands it sends.
func newExperiment(b *testing.B) *experiment {
	b.Helper()
	return &experiment{b: b, env: newBenchEnv(b), rounds: rounds(), figs: figures{},
		ops: map[string]int{}, why: map[string]string{}}
}

// add adds a contender: round runs one round of it.
func (x *experiment) add(name string, round func(r *round) error) {
	x.sides = append(x.sides, side{name, round})
}

// addOps adds a contender whose round calls op (i counts from 0 within the
// round) one call after another for the round's budget (round.measure).
func (x *experiment) addOps(name string, op func(i int) error) {
	x.add(name, func(r *round) error { return r.measure(op) })
}

// skip declares that a contender cannot measure here, and why: it runs no
// round, and the rows that use it say why.
func (x *experiment) skip(name, why string) {
	x.add(name, nil)
	x.why[name] = why
}

// run runs the rounds, then reports one sub-benchmark per contender, in
// the order added, with the medians of its rounds.
func (x *experiment) run() {
	x.b.Helper()
	if x.budget == (budget{}) {
		x.budget = roundBudget(x.rounds)
	}
	for i := 0; i < x.rounds; i++ {
		order := slices.Clone(x.sides)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			if _, out := x.why[s.name]; out {
				continue
			}
			r := &round{x: x, name: s.name, i: i, budget: x.budget, figs: map[string]float64{}}
			err := s.round(r)
			var cm *cannotMeasure
			switch {
			case errors.As(err, &cm):
				x.why[s.name] = fmt.Sprintf("%s (round %d)", cm.why, i+1)
				delete(x.figs, s.name)
			case errors.Is(err, context.DeadlineExceeded):
				// The benchmarks wait minutes and lease for seconds: a call
				// that runs out of time (an Unlock bounded by ReleaseTimeout)
				// tells of a machine too busy to answer in time.
				x.why[s.name] = fmt.Sprintf("a call ran out of time on a busy machine (round %d): %v", i+1, err)
				delete(x.figs, s.name)
			case err != nil:
				x.b.Fatalf("%s, round %d: %v", s.name, i+1, err)
			default:
				x.keep(s.name, i, r.figs)
			}
		}
	}
	x.report()
}

// keep files round i's figures of a contender, NaN for a unit it lacks.
func (x *experiment) keep(name string, i int, figs map[string]float64) {
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
// server's last.
func unitRank(unit string) int {
	switch {
	case unit == "ns/op":
		return 0
	case strings.HasPrefix(unit, "srv-us/"), strings.HasPrefix(unit, "cpu-us/"):
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
func (x *experiment) report() {
	for _, s := range x.sides {
		x.b.Run(s.name, func(b *testing.B) {
			if why, out := x.why[s.name]; out {
				notMeasured(b.Name(), why)
				b.Skip("cannot measure: " + why)
			}
			for _, unit := range x.units {
				if x.show != nil && !slices.Contains(x.show, unit) || x.show == nil && unit == "cmds/op" {
					continue
				}
				vs := x.figs[s.name][unit]
				if v := summary(unit, vs); !math.IsNaN(v) {
					b.ReportMetric(v, unit)
				}
			}
			fileRounds(b.Name(), x.figs[s.name])
			if lastRun(b.N) {
				n := x.rounds
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

func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
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
// it say why, and the run goes on. So does an error that wraps
// context.DeadlineExceeded; any other error fails the benchmark.
type cannotMeasure struct{ why string }

func (c *cannotMeasure) Error() string { return "cannot measure: " + c.why }

func notMeasurable(format string, args ...any) error {
	return &cannotMeasure{fmt.Sprintf(format, args...)}
}

// round is one contender's turn in one round.
type round struct {
	x      *experiment
	name   string
	i      int    // the round's number, from 0
	budget budget // what the contender may do in it
	figs   map[string]float64
}

// add records one of the round's figures.
func (r *round) add(unit string, v float64) { r.figs[unit] = v }

// did counts n operations measured, for the sub-benchmark's iteration
// count.
func (r *round) did(n int) { r.x.ops[r.name] += n }

// timed runs work, which does operations within budget and returns how
// many, and records ns/op (wall clock), cmds/op (commands clients sent)
// and, on redis-server, the server's srv-us/op (its time in those
// commands: INFO commandstats) and cpu-us/op (INFO cpu), from readings
// taken just before and after. It returns what it measured, for the
// caller's own figures.
func (r *round) timed(work func(bu budget) (ops int, err error)) (usage, int, error) {
	s1, err := r.x.env.read()
	if err != nil {
		return usage{}, 0, err
	}
	ops, err := work(r.budget)
	if err != nil {
		return usage{}, 0, err
	}
	s2, err := r.x.env.read()
	if err != nil {
		return usage{}, 0, err
	}
	if ops == 0 {
		return usage{}, 0, notMeasurable("no operation completed")
	}
	r.did(ops)
	u := s1.to(s2)
	r.add("ns/op", float64(u.wall.Nanoseconds())/float64(ops))
	r.add("cmds/op", u.cmds/float64(ops))
	if !benchMini {
		r.add("srv-us/op", u.usec/float64(ops))
		r.add("cpu-us/op", u.cpu*1e6/float64(ops))
	}
	return u, ops, nil
}

// measure is timed for op called one call after another on this goroutine.
func (r *round) measure(op func(i int) error) error {
	_, _, err := r.timed(func(bu budget) (int, error) {
		start := time.Now()
		i := 0
		for ; bu.more(i, start); i++ {
			if err := op(i); err != nil {
				return i, err
			}
		}
		return i, nil
	})
	return err
}

// errRetry is an op's failed try, not an operation (parallel).
var errRetry = errors.New("try again")

// parallel runs clients goroutines that together complete the budget's
// operations (op returns nil), and returns how many they completed; after
// errRetry a client pauses 1 ms (the book's retry pause) and tries again.
// Any other error ends the round.
func parallel(bu budget, clients int, op func(client int) error) (int, error) {
	var claimed, done atomic.Int64
	var failed atomic.Bool
	start := time.Now()
	claim := func() bool {
		if failed.Load() {
			return false
		}
		if bu.n > 0 {
			return claimed.Add(1) <= int64(bu.n)
		}
		return done.Load() == 0 || time.Since(start) < bu.d
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for claim() {
				err := op(c)
				for errors.Is(err, errRetry) {
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

// ---------------------------------------------------------------------------
// Measuring the server

// benchEnv is an experiment's setting: a pool whose connections count the
// commands they send, a namespace (deleted afterwards, by benchSetup), and
// an admin connection of its own for INFO.
type benchEnv struct {
	pool  *redis.Pool
	ns    string
	sent  *atomic.Int64
	admin redis.Conn
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	_, ns := benchSetup(b) // the namespace and its cleanup
	env := &benchEnv{ns: ns, sent: new(atomic.Int64)}
	env.pool = &redis.Pool{
		MaxIdle:     2 * crowdClients,
		IdleTimeout: time.Minute,
		Dial: func() (redis.Conn, error) {
			c, err := redis.Dial("tcp", benchAddr)
			if err != nil {
				return nil, err
			}
			return countedConn{c, env.sent}, nil
		},
	}
	admin, err := redis.Dial("tcp", benchAddr)
	if err != nil {
		b.Fatal(err)
	}
	env.admin = admin
	b.Cleanup(func() { env.pool.Close(); admin.Close() })
	return env
}

func (env *benchEnv) engine() *Engine { return New(env.pool, WithNamespace(env.ns)) }

// countedConn counts the commands sent through it.
type countedConn struct {
	redis.Conn
	n *atomic.Int64
}

func (c countedConn) count(cmd string) {
	if cmd != "" { // Do("") only flushes
		c.n.Add(1)
	}
}

func (c countedConn) Do(cmd string, args ...any) (any, error) {
	c.count(cmd)
	return c.Conn.Do(cmd, args...)
}

func (c countedConn) Send(cmd string, args ...any) error {
	c.count(cmd)
	return c.Conn.Send(cmd, args...)
}

func (c countedConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	c.count(cmd)
	return redis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c countedConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	c.count(cmd)
	return redis.DoWithTimeout(c.Conn, d, cmd, args...)
}

func (c countedConn) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(c.Conn, ctx)
}

func (c countedConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.Conn, d)
}

// serverCounts is what the server had done at one moment: calls and
// microseconds by command (INFO commandstats; commands that scripts call
// are counted too, and inside their script's time) and CPU seconds, user +
// sys (INFO cpu). On miniredis only sent is known.
type serverCounts struct {
	at    time.Time
	calls map[string]float64
	usec  map[string]float64
	cpu   float64
	sent  int64 // commands the pool's connections had sent
}

// read takes serverCounts through the admin connection. Its own INFO calls
// are left out of every delta (usage), but not out of the CPU.
func (env *benchEnv) read() (serverCounts, error) { return readServer(env.admin, env.sent.Load()) }

// readServer takes serverCounts through admin, a connection of their own
// to the server measured; sent is the clients' count of commands.
func readServer(admin redis.Conn, sent int64) (serverCounts, error) {
	s := serverCounts{at: time.Now(), sent: sent, calls: map[string]float64{}, usec: map[string]float64{}}
	if benchMini {
		return s, nil
	}
	var info string
	for _, section := range []string{"commandstats", "cpu"} {
		v, err := redis.String(admin.Do("INFO", section))
		if err != nil {
			return s, fmt.Errorf("INFO %s: %w", section, err)
		}
		info += v
	}
	for _, line := range splitLines(info) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			cmd, stats, _ := strings.Cut(rest, ":")
			for _, kv := range strings.Split(stats, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					s.calls[cmd] = f
				case "usec":
					s.usec[cmd] = f
				}
			}
		}
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				s.cpu += f
			}
		}
	}
	return s, nil
}

// usage is what happened between two serverCounts.
type usage struct {
	wall  time.Duration
	cmds  float64 // commands clients sent
	calls float64 // every command the server ran, scripts' included (0 on miniredis)
	usec  float64 // the server's time in the commands clients sent (0 on miniredis)
	cpu   float64 // server CPU seconds (0 on miniredis)
}

// Commands that only clients send: script calls, and blocking pops
// (scripts cannot block).
var (
	scriptCalls  = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}
	blockingPops = map[string]bool{"blpop": true, "brpop": true, "blmove": true, "brpoplpush": true, "blmpop": true}
)

// to is the usage from s to t. The server's commandstats count the commands
// scripts call as well; the ones clients sent are the script calls and
// blocking pops when any script ran (the engine sends nothing else), and
// every command when none did (the book's code). A plain command sent
// beside scripts (the Lua market's ZRANGE) is left out of cmds and usec.
// EXEC's time is that of the commands it ran, which commandstats counts
// under their own names too: usec leaves it out, so that each command's
// time counts once (EXEC's own, about 0.2 µs a queued command, is lost).
// miniredis: the clients' own count.
func (s serverCounts) to(t serverCounts) usage {
	u := usage{wall: t.at.Sub(s.at), cpu: t.cpu - s.cpu}
	if benchMini {
		u.cmds = float64(t.sent - s.sent)
		return u
	}
	var scripts, pops, scriptUsec, popUsec, allUsec float64
	for cmd, n := range t.calls {
		if cmd == "info" { // the admin's
			continue
		}
		d, du := n-s.calls[cmd], t.usec[cmd]-s.usec[cmd]
		u.calls += d
		if cmd != "exec" {
			allUsec += du
		}
		switch {
		case scriptCalls[cmd]:
			scripts, scriptUsec = scripts+d, scriptUsec+du
		case blockingPops[cmd]:
			pops, popUsec = pops+d, popUsec+du
		}
	}
	u.cmds, u.usec = scripts+pops, scriptUsec+popUsec
	if scripts == 0 {
		u.cmds, u.usec = u.calls, allUsec
	}
	return u
}

// ---------------------------------------------------------------------------
// The table

// benchRounds holds every round's figures of each sub-benchmark an
// experiment reported, by benchmark name and unit; benchWhy the
// sub-benchmarks that could not measure, and why.
var benchRounds = struct {
	sync.Mutex
	m   map[string]map[string][]float64
	why map[string]string
}{m: map[string]map[string][]float64{}, why: map[string]string{}}

func fileRounds(bench string, figs map[string][]float64) {
	benchRounds.Lock()
	defer benchRounds.Unlock()
	benchRounds.m[bench] = figs
}

func notMeasured(bench, why string) {
	benchRounds.Lock()
	defer benchRounds.Unlock()
	benchRounds.why[bench] = why
}

// A target is a row of the table: num ÷ den, round by round, against
// op want (">=" or "<="). A row without den judges num alone; a row
// without op is reported, not judged. num and den are
// {benchmark, unit}; every row's figures come from one experiment, so
// that its rounds pair up.
type target struct {
	what     string
	num, den [2]string // benchmark, unit
	op       string    // ">=" or "<="
	want     float64
}

// printVerdicts writes the verdict table for whatever benchmarks ran: the
// rows of targets (report_test.go and init functions), absTargets and
// waitTargets. Rows whose benchmarks did not run are counted, not shown.
func printVerdicts(w io.Writer) {
	benchRounds.Lock()
	defer benchRounds.Unlock()
	if len(benchRounds.m) == 0 && len(benchRounds.why) == 0 {
		return
	}
	rows := append([]target(nil), targets...)
	for _, a := range absTargets {
		rows = append(rows, target{a.what, [2]string{a.bench, a.unit}, [2]string{}, a.op, a.want})
	}
	rows = append(rows, waitTargets...)
	fmt.Fprintf(w, "\nverdict on %s, %d CPUs%s\n", benchServerName(), runtime.NumCPU(), loadAverage())
	fmt.Fprintf(w, "each row: the median over interleaved rounds of the first figure ÷ the second, the rounds' range, the goal;\n")
	fmt.Fprintf(w, "below it the medians of both sides%s\n", map[bool]string{false: ", with the server's command time and CPU per operation", true: ""}[benchMini])
	fmt.Fprintln(w, tableLine("comparison", "median", "range (rounds)", "goal", "verdict"))
	skipped := 0
	for _, r := range rows {
		line, below, ok := verdictRow(r)
		if !ok {
			skipped++
			continue
		}
		fmt.Fprintln(w, line)
		if below != "" {
			fmt.Fprintln(w, "    "+below)
		}
	}
	if skipped > 0 {
		fmt.Fprintf(w, "(%d rows not shown: their benchmarks did not run here)\n", skipped)
	}
}

// tableLine lays out a row's columns (counting runes, not bytes: ÷, ≥, –).
func tableLine(what, median, spread, goal, verdict string) string {
	pad := func(s string, w int, right bool) string {
		fill := strings.Repeat(" ", max(w-utf8.RuneCountInString(s), 0))
		if right {
			return fill + s
		}
		return s + fill
	}
	return pad(what, 56, false) + " " + pad(median, 9, true) + "  " + pad(spread, 19, false) + " " + pad(goal, 8, true) + "  " + verdict
}

// verdictRow renders one row, and the line under it: the figures behind
// it, or why it was not measured; ok is false when its benchmarks did not
// run.
func verdictRow(r target) (line, below string, ok bool) {
	for _, side := range [][2]string{r.num, r.den} {
		if why, out := benchRounds.why[side[0]]; out && side[0] != "" {
			return tableLine(r.what, "", "", "", "not measured"), strings.TrimPrefix(side[0], "Benchmark") + ": " + why, true
		}
	}
	nums, ok := benchRounds.m[r.num[0]][r.num[1]]
	if !ok {
		return "", "", false
	}
	unit, ratios := "", nums
	if r.den[0] != "" {
		dens, ok := benchRounds.m[r.den[0]][r.den[1]]
		if !ok {
			return "", "", false
		}
		unit, ratios = "×", make([]float64, len(nums))
		for i := range nums {
			ratios[i] = math.NaN()
			if i < len(dens) && dens[i] != 0 {
				ratios[i] = nums[i] / dens[i]
			}
		}
	}
	ratios = finite(ratios)
	if len(ratios) == 0 {
		return tableLine(r.what, "", "", "", "not measured"), "no round has both figures", true
	}
	med, lo, hi := median(ratios), slices.Min(ratios), slices.Max(ratios)
	goal, verdict := "—", "reported"
	if r.op != "" {
		goal = fmt.Sprintf("%s %g%s", map[string]string{">=": "≥", "<=": "≤"}[r.op], r.want, unit)
		meets := func(v float64) bool { return r.op == ">=" && v >= r.want || r.op == "<=" && v <= r.want }
		switch {
		case meets(lo) && meets(hi):
			verdict = "met"
		case !meets(lo) && !meets(hi):
			verdict = "MISSED"
		default:
			verdict = "within noise"
		}
	}
	spread := fmt.Sprintf("%s–%s (%d)", fmtRatio(lo, unit), fmtRatio(hi, unit), len(ratios))
	return tableLine(r.what, fmtRatio(med, unit)+unit, spread, goal, verdict), rowFigures(r), true
}

// rowFigures is the medians behind a row: its own units, then the
// server's command time and CPU per operation of both sides where the
// experiment measured them.
func rowFigures(r target) string {
	get := func(bench, unit string) (float64, bool) {
		v := summary(unit, benchRounds.m[bench][unit])
		return v, !math.IsNaN(v)
	}
	n, _ := get(r.num[0], r.num[1])
	if r.den[0] == "" {
		return ""
	}
	d, _ := get(r.den[0], r.den[1])
	parts := []string{fmt.Sprintf("%s %s ÷ %s %s", fmtFigure(n), r.num[1], fmtFigure(d), r.den[1])}
	if r.num[1] == r.den[1] {
		parts[0] = fmt.Sprintf("%s %s ÷ %s", r.num[1], fmtFigure(n), fmtFigure(d))
	}
	if r.num[0] != r.den[0] {
		for _, prefix := range []string{"srv-us/", "cpu-us/"} {
			if strings.HasPrefix(r.num[1], prefix) {
				continue
			}
			for unit := range benchRounds.m[r.num[0]] {
				if !strings.HasPrefix(unit, prefix) {
					continue
				}
				n, ok1 := get(r.num[0], unit)
				d, ok2 := get(r.den[0], unit)
				if ok1 && ok2 {
					parts = append(parts, fmt.Sprintf("%s %s ÷ %s", unit, fmtFigure(n), fmtFigure(d)))
				}
			}
		}
	}
	return strings.Join(parts, " · ")
}

// fmtRatio prints a row's value: a ratio near a goal of 1× with three
// decimals, where 1.00 would hide a miss.
func fmtRatio(v float64, unit string) string {
	if unit == "×" && v >= 0.1 && v < 10 {
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return fmtFigure(v)
}

// fmtFigure prints v with three significant digits, without exponents.
func fmtFigure(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// loadAverage is ", load average x y z" from /proc/loadavg, or "" where
// there is none: a machine shared with other work moves every figure.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return ", load average " + strings.Join(f[:3], " ")
	}
	return ""
}

// benchServerName names the bench server for the verdict table.
func benchServerName() string {
	switch {
	case benchMini:
		return "miniredis (Go's Lua interpreter, not Redis)"
	case os.Getenv("REDIS_ADDR") != "":
		return redisVersion(benchAddr) + " at " + benchAddr + " (REDIS_ADDR)"
	default:
		return "private " + redisVersion(benchAddr)
	}
}

// The table's arithmetic on fixed rounds: the median of the rounds' ratios
// (not the ratio of medians), their range, and the verdict each range
// earns against a goal.
func TestVerdictRows(t *testing.T) {
	benchRounds.Lock()
	saved, savedWhy := benchRounds.m, benchRounds.why
	benchRounds.m = map[string]map[string][]float64{
		"BenchmarkT/a": {"ns/op": {100, 100, 100}, "x": {1, 2, 3}},
		"BenchmarkT/b": {"ns/op": {50, 90, 200}},
	}
	benchRounds.why = map[string]string{"BenchmarkT/c": "too busy (round 2)"}
	benchRounds.Unlock()
	defer func() {
		benchRounds.Lock()
		benchRounds.m, benchRounds.why = saved, savedWhy
		benchRounds.Unlock()
	}()
	row := func(num, den string, op string, want float64) target {
		return target{"t", [2]string{num, "ns/op"}, [2]string{den, "ns/op"}, op, want}
	}
	for _, c := range []struct {
		row        target
		want, also string
	}{
		// a ÷ b by round: 2, 1.111, 0.5; their median 1.111 (the medians' ratio would be 1.111 too, the mean 1.2)
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 0.4), "met", "0.500–2.000 (3)"},
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 3), "MISSED", "1.111×"},
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 1), "within noise", "1.111×"},
		{row("BenchmarkT/a", "BenchmarkT/b", "", 0), "reported", "0.500–2.000 (3)"},
		{target{"t", [2]string{"BenchmarkT/a", "x"}, [2]string{}, "<=", 3}, "met", "1.00–3.00 (3)"},
		{row("BenchmarkT/a", "BenchmarkT/c", ">=", 1), "not measured", ""},
	} {
		line, below, ok := verdictRow(c.row)
		if !ok || !strings.HasSuffix(line, c.want) || !strings.Contains(line, c.also) {
			t.Errorf("%v: %q (%q, %v); want verdict %q with %q", c.row, line, below, ok, c.want, c.also)
		}
	}
	if _, below, _ := verdictRow(row("BenchmarkT/a", "BenchmarkT/c", ">=", 1)); below != "T/c: too busy (round 2)" {
		t.Errorf("not measured: %q", below)
	}
	if _, _, ok := verdictRow(row("BenchmarkT/a", "BenchmarkT/none", ">=", 1)); ok {
		t.Error("a row whose benchmark did not run is shown")
	}
}

// usage counts each command's server time once: EXEC's time holds the
// commands it ran, which commandstats counts under their own names too
// (measured on redis-server 7.0.15: MULTI, 2,000 ZADD, EXEC gave ZADD
// 1,853 µs and EXEC 2,184 µs), and a script's time holds its commands.
func TestUsageCountsEachCommandOnce(t *testing.T) {
	defer func(was bool) { benchMini = was }(benchMini)
	benchMini = false
	at := time.Now()
	counts := func(calls, usec map[string]float64) serverCounts {
		return serverCounts{at: at, calls: calls, usec: usec}
	}
	zero := counts(map[string]float64{}, map[string]float64{})
	book := counts(map[string]float64{"multi": 1, "zadd": 2000, "exec": 1}, map[string]float64{"multi": 1, "zadd": 1853, "exec": 2184})
	if u := zero.to(book); u.usec != 1854 || u.cmds != 2002 {
		t.Errorf("MULTI, 2,000 ZADD, EXEC: %v µs in %v commands; want 1854 µs (EXEC's left out) in 2002", u.usec, u.cmds)
	}
	lua := counts(map[string]float64{"evalsha": 10, "get": 30}, map[string]float64{"evalsha": 100, "get": 9})
	if u := zero.to(lua); u.usec != 100 || u.cmds != 10 {
		t.Errorf("10 EVALSHA calling 30 GET: %v µs in %v commands; want 100 in 10", u.usec, u.cmds)
	}
}
