package bench

import (
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
	} {
		line, below, ok := table.verdictRow(c.row)
		if !ok || !strings.HasSuffix(line, c.want) || !strings.Contains(line, c.also) {
			t.Errorf("%v: %q (%q, %v); want verdict %q with %q", c.row, line, below, ok, c.want, c.also)
		}
	}
	for den, want := range map[string]string{"BenchmarkT/c": "T/c: too busy (round 2)", "BenchmarkT/d": "T/d: failed in round 2: boom"} {
		if _, below, _ := table.verdictRow(row("BenchmarkT/a", den, ">=", 1)); below != want {
			t.Errorf("not measured: %q, want %q", below, want)
		}
	}
	if _, _, ok := table.verdictRow(row("BenchmarkT/a", "BenchmarkT/none", ">=", 1)); ok {
		t.Error("a row whose benchmark did not run is shown")
	}
	if line, _, _ := table.verdictRow(row("BenchmarkT/a", "BenchmarkT/b", ">=", 1)); !strings.HasPrefix(line, "t"+strings.Repeat(" ", 55)+"    1.111×") {
		t.Errorf("columns: %q", line)
	}
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
