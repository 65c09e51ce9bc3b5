package atomicredis

// TestBenchReport turns `go test -bench` output into docs/bench.md's results:
// the target ratios as a Markdown table, and docs/bench.svg. It uses only
// the standard library.
//
//	go test -run '^$' -bench . -benchtime 2s | tee bench.txt
//	go test -run TestBenchReport -benchout bench.txt

import (
	"bufio"
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/atomicredis/atomicredis/internal/bench"
)

var benchOut = flag.String("benchout", "", "TestBenchReport: go test -bench output to turn into docs/bench.svg and the target table")

// benchLine matches "BenchmarkX/y-2   300   123 ns/op   4.5 acq/s ...".
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parseBench maps each benchmark name (without the -GOMAXPROCS suffix) to
// its metrics by unit.
func parseBench(text string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		metrics := map[string]float64{}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		out[m[1]] = metrics
	}
	return out
}

var targets = []bench.Target{
	bench.Row("lock cycle: lua speed ÷ round-trip floor", [2]string{"BenchmarkLock/round-trip", "ns/op"}, [2]string{"BenchmarkLock/lua", "ns/op"}, ">=", 0.9).Aim(),
	bench.Row("lock cycle: lua speed ÷ watch", [2]string{"BenchmarkLock/watch", "ns/op"}, [2]string{"BenchmarkLock/lua", "ns/op"}, ">=", 1.4),
	bench.Row("contended lock, 16 clients: lua acq/s ÷ watch", [2]string{"BenchmarkLockContended/lua", "acq/s"}, [2]string{"BenchmarkLockContended/watch", "acq/s"}, ">=", 3).Aim().Showing("tries/acq", "cmds/op"),
	bench.Row("semaphore, 1 client: lua speed ÷ book-fair", [2]string{"BenchmarkSemaphore/book-fair/clients=1", "ns/op"}, [2]string{"BenchmarkSemaphore/lua/clients=1", "ns/op"}, ">=", 2).Aim(),
	bench.Row("semaphore, 1 client: lua speed ÷ book-fair-locked", [2]string{"BenchmarkSemaphore/book-fair-locked/clients=1", "ns/op"}, [2]string{"BenchmarkSemaphore/lua/clients=1", "ns/op"}, ">=", 4).Aim(),
	bench.Row("semaphore, 16 clients: lua acq/s ÷ book-fair", [2]string{"BenchmarkSemaphore/lua/clients=16", "acq/s"}, [2]string{"BenchmarkSemaphore/book-fair/clients=16", "acq/s"}, ">=", 2).Aim(),
	bench.Row("semaphore, 16 clients: lua acq/s ÷ book-fair-locked", [2]string{"BenchmarkSemaphore/lua/clients=16", "acq/s"}, [2]string{"BenchmarkSemaphore/book-fair-locked/clients=16", "acq/s"}, ">=", 4).Aim(),
	bench.Row("suggest 1k: lua time ÷ ZRANGEBYLEX", [2]string{"BenchmarkSuggest/lua/1k", "ns/op"}, [2]string{"BenchmarkSuggest/zrangebylex/1k", "ns/op"}, "<=", 1.2).Aim(),
	bench.Row("suggest 100k: lua time ÷ ZRANGEBYLEX", [2]string{"BenchmarkSuggest/lua/100k", "ns/op"}, [2]string{"BenchmarkSuggest/zrangebylex/100k", "ns/op"}, "<=", 1.2).Aim(),
	bench.Row("suggest: lua time at 100k ÷ at 1k", [2]string{"BenchmarkSuggest/lua/100k", "ns/op"}, [2]string{"BenchmarkSuggest/lua/1k", "ns/op"}, "<=", 1.5),
	bench.Row("suggest 1k + writer: lua speed ÷ watch", [2]string{"BenchmarkSuggest/watch/1k-writers", "ns/op"}, [2]string{"BenchmarkSuggest/lua/1k-writers", "ns/op"}, ">=", 3),
	bench.Row("suggest 100k + writer: lua speed ÷ watch", [2]string{"BenchmarkSuggest/watch/100k-writers", "ns/op"}, [2]string{"BenchmarkSuggest/lua/100k-writers", "ns/op"}, ">=", 3),
	bench.Row("market 5L/5B: lua bought/s ÷ watch", [2]string{"BenchmarkMarket/lua/5L5B", "bought/s"}, [2]string{"BenchmarkMarket/watch/5L5B", "bought/s"}, ">=", 20),
	bench.Row("market 5L/5B: lua bought/s ÷ fine-lock", [2]string{"BenchmarkMarket/lua/5L5B", "bought/s"}, [2]string{"BenchmarkMarket/fine-lock/5L5B", "bought/s"}, ">=", 2),
}

// absolute targets: one metric against a bound.
var absTargets = []struct {
	what, bench, unit, op string
	want                  float64
}{
	{"market 5L/5B: lua retries per purchase", "BenchmarkMarket/lua/5L5B", "retries/purchase", "<=", 0},
	{"market 5L/5B: lua mean wait per purchase (ms)", "BenchmarkMarket/lua/5L5B", "ms/wait", "<=", 1},
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// targetTable renders the targets as Markdown from parsed results.
func targetTable(r map[string]map[string]float64) (string, error) {
	var b strings.Builder
	b.WriteString("| target | goal | measured | |\n|---|---|---|---|\n")
	get := func(bench, unit string) (float64, error) {
		v, ok := r[bench][unit]
		if !ok {
			return 0, fmt.Errorf("no %s for %s in the benchmark output", unit, bench)
		}
		return v, nil
	}
	for _, tg := range targets {
		n, err := get(tg.Num[0], tg.Num[1])
		if err != nil {
			return "", err
		}
		d, err := get(tg.Den[0], tg.Den[1])
		if err != nil {
			return "", err
		}
		got := n / d
		ok := (tg.Op == ">=" && got >= tg.Want) || (tg.Op == "<=" && got <= tg.Want)
		verdict := met(ok)
		if tg.Kind == bench.Aim {
			verdict = map[bool]string{true: "target met", false: "target: not yet"}[ok]
		}
		fmt.Fprintf(&b, "| %s | %s %.1f× | %.2f× | %s |\n", tg.What, tg.Op, tg.Want, got, verdict)
	}
	for _, tg := range absTargets {
		v, err := get(tg.bench, tg.unit)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| %s | %s %g | %.3g | %s |\n", tg.what, tg.op, tg.want, v, met(v <= tg.want))
	}
	return b.String(), nil
}

// chartGroups are the bars of docs/bench.svg: each group compares variants
// of one operation, in operations per second.
var chartGroups = []struct {
	title string
	unit  string // metric to plot; ns/op is shown as ops/s
	bars  []string
}{
	{"lock cycle, 1 client (cycles/s)", "ns/op", []string{"BenchmarkLock/round-trip", "BenchmarkLock/lua", "BenchmarkLock/watch"}},
	{"lock, 16 clients (acquisitions/s)", "acq/s", []string{"BenchmarkLockContended/lua", "BenchmarkLockContended/watch"}},
	{"semaphore, 1 client (acquire+release/s)", "acq/s", []string{"BenchmarkSemaphore/lua/clients=1", "BenchmarkSemaphore/book-fair/clients=1", "BenchmarkSemaphore/book-fair-locked/clients=1"}},
	{"semaphore, 16 clients (acquire+release/s)", "acq/s", []string{"BenchmarkSemaphore/lua/clients=16", "BenchmarkSemaphore/book-fair/clients=16", "BenchmarkSemaphore/book-fair-locked/clients=16"}},
	{"suggest, 100k members + a writer (queries/s)", "ns/op", []string{"BenchmarkSuggest/zrangebylex/100k-writers", "BenchmarkSuggest/lua/100k-writers", "BenchmarkSuggest/watch/100k-writers"}},
	{"market, 5 listers / 5 buyers (bought/s)", "bought/s", []string{"BenchmarkMarket/lua/5L5B", "BenchmarkMarket/fine-lock/5L5B", "BenchmarkMarket/lock/5L5B", "BenchmarkMarket/watch/5L5B"}},
}

// chartSVG draws one bar per variant, each group on its own scale.
func chartSVG(r map[string]map[string]float64, caption string) (string, error) {
	const width, labelW, barW, rowH, gap = 760, 250, 400, 20, 34
	var body strings.Builder
	y := 40
	for _, g := range chartGroups {
		fmt.Fprintf(&body, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y, html.EscapeString(g.title))
		y += 8
		vals := make([]float64, len(g.bars))
		top := 0.0
		for i, bench := range g.bars {
			v, ok := r[bench][g.unit]
			if !ok {
				return "", fmt.Errorf("no %s for %s", g.unit, bench)
			}
			if g.unit == "ns/op" {
				v = 1e9 / v
			}
			vals[i], top = v, math.Max(top, v)
		}
		for i, bench := range g.bars {
			name := strings.TrimPrefix(bench, "Benchmark")
			w := int(float64(barW) * vals[i] / top)
			color := "#9aa5b1"
			if strings.Contains(name, "/lua") {
				color = "#2b7bb9"
			}
			fmt.Fprintf(&body, `<text x="10" y="%d" font-size="12">%s</text>`, y+14, html.EscapeString(name))
			fmt.Fprintf(&body, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`, labelW, y+2, max(w, 1), rowH-4, color)
			fmt.Fprintf(&body, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", labelW+max(w, 1)+6, y+14, humanRate(vals[i]))
			y += rowH
		}
		y += gap - rowH/2
	}
	head := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">`+"\n"+
		`<rect width="100%%" height="100%%" fill="white"/>`+"\n"+
		`<text x="10" y="20" font-size="14">%s</text>`+"\n", width, y, html.EscapeString(caption))
	return head + body.String() + "</svg>\n", nil
}

func humanRate(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fk/s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f/s", v)
	default:
		return fmt.Sprintf("%.1f/s", v)
	}
}

func TestBenchReport(t *testing.T) {
	if *benchOut == "" {
		t.Skip("give -benchout FILE (go test -bench output) to write docs/bench.svg")
	}
	raw, err := os.ReadFile(*benchOut)
	if err != nil {
		t.Fatal(err)
	}
	r := parseBench(string(raw))
	table, err := targetTable(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(table)
	caption := "atomicredis: higher is better, each group on its own scale"
	for _, line := range strings.Split(string(raw), "\n") {
		if server, ok := strings.CutPrefix(line, "bench server: "); ok {
			server, _, _ = strings.Cut(server, " at ") // the port says nothing
			caption += "; " + server
		}
	}
	svg, err := chartSVG(r, caption)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("docs/bench.svg", []byte(svg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The parser and the target arithmetic, on a fixed sample.
func TestParseBench(t *testing.T) {
	r := parseBench("goos: linux\nBenchmarkLock/lua-2   \t 300\t 200000 ns/op\nBenchmarkLockContended/watch-2 10 5 ns/op 1472 acq/s 7.19 tries/acq\nBenchmarkLock/round-trip 5 100 ns/op\n")
	want := map[string]map[string]float64{
		"BenchmarkLock/lua":            {"ns/op": 200000},
		"BenchmarkLockContended/watch": {"ns/op": 5, "acq/s": 1472, "tries/acq": 7.19},
		"BenchmarkLock/round-trip":     {"ns/op": 100},
	}
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("parsed %v, want %v", r, want)
	}
	if _, err := targetTable(r); err == nil || !strings.Contains(err.Error(), "BenchmarkLock/watch") {
		t.Errorf("a missing benchmark must be an error, got %v", err)
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != 3 {
		t.Errorf("keys %v", keys)
	}
}
