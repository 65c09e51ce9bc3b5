package atomicredis

// TestMain and the server the benchmarks run on. Tests choose their own
// servers (helpers_test.go); the benchmarks share one, chosen here.

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"go.uber.org/goleak"
)

// benchAddr is the server the benchmarks use, chosen once in TestMain;
// benchMini says it is miniredis.
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
		goleak.VerifyTestMain(m) // tests pick their own servers; none leaves a goroutine behind
	}
	stop, err := pickBenchServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(2)
	}
	code := m.Run()
	printVerdicts(os.Stdout)
	stop()
	os.Exit(code)
}

// pickBenchServer: REDIS_ADDR if set; else a private redis-server if one
// is on PATH (unless BENCH_MINIREDIS=1); else miniredis. It prints which.
func pickBenchServer() (stop func(), err error) {
	forceMini := os.Getenv("BENCH_MINIREDIS") == "1"
	if addr := testserver.RedisAddr(); addr != "" && !forceMini {
		benchAddr = addr
		fmt.Printf("bench server: redis-server at %s (REDIS_ADDR)\n", addr)
		return func() {}, nil
	}
	if _, err := exec.LookPath("redis-server"); err == nil && !forceMini {
		r, err := testserver.StartRedis()
		if err != nil {
			return nil, err
		}
		benchAddr = r.Addr()
		fmt.Printf("bench server: private %s at %s (no persistence)\n", redisVersion(benchAddr), benchAddr)
		return r.Stop, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	benchAddr, benchMini = m.Addr(), true
	why := "no redis-server on PATH"
	if forceMini {
		why = "BENCH_MINIREDIS=1"
	}
	fmt.Printf("bench server: miniredis (%s): figures measure miniredis's Go Lua interpreter, not Redis\n", why)
	return m.Close, nil
}

// redisVersion is "redis-server 7.0.15" for the server at addr.
func redisVersion(addr string) string { return testserver.Version(addr) }

// flagSet reports whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
