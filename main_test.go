package atomicredis

// TestMain and the server the benchmarks run on. Tests choose their own
// servers (helpers_test.go); the benchmarks share one, chosen here.

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"go.uber.org/goleak"
)

// benchAddr is the server the benchmarks use, chosen once in TestMain
// (bench.PickServer: REDIS_ADDR, else a private redis-server if one is on
// PATH and BENCH_MINIREDIS is not 1, else miniredis); benchMini says it is
// miniredis.
var (
	benchAddr string
	benchMini bool
)

var marketTable = flag.Bool("market", false, "run TestMarketTable: the book's Table 6.3 with a Lua column")

func TestMain(m *testing.M) {
	flag.Parse()
	// Most tests wait on timers and the network, not the CPU: a run on
	// miniredis alone (no server shared, see testserver.Parallel) runs four
	// of the parallel ones at once unless -parallel says otherwise.
	if !testserver.Shared() && !flagSet("test.parallel") {
		flag.Set("test.parallel", "4")
	}
	if f := flag.Lookup("test.bench"); (f == nil || f.Value.String() == "") && !*marketTable {
		// Tests pick their own servers; none leaves a goroutine behind.
		goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
			fmt.Print(testserver.Summary())
			os.Exit(code)
		}))
	}
	server, stop, err := bench.PickServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(2)
	}
	benchAddr, benchMini = server.Addr, server.Mini
	code := m.Run()
	printVerdicts(os.Stdout)
	stop()
	os.Exit(code)
}

// flagSet reports whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
