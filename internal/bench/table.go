package bench

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// benchRounds holds every round's figures of each sub-benchmark an
// experiment reported, by benchmark name and unit; why the sub-benchmarks
// that could not measure, and why; skipped the benchmarks that did not
// run here at all (Skip, Check), and why.
var benchRounds = struct {
	sync.Mutex
	m       map[string]map[string][]float64
	why     map[string]string
	skipped map[string]string
}{m: map[string]map[string][]float64{}, why: map[string]string{}, skipped: map[string]string{}}

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

// Skip skips b, a benchmark that cannot run here, and says why: in a line
// of progress now, and under each of its rows in the verdict table.
func Skip(b testing.TB, why string) {
	b.Helper()
	benchRounds.Lock()
	benchRounds.skipped[b.Name()] = why
	benchRounds.Unlock()
	Progressf("%s skipped: %s", b.Name(), why)
	b.Skip(why)
}

// Check fails b with err, unless err tells of the machine rather than of
// the library (Trouble): then b is skipped, and its rows say why.
func Check(b testing.TB, err error) {
	b.Helper()
	if err == nil {
		return
	}
	if why := Trouble(err); why != "" {
		Skip(b, fmt.Sprintf("not measured: %s: %v", why, err))
	}
	b.Fatal(err)
}

// A Target is a row of the table: Num ÷ Den, round by round, against Op
// Want (">=" or "<="). A row without Den judges Num alone; a row without
// Op is reported, not judged. Num and Den are {benchmark, unit}; every
// row's figures come from one experiment, so that its rounds pair up.
// Kind says what a goal is: a claim of the library (the zero value), a
// target not yet reached, or the bound Redis allows.
type Target struct {
	What     string
	Num, Den [2]string // benchmark, unit
	Op       string    // ">=", "<=" or ""
	Want     float64
	Kind     Kind
	Note     string   // a Bound's reason, a footnote under the table
	Also     []string // units shown under the row beside its own, of both sides
}

// Kind is what a row's goal is.
type Kind int

const (
	// Claim is what the library promises (its README and docs say so, and
	// a quiet machine meets it): a miss is a regression, "MISSED".
	Claim Kind = iota
	// Aim is a goal not yet reached on a quiet machine: a miss is "target:
	// not yet", not a regression.
	Aim
	// Bound is the most that Redis allows of a goal no design can reach
	// there (Note says why, under the table); judged like a claim.
	Bound
)

// Row is the Target what: num ÷ den against op want, a claim.
func Row(what string, num, den [2]string, op string, want float64) Target {
	return Target{What: what, Num: num, Den: den, Op: op, Want: want}
}

// Aim is t as a target, not yet a claim.
func (t Target) Aim() Target { t.Kind = Aim; return t }

// Bounded is t with the goal want, the bound Redis allows, and why.
func (t Target) Bounded(want float64, why string) Target {
	t.Kind, t.Want, t.Note = Bound, want, why
	return t
}

// Showing is t with more units shown under it, of both sides.
func (t Target) Showing(units ...string) Target {
	t.Also = append(slices.Clone(t.Also), units...)
	return t
}

// Table is a verdict table's layout.
type Table struct {
	Width int  // of the comparison column, in runes
	Dated bool // the heading ends with the time (UTC)
}

// Print writes the verdict table of rows on the chosen server: every
// row, whatever it measured; a row that cannot be judged here (its
// benchmark not run in this invocation, or skipped, a contender that
// could not measure, miniredis) says why under it. With no benchmark run
// it writes nothing.
func (t Table) Print(w io.Writer, rows []Target) {
	StopProgress()
	benchRounds.Lock()
	defer benchRounds.Unlock()
	if len(benchRounds.m) == 0 && len(benchRounds.why) == 0 && len(benchRounds.skipped) == 0 {
		return
	}
	date := ""
	if t.Dated {
		date = ", " + time.Now().UTC().Format("2006-01-02 15:04 UTC")
	}
	fmt.Fprintf(w, "\nverdict on %s, %d CPUs%s%s\n", chosen.Name, runtime.NumCPU(), loadAverage(), date)
	fmt.Fprintf(w, "each row: the median over interleaved rounds of the first figure ÷ the second, the rounds' range, the goal;\n")
	beside := ""
	if !chosen.Mini {
		beside = ", with the server's command time and CPU per operation"
		if clientFigures() {
			beside = ", with the server's command time and CPU and the clients' CPU per operation"
		}
	}
	fmt.Fprintf(w, "below it the medians of both sides%s\n", beside)
	fmt.Fprintf(w, "a goal is a claim (the library promises it: MISSED is a regression), a target (not yet reached on a quiet machine), or a bound (the most Redis allows, see the notes)\n")
	fmt.Fprintln(w, t.line("comparison", "median", "range (rounds)", "goal", "verdict"))
	var notes []string
	counts := map[string]int{}
	for _, r := range rows {
		if r.Kind == Bound {
			if i := slices.Index(notes, r.Note); i < 0 {
				notes = append(notes, r.Note)
			}
		}
		line, below, verdict := t.verdictRow(r, slices.Index(notes, r.Note)+1)
		counts[verdict]++
		fmt.Fprintln(w, line)
		if below != "" {
			fmt.Fprintln(w, "    "+below)
		}
	}
	for i, n := range notes {
		fmt.Fprintf(w, "(%d) %s\n", i+1, n)
	}
	var tally []string
	for _, v := range verdicts {
		if counts[v] > 0 {
			tally = append(tally, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	fmt.Fprintf(w, "%d rows: %s\n", len(rows), strings.Join(tally, ", "))
}

// verdicts are a row's verdicts, in the order the table counts them.
var verdicts = []string{"met", "within noise", "MISSED", "target met", "target: within noise", "target: not yet",
	"reported", "not judged", "not measured"}

// clientFigures reports whether any sub-benchmark filed the clients' CPU.
func clientFigures() bool {
	for _, figs := range benchRounds.m {
		for unit := range figs {
			if strings.HasPrefix(unit, "client-us/") {
				return true
			}
		}
	}
	return false
}

// line lays out a row's columns (counting runes, not bytes: ÷, ≥, –).
func (t Table) line(what, median, spread, goal, verdict string) string {
	pad := func(s string, w int, right bool) string {
		fill := strings.Repeat(" ", max(w-utf8.RuneCountInString(s), 0))
		if right {
			return fill + s
		}
		return s + fill
	}
	return pad(what, t.Width, false) + " " + pad(median, 9, true) + "  " + pad(spread, 19, false) + " " + pad(goal, 13, true) + "  " + verdict
}

// verdictRow renders one row, and the line under it: the figures behind
// it, or why it was not measured; and its verdict. note is the number of
// a Bound's footnote.
func (t Table) verdictRow(r Target, note int) (line, below, verdict string) {
	notMeasured := func(why string) (string, string, string) {
		return t.line(r.What, "", "", t.goal(r, "", note), "not measured"), why, "not measured"
	}
	sides := [][2]string{r.Num}
	if r.Den[0] != "" {
		sides = append(sides, r.Den)
	}
	for _, side := range sides {
		if why, out := benchRounds.why[side[0]]; out {
			return notMeasured(strings.TrimPrefix(side[0], "Benchmark") + ": " + why)
		}
	}
	for _, side := range sides {
		if _, ok := benchRounds.m[side[0]][side[1]]; !ok {
			return notMeasured(notRun(side[0], side[1]))
		}
	}
	nums := benchRounds.m[r.Num[0]][r.Num[1]]
	unit, ratios := "", nums
	if r.Den[0] != "" {
		dens := benchRounds.m[r.Den[0]][r.Den[1]]
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
		return notMeasured("no round has both figures")
	}
	med, lo, hi := median(ratios), slices.Min(ratios), slices.Max(ratios)
	verdict = "reported"
	if r.Op != "" {
		meets := func(v float64) bool { return r.Op == ">=" && v >= r.Want || r.Op == "<=" && v <= r.Want }
		switch {
		case meets(lo) && meets(hi):
			verdict = "met"
		case !meets(lo) && !meets(hi):
			verdict = "MISSED"
		default:
			verdict = "within noise"
		}
		if r.Kind == Aim {
			verdict = map[string]string{"met": "target met", "MISSED": "target: not yet", "within noise": "target: within noise"}[verdict]
		}
		if chosen.Mini {
			verdict = "not judged"
		}
	}
	spread := fmt.Sprintf("%s–%s (%d)", fmtRatio(lo, unit), fmtRatio(hi, unit), len(ratios))
	below = rowFigures(r)
	if verdict == "not judged" {
		below = strings.TrimPrefix(below+" · ", " · ") + "not judged: miniredis's figures show that the benchmark runs, not what Redis does"
	}
	return t.line(r.What, fmtRatio(med, unit)+unit, spread, t.goal(r, unit, note), verdict), below, verdict
}

// goal is a row's goal column: "≥ 3×", with "target" or the number of a
// bound's note; "—" for a row reported, not judged.
func (t Table) goal(r Target, unit string, note int) string {
	if r.Op == "" {
		return "—"
	}
	if unit == "" && r.Den[0] != "" {
		unit = "×"
	}
	g := fmt.Sprintf("%s %g%s", map[string]string{">=": "≥", "<=": "≤"}[r.Op], r.Want, unit)
	switch r.Kind {
	case Aim:
		g = "target " + g
	case Bound:
		g = fmt.Sprintf("%s (%d)", g, note)
	}
	return g
}

// notRun says why a side of a row has no figures: its benchmark skipped
// here, not selected by -bench, or not run to its end.
func notRun(bench, unit string) string {
	top := topLevel(bench)
	if why, ok := benchRounds.skipped[top]; ok {
		return top + " skipped: " + why
	}
	if _, ok := benchRounds.m[bench]; ok {
		return strings.TrimPrefix(bench, "Benchmark") + " measured no " + unit + " here"
	}
	if f := flag.Lookup("test.bench"); f != nil && !selects(f.Value.String(), top) {
		return fmt.Sprintf("%s not run in this invocation (-bench %q does not select it)", top, f.Value.String())
	}
	return bench + " reported nothing here (its benchmark skipped or stopped: see above)"
}

// selects reports whether the -bench pattern's top level matches the
// benchmark name (as go test matches it, each level of the pattern split
// at "/" against the name's level).
func selects(pattern, name string) bool {
	if pattern == "" {
		return false
	}
	top, _, _ := strings.Cut(pattern, "/")
	re, err := regexp.Compile(top)
	return err != nil || re.MatchString(name)
}

// rowFigures is the medians behind a two-sided row: its own units, then,
// where the sides are two benchmarks, the server's command time and CPU
// and the clients' CPU per operation of both, where they were measured.
func rowFigures(r Target) string {
	get := func(bench, unit string) (float64, bool) {
		v := summary(unit, benchRounds.m[bench][unit])
		return v, !math.IsNaN(v)
	}
	if r.Den[0] == "" {
		var parts []string
		for _, unit := range r.Also {
			if v, ok := get(r.Num[0], unit); ok {
				parts = append(parts, fmt.Sprintf("%s %s", unit, fmtFigure(v)))
			}
		}
		return strings.Join(parts, " · ")
	}
	n, _ := get(r.Num[0], r.Num[1])
	d, _ := get(r.Den[0], r.Den[1])
	parts := []string{fmt.Sprintf("%s %s ÷ %s %s", fmtFigure(n), r.Num[1], fmtFigure(d), r.Den[1])}
	if r.Num[1] == r.Den[1] {
		parts[0] = fmt.Sprintf("%s %s ÷ %s", r.Num[1], fmtFigure(n), fmtFigure(d))
	}
	for _, unit := range r.Also {
		n, ok1 := get(r.Num[0], unit)
		d, ok2 := get(r.Den[0], unit)
		switch {
		case ok1 && ok2:
			parts = append(parts, fmt.Sprintf("%s %s ÷ %s", unit, fmtFigure(n), fmtFigure(d)))
		case ok1:
			parts = append(parts, fmt.Sprintf("%s %s ÷ —", unit, fmtFigure(n)))
		case ok2:
			parts = append(parts, fmt.Sprintf("%s — ÷ %s", unit, fmtFigure(d)))
		}
	}
	if r.Num[0] == r.Den[0] {
		return strings.Join(parts, " · ")
	}
	for _, prefix := range []string{"srv-us/", "cpu-us/", "client-us/"} {
		if strings.HasPrefix(r.Num[1], prefix) {
			continue
		}
		var units []string
		for unit := range benchRounds.m[r.Num[0]] {
			if strings.HasPrefix(unit, prefix) {
				units = append(units, unit)
			}
		}
		slices.Sort(units)
		for _, unit := range units {
			n, ok1 := get(r.Num[0], unit)
			d, ok2 := get(r.Den[0], unit)
			if ok1 && ok2 {
				parts = append(parts, fmt.Sprintf("%s %s ÷ %s", unit, fmtFigure(n), fmtFigure(d)))
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
