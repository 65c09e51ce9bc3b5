package peers

// The main job's way of measuring (../verdict_test.go), for contenders
// from other modules: an experiment runs its contenders in interleaved
// rounds (A B C, then C B A, ...), keeps every round's figures, reports
// each contender's medians as a sub-benchmark, and files the rounds for
// the verdict table that TestMain prints. A row of that table is the
// median of the per-round ratios of two contenders, with the rounds'
// range and a verdict against its goal: met or MISSED when every round
// falls on the same side, within noise when the range straddles it, not
// measured (and why) when a contender could not measure. On redis-server
// the server's own command time (INFO commandstats) and CPU (INFO cpu)
// per operation stand beside the wall clock.
//
// One difference from the main job: a round of short operations (the
// uncontended cycle) visits each contender several times, the order
// reversed at every visit, and sums the visits (experiment.passes), so
// that a load that comes and goes within a round meets them alike.
//
// The code is a smaller copy of the main job's: those files are tests of
// package atomicredis, which another module cannot import.

import (
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
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gomodule/redigo/redis"
)

// rounds is how many interleaved rounds an experiment runs, as in the
// main job: 3 at -benchtime 300x (CI) or at the default 1s, more as
// -benchtime grows (Nx: N/100; a duration: 3 per second), at most 30; on
// miniredis a third of that.
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

// budget is what one contender does in one round: n operations
// (-benchtime Nx, shared by the rounds), or as many as fit in d (a
// duration, likewise shared).
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

// experiment is one benchmark's contenders, measured in interleaved rounds.
type experiment struct {
	b      *testing.B
	admin  redis.Conn // INFO, on a connection of its own
	rounds int
	budget budget // of one contender in one round
	passes int    // visits to each contender in a round (run); 0 is 1
	sides  []side
	figs   map[string]map[string][]float64 // contender → unit → one value per round (NaN where a round had none)
	units  []string
	show   []string          // the units the sub-benchmarks print (the table has them all)
	ops    map[string]int    // operations measured, by contender
	why    map[string]string // contenders that could not measure, and why
}

type side struct {
	name  string
	round func(r *round) error
}

func newExperiment(b *testing.B) *experiment {
	b.Helper()
	admin, err := redis.Dial("tcp", benchAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close() })
	return &experiment{b: b, admin: admin, rounds: rounds(), figs: map[string]map[string][]float64{},
		ops: map[string]int{}, why: map[string]string{}}
}

func (x *experiment) add(name string, round func(r *round) error) {
	x.sides = append(x.sides, side{name, round})
}

// run runs the rounds, then reports one sub-benchmark per contender, in
// the order added, with the medians of its rounds. A round of an
// experiment with passes > 1 visits the contenders that many times, each
// time with that share of its budget, the order reversed at every visit
// (A B C, C B A, A B C, ...): on a machine whose load moves within a
// round, contenders whose operations are short meet it alike.
func (x *experiment) run() {
	x.b.Helper()
	if x.budget == (budget{}) {
		x.budget = roundBudget(x.rounds)
	}
	passes := max(x.passes, 1)
	if x.budget.n > 0 {
		passes = min(passes, max(x.budget.n/10, 1)) // at least 10 operations a visit
	}
	share := budget{n: x.budget.n / passes, d: x.budget.d / time.Duration(passes)}
	if x.budget.n > 0 {
		share.n = max(share.n, 1)
	}
	for i := 0; i < x.rounds; i++ {
		rs := map[string]*round{}
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
					r = &round{x: x, name: s.name, i: i, budget: share, figs: map[string]float64{}}
					rs[s.name] = r
				}
				r.pass, r.last = p, p == passes-1
				err := s.round(r)
				var cm *cannotMeasure
				switch {
				case errors.As(err, &cm):
					x.why[s.name] = fmt.Sprintf("%s (round %d)", cm.why, i+1)
					delete(x.figs, s.name)
				case err != nil:
					// A failure to measure is the row's verdict, not the
					// run's: the table says what went wrong.
					x.why[s.name] = fmt.Sprintf("failed in round %d: %v", i+1, err)
					delete(x.figs, s.name)
				case r.last:
					x.keep(s.name, i, r.figs)
				}
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
	sort.Strings(x.units)
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

// report runs one sub-benchmark per contender reporting the medians of
// its rounds, and files every round for the verdict table. Its iteration
// count is the operations measured, not one of Go's ramp-up.
func (x *experiment) report() {
	for _, s := range x.sides {
		x.b.Run(s.name, func(b *testing.B) {
			if why, out := x.why[s.name]; out {
				notMeasured(b.Name(), why)
				b.Skip("cannot measure: " + why)
			}
			for _, unit := range x.units {
				if x.show != nil && !slices.Contains(x.show, unit) {
					continue
				}
				if v := median(finite(x.figs[s.name][unit])); !math.IsNaN(v) {
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
// reports, after this call with b.N n (as in the main job).
func lastRun(n int) bool {
	if f := flag.Lookup("test.benchtime"); f != nil {
		if x, ok := strings.CutSuffix(f.Value.String(), "x"); ok {
			v, err := strconv.Atoi(x)
			return err == nil && n == v
		}
	}
	return n >= 1e9
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

// cannotMeasure is a round's error that says the contender cannot measure
// here (a machine too busy, a server without what it needs).
type cannotMeasure struct{ why string }

func (c *cannotMeasure) Error() string { return "cannot measure: " + c.why }

func notMeasurable(format string, args ...any) error {
	return &cannotMeasure{fmt.Sprintf(format, args...)}
}

// round is one contender's turn in one round: one call of its round
// function per pass, with the same round.
type round struct {
	x      *experiment
	name   string
	i      int
	pass   int    // this visit, from 0
	last   bool   // the round's last visit: its figures are kept after it
	budget budget // what the contender may do in this visit
	figs   map[string]float64
	acc    tally // what the visits so far measured (round.cycles)
}

func (r *round) add(unit string, v float64) { r.figs[unit] = v }

func (r *round) did(n int) { r.x.ops[r.name] += n }

// read takes the server's counts through the experiment's admin
// connection.
func (r *round) read() (serverCounts, error) { return readServer(r.x.admin) }

// ---------------------------------------------------------------------------
// Measuring the server

// serverCounts is what the server had done at one moment: calls and
// microseconds by command (INFO commandstats; the commands scripts call
// are counted too, and inside their script's time) and CPU seconds, user
// + sys (INFO cpu). On miniredis only the time is known.
type serverCounts struct {
	at     time.Time
	calls  map[string]float64
	usec   map[string]float64
	cpu    float64
	client float64 // this process's CPU seconds (processCPU)
}

func readServer(admin redis.Conn) (serverCounts, error) {
	s := serverCounts{at: time.Now(), calls: map[string]float64{}, usec: map[string]float64{}, client: processCPU()}
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
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
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
	wall time.Duration
	cmds float64 // commands the clients sent (the contender's own commands)
	usec float64 // the server's time in them, scripts' inner commands included
	cpu  float64 // server CPU seconds
	// the clients' CPU seconds: this process's, between the two readings
	// (the INFO calls around a round's operations included)
	client float64
}

// to is the usage from s to t of a client that sends the commands sent
// (commandstats names: "evalsha", "set", ...) and no other: commands its
// scripts call are inside their script's time, and the admin's INFO, the
// go-redis handshake and the like are left out.
func (s serverCounts) to(t serverCounts, sent []string) usage {
	u := usage{wall: t.at.Sub(s.at), cpu: t.cpu - s.cpu, client: t.client - s.client}
	for _, cmd := range sent {
		u.cmds += t.calls[cmd] - s.calls[cmd]
		u.usec += t.usec[cmd] - s.usec[cmd]
	}
	return u
}

// serverFigures records the server's figures per operation (per
// acquisition: suffix "acq") of a round on redis-server, and the clients'
// CPU beside them (on miniredis, the clients' process is the server's).
func (r *round) serverFigures(u usage, ops float64, suffix string) {
	if benchMini {
		return
	}
	r.add("cmds/"+suffix, u.cmds/ops)
	r.add("srv-us/"+suffix, u.usec/ops)
	r.add("cpu-us/"+suffix, u.cpu*1e6/ops)
	r.add("client-us/"+suffix, u.client*1e6/ops)
}

// ---------------------------------------------------------------------------
// The table

// benchRounds holds every round's figures of each sub-benchmark, by
// benchmark name and unit; why the sub-benchmarks that could not measure.
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

// A target is a row of the table: num ÷ den, round by round, against op
// want (">=" or "<="); a row without den judges num alone; a row without
// op is reported, not judged. Both sides come from one experiment, so
// that its rounds pair up.
type target struct {
	what     string
	num, den [2]string // benchmark, unit
	op       string
	want     float64
}

// printVerdicts writes the verdict table for the rows whose benchmarks ran.
func printVerdicts(w io.Writer, rows []target) {
	benchRounds.Lock()
	defer benchRounds.Unlock()
	if len(benchRounds.m) == 0 && len(benchRounds.why) == 0 {
		return
	}
	fmt.Fprintf(w, "\nverdict on %s, %d CPUs%s, %s\n", benchServer, runtime.NumCPU(), loadAverage(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "each row: the median over interleaved rounds of the first figure ÷ the second, the rounds' range, the goal;\n")
	fmt.Fprintf(w, "below it the medians of both sides%s\n", map[bool]string{false: ", with the server's command time and CPU and the clients' CPU per operation", true: ""}[benchMini])
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

// tableLine lays out a row's columns (counting runes: ÷, ≥, –).
func tableLine(what, median, spread, goal, verdict string) string {
	pad := func(s string, w int, right bool) string {
		fill := strings.Repeat(" ", max(w-utf8.RuneCountInString(s), 0))
		if right {
			return fill + s
		}
		return s + fill
	}
	return pad(what, 66, false) + " " + pad(median, 9, true) + "  " + pad(spread, 19, false) + " " + pad(goal, 8, true) + "  " + verdict
}

// verdictRow renders one row and the line under it (the figures behind
// it, or why it was not measured); ok is false when its benchmarks did not
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

// rowFigures is the medians behind a two-sided row: its own unit, then
// the server's command time and CPU and the clients' CPU per operation of
// both sides.
func rowFigures(r target) string {
	if r.den[0] == "" {
		return ""
	}
	get := func(bench, unit string) (float64, bool) {
		v := median(finite(benchRounds.m[bench][unit]))
		return v, !math.IsNaN(v)
	}
	n, _ := get(r.num[0], r.num[1])
	d, _ := get(r.den[0], r.den[1])
	parts := []string{fmt.Sprintf("%s %s ÷ %s", r.num[1], fmtFigure(n), fmtFigure(d))}
	if r.num[1] != r.den[1] {
		parts[0] = fmt.Sprintf("%s %s ÷ %s %s", fmtFigure(n), r.num[1], fmtFigure(d), r.den[1])
	}
	var units []string
	for unit := range benchRounds.m[r.num[0]] {
		if unit != r.num[1] && (strings.HasPrefix(unit, "srv-us/") || strings.HasPrefix(unit, "cpu-us/") || strings.HasPrefix(unit, "client-us/")) {
			units = append(units, unit)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(units))) // srv-, cpu-, client-
	for _, unit := range units {
		n, ok1 := get(r.num[0], unit)
		d, ok2 := get(r.den[0], unit)
		if ok1 && ok2 {
			parts = append(parts, fmt.Sprintf("%s %s ÷ %s", unit, fmtFigure(n), fmtFigure(d)))
		}
	}
	return strings.Join(parts, " · ")
}

// fmtRatio prints a ratio near 1 with three decimals, where 1.00 would
// hide a miss.
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

// loadAverage is ", load average x y z" from /proc/loadavg, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return ", load average " + strings.Join(f[:3], " ")
	}
	return ""
}

// The table's arithmetic on fixed rounds: the median of the rounds'
// ratios, their range, and the verdict each range earns.
func TestVerdictRows(t *testing.T) {
	benchRounds.Lock()
	saved, savedWhy := benchRounds.m, benchRounds.why
	benchRounds.m = map[string]map[string][]float64{
		"BenchmarkT/a": {"ops/s": {100, 100, 100}, "x": {1, 2, 3}},
		"BenchmarkT/b": {"ops/s": {50, 90, 200}},
	}
	benchRounds.why = map[string]string{"BenchmarkT/c": "failed in round 2: boom"}
	benchRounds.Unlock()
	defer func() {
		benchRounds.Lock()
		benchRounds.m, benchRounds.why = saved, savedWhy
		benchRounds.Unlock()
	}()
	row := func(num, den string, op string, want float64) target {
		return target{"t", [2]string{num, "ops/s"}, [2]string{den, "ops/s"}, op, want}
	}
	for _, c := range []struct {
		row        target
		want, also string
	}{
		// a ÷ b by round: 2, 1.111, 0.5; their median 1.111
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
	if _, below, _ := verdictRow(row("BenchmarkT/a", "BenchmarkT/c", ">=", 1)); below != "T/c: failed in round 2: boom" {
		t.Errorf("not measured: %q", below)
	}
	if _, _, ok := verdictRow(row("BenchmarkT/a", "BenchmarkT/none", ">=", 1)); ok {
		t.Error("a row whose benchmark did not run is shown")
	}
}

// tally sums what a round's visits measured.
type tally struct {
	u       usage
	ops     int
	mallocs uint64
}

func (t *tally) add(u usage, ops int, mallocs uint64) {
	t.u.wall += u.wall
	t.u.cmds += u.cmds
	t.u.usec += u.usec
	t.u.cpu += u.cpu
	t.u.client += u.client
	t.ops += ops
	t.mallocs += mallocs
}
