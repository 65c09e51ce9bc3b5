package bench

import (
	"flag"
	"strings"
	"testing"
)

// withRounds files m and why as the rounds that ran, for the test's
// length.
func withRounds(t *testing.T, m map[string]map[string][]float64, why map[string]string) {
	benchRounds.Lock()
	saved, savedWhy := benchRounds.m, benchRounds.why
	benchRounds.m, benchRounds.why = m, why
	benchRounds.Unlock()
	t.Cleanup(func() {
		benchRounds.Lock()
		benchRounds.m, benchRounds.why = saved, savedWhy
		benchRounds.Unlock()
	})
}

// The table's arithmetic on fixed rounds: the median of the rounds' ratios
// (not the ratio of medians), their range, and the verdict each range
// earns against a goal.
func TestVerdictRows(t *testing.T) {
	withRounds(t, map[string]map[string][]float64{
		"BenchmarkT/a": {"ns/op": {100, 100, 100}, "x": {1, 2, 3}},
		"BenchmarkT/b": {"ns/op": {50, 90, 200}},
	}, map[string]string{"BenchmarkT/c": "too busy (round 2)", "BenchmarkT/d": "failed in round 2: boom"})
	row := func(num, den string, op string, want float64) Target {
		return Row("t", [2]string{num, "ns/op"}, [2]string{den, "ns/op"}, op, want)
	}
	table := Table{Width: 56}
	for _, c := range []struct {
		row        Target
		want, also string
	}{
		// a ÷ b by round: 2, 1.111, 0.5; their median 1.111 (the medians' ratio would be 1.111 too, the mean 1.2)
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 0.4), "met", "0.500–2.000 (3)"},
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 3), "MISSED", "1.111×"},
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 1), "within noise", "1.111×"},
		{row("BenchmarkT/a", "BenchmarkT/b", "", 0), "reported", "0.500–2.000 (3)"},
		{Row("t", [2]string{"BenchmarkT/a", "x"}, [2]string{}, "<=", 3), "met", "1.00–3.00 (3)"},
		{row("BenchmarkT/a", "BenchmarkT/c", ">=", 1), "not measured", ""},
		// A target is not a claim: short of it is "not yet", never MISSED.
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 3).Aim(), "target: not yet", "target ≥ 3×"},
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 1).Aim(), "target: within noise", "1.111×"},
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 0.4).Aim(), "target met", "0.500–2.000 (3)"},
		// A bound is judged as a claim, its goal numbered for its note.
		{row("BenchmarkT/a", "BenchmarkT/b", ">=", 3).Bounded(0.4, "why"), "met", "≥ 0.4× (1)"},
	} {
		line, below, verdict := table.verdictRow(c.row, 1)
		if verdict != c.want || !strings.HasSuffix(line, c.want) || !strings.Contains(line, c.also) {
			t.Errorf("%v: %q (%q, %v); want verdict %q with %q", c.row, line, below, verdict, c.want, c.also)
		}
	}
	for den, want := range map[string]string{"BenchmarkT/c": "T/c: too busy (round 2)", "BenchmarkT/d": "T/d: failed in round 2: boom"} {
		if _, below, _ := table.verdictRow(row("BenchmarkT/a", den, ">=", 1), 0); below != want {
			t.Errorf("not measured: %q, want %q", below, want)
		}
	}
	if line, _, _ := table.verdictRow(row("BenchmarkT/a", "BenchmarkT/b", ">=", 1), 0); !strings.HasPrefix(line, "t"+strings.Repeat(" ", 55)+"    1.111×  0.500–2.000 (3)              ≥ 1×  within noise") {
		t.Errorf("columns: %q", line)
	}
}

// Every row is in the table whatever it measured, and one that cannot be
// judged says why: its benchmark skipped, not selected by -bench, or not
// reporting the unit; a bound's note is printed under the table; a last
// line counts the verdicts.
func TestTableShowsEveryRow(t *testing.T) {
	withRounds(t, map[string]map[string][]float64{
		"BenchmarkT/a": {"ns/op": {100, 100, 100}},
		"BenchmarkT/b": {"ns/op": {50, 90, 200}},
	}, map[string]string{})
	benchRounds.Lock()
	benchRounds.skipped["BenchmarkSeed"] = "runs with SEED=1"
	benchRounds.Unlock()
	benchFlag(t, "BenchmarkT|BenchmarkSeed|BenchmarkGone")
	row := func(what, num, den string, op string, want float64) Target {
		return Row(what, [2]string{num, "ns/op"}, [2]string{den, "ns/op"}, op, want)
	}
	rows := []Target{
		row("judged", "BenchmarkT/a", "BenchmarkT/b", ">=", 0.4),
		row("skipped", "BenchmarkSeed/x", "BenchmarkT/b", ">=", 1),
		row("unselected", "BenchmarkOther/x", "", "<=", 1),
		row("gone", "BenchmarkGone/x", "", "<=", 1),
		Row("no such unit", [2]string{"BenchmarkT/a", "p99-ms"}, [2]string{}, "<=", 1),
		row("bounded", "BenchmarkT/a", "BenchmarkT/b", ">=", 3).Bounded(0.4, "Redis orders replies per connection only."),
		row("aimed", "BenchmarkT/a", "BenchmarkT/b", ">=", 3).Aim(),
	}
	var out strings.Builder
	Table{Width: 20}.Print(&out, rows)
	got := out.String()
	for _, want := range []string{
		"judged ", "met\n",
		"skipped ", "not measured\n    BenchmarkSeed skipped: runs with SEED=1\n",
		"unselected ", "BenchmarkOther not run in this invocation (-bench \"BenchmarkT|BenchmarkSeed|BenchmarkGone\" does not select it)",
		"gone ", "BenchmarkGone/x reported nothing here",
		"no such unit ", "T/a measured no p99-ms here",
		"≥ 0.4× (1)", "\n(1) Redis orders replies per connection only.\n",
		"target ≥ 3×  target: not yet\n",
		"7 rows: 2 met, 1 target: not yet, 4 not measured\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "not shown") || strings.Contains(got, "MISSED\n") {
		t.Errorf("a row hidden, or a target reported as MISSED:\n%s", got)
	}
	for _, r := range rows {
		if !strings.Contains(got, r.What+" ") {
			t.Errorf("row %q not shown:\n%s", r.What, got)
		}
	}
}

// benchFlag sets -test.bench for the test's length (registering it where
// the test binary has none).
func benchFlag(t *testing.T, pattern string) {
	f := flag.Lookup("test.bench")
	if f == nil {
		flag.String("test.bench", "", "")
		f = flag.Lookup("test.bench")
	}
	saved := f.Value.String()
	f.Value.Set(pattern)
	t.Cleanup(func() { f.Value.Set(saved) })
}

// Below a row: its own figures, then the server's command time and CPU and
// the clients' CPU of both sides, in that order, but not the row's own
// unit again, and none of them beside a row within one benchmark.
func TestRowFigures(t *testing.T) {
	withRounds(t, map[string]map[string][]float64{
		"BenchmarkT/a": {"ops/s": {10, 20, 30}, "srv-us/op": {4}, "cpu-us/op": {5}, "client-us/op": {6}, "x": {1}},
		"BenchmarkT/b": {"ops/s": {5, 10, 15}, "srv-us/op": {2}, "cpu-us/op": {2.5}, "client-us/op": {3}, "y": {2}},
	}, map[string]string{})
	for _, c := range []struct {
		row  Target
		want string
	}{
		{Row("t", [2]string{"BenchmarkT/a", "ops/s"}, [2]string{"BenchmarkT/b", "ops/s"}, ">=", 1),
			"ops/s 20.0 ÷ 10.0 · srv-us/op 4.00 ÷ 2.00 · cpu-us/op 5.00 ÷ 2.50 · client-us/op 6.00 ÷ 3.00"},
		{Row("t", [2]string{"BenchmarkT/a", "cpu-us/op"}, [2]string{"BenchmarkT/b", "cpu-us/op"}, "", 0),
			"cpu-us/op 5.00 ÷ 2.50 · srv-us/op 4.00 ÷ 2.00 · client-us/op 6.00 ÷ 3.00"},
		{Row("t", [2]string{"BenchmarkT/a", "x"}, [2]string{"BenchmarkT/b", "y"}, "", 0),
			"1.00 x ÷ 2.00 y · srv-us/op 4.00 ÷ 2.00 · cpu-us/op 5.00 ÷ 2.50 · client-us/op 6.00 ÷ 3.00"},
		{Row("t", [2]string{"BenchmarkT/a", "x"}, [2]string{"BenchmarkT/a", "ops/s"}, "", 0), "1.00 x ÷ 20.0 ops/s"},
		{Row("t", [2]string{"BenchmarkT/a", "x"}, [2]string{}, "", 0), ""},
	} {
		if got := rowFigures(c.row); got != c.want {
			t.Errorf("%v:\n got %q\nwant %q", c.row, got, c.want)
		}
	}
}

func TestFmtFigure(t *testing.T) {
	for v, want := range map[float64]string{1234.5: "1234", 12.34: "12.3", 1.234: "1.23", 0.01234: "0.0123", -12.34: "-12.3"} {
		if got := fmtFigure(v); got != want {
			t.Errorf("fmtFigure(%v) = %q, want %q", v, got, want)
		}
	}
	if got := fmtRatio(1.0004, "×"); got != "1.000" {
		t.Errorf("fmtRatio(1.0004) = %q", got)
	}
}
