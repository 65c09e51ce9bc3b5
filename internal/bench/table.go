package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// benchRounds holds every round's figures of each sub-benchmark an
// experiment reported, by benchmark name and unit; why the sub-benchmarks
// that could not measure, and why.
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

// A Target is a row of the table: Num ÷ Den, round by round, against Op
// Want (">=" or "<="). A row without Den judges Num alone; a row without
// Op is reported, not judged. Num and Den are {benchmark, unit}; every
// row's figures come from one experiment, so that its rounds pair up.
type Target struct {
	What     string
	Num, Den [2]string // benchmark, unit
	Op       string    // ">=", "<=" or ""
	Want     float64
}

// Row is the Target what: num ÷ den against op want.
func Row(what string, num, den [2]string, op string, want float64) Target {
	return Target{What: what, Num: num, Den: den, Op: op, Want: want}
}

// Table is a verdict table's layout.
type Table struct {
	Width int  // of the comparison column, in runes
	Dated bool // the heading ends with the time (UTC)
}

// Print writes the verdict table of rows for whatever benchmarks ran, on
// the chosen server. Rows whose benchmarks did not run are counted, not
// shown; with none run it writes nothing.
func (t Table) Print(w io.Writer, rows []Target) {
	benchRounds.Lock()
	defer benchRounds.Unlock()
	if len(benchRounds.m) == 0 && len(benchRounds.why) == 0 {
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
	fmt.Fprintln(w, t.line("comparison", "median", "range (rounds)", "goal", "verdict"))
	skipped := 0
	for _, r := range rows {
		line, below, ok := t.verdictRow(r)
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
	return pad(what, t.Width, false) + " " + pad(median, 9, true) + "  " + pad(spread, 19, false) + " " + pad(goal, 8, true) + "  " + verdict
}

// verdictRow renders one row, and the line under it: the figures behind
// it, or why it was not measured; ok is false when its benchmarks did not
// run.
func (t Table) verdictRow(r Target) (line, below string, ok bool) {
	for _, side := range [][2]string{r.Num, r.Den} {
		if why, out := benchRounds.why[side[0]]; out && side[0] != "" {
			return t.line(r.What, "", "", "", "not measured"), strings.TrimPrefix(side[0], "Benchmark") + ": " + why, true
		}
	}
	nums, ok := benchRounds.m[r.Num[0]][r.Num[1]]
	if !ok {
		return "", "", false
	}
	unit, ratios := "", nums
	if r.Den[0] != "" {
		dens, ok := benchRounds.m[r.Den[0]][r.Den[1]]
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
		return t.line(r.What, "", "", "", "not measured"), "no round has both figures", true
	}
	med, lo, hi := median(ratios), slices.Min(ratios), slices.Max(ratios)
	goal, verdict := "—", "reported"
	if r.Op != "" {
		goal = fmt.Sprintf("%s %g%s", map[string]string{">=": "≥", "<=": "≤"}[r.Op], r.Want, unit)
		meets := func(v float64) bool { return r.Op == ">=" && v >= r.Want || r.Op == "<=" && v <= r.Want }
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
	return t.line(r.What, fmtRatio(med, unit)+unit, spread, goal, verdict), rowFigures(r), true
}

// rowFigures is the medians behind a two-sided row: its own units, then,
// where the sides are two benchmarks, the server's command time and CPU
// and the clients' CPU per operation of both, where they were measured.
func rowFigures(r Target) string {
	if r.Den[0] == "" {
		return ""
	}
	get := func(bench, unit string) (float64, bool) {
		v := summary(unit, benchRounds.m[bench][unit])
		return v, !math.IsNaN(v)
	}
	n, _ := get(r.Num[0], r.Num[1])
	d, _ := get(r.Den[0], r.Den[1])
	parts := []string{fmt.Sprintf("%s %s ÷ %s %s", fmtFigure(n), r.Num[1], fmtFigure(d), r.Den[1])}
	if r.Num[1] == r.Den[1] {
		parts[0] = fmt.Sprintf("%s %s ÷ %s", r.Num[1], fmtFigure(n), fmtFigure(d))
	}
	if r.Num[0] == r.Den[0] {
		return parts[0]
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
