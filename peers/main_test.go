package peers

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis/internal/testserver"
)

// benchAddr is the server every contender uses, chosen once in TestMain;
// benchMini says it is miniredis (no server figures); benchServer names
// it for the verdict table.
var (
	benchAddr   string
	benchMini   bool
	benchServer string
)

func TestMain(m *testing.M) {
	flag.Parse()
	bench := false
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		bench = true
	}
	stop := func() {}
	if bench {
		var err error
		if stop, err = pickBenchServer(); err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(2)
		}
		printSettings(os.Stdout)
	}
	code := m.Run()
	printVerdicts(os.Stdout, targets)
	stop()
	os.Exit(code)
}

// pickBenchServer: REDIS_ADDR if set; else a private redis-server if one
// is on PATH; else miniredis, whose figures only show that the benchmarks
// run. It prints which.
func pickBenchServer() (stop func(), err error) {
	if addr := testserver.RedisAddr(); addr != "" {
		benchAddr = addr
		benchServer = testserver.Version(addr) + " at " + addr + " (REDIS_ADDR)"
		fmt.Printf("bench server: %s\n", benchServer)
		return func() {}, nil
	}
	if _, err := exec.LookPath("redis-server"); err == nil {
		r, err := testserver.StartRedis()
		if err != nil {
			return nil, err
		}
		benchAddr = r.Addr()
		benchServer = "private " + testserver.Version(benchAddr)
		fmt.Printf("bench server: %s at %s (no persistence)\n", benchServer, benchAddr)
		return r.Stop, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	benchAddr, benchMini = mr.Addr(), true
	benchServer = "miniredis (no redis-server on PATH: Go's Lua interpreter, not Redis)"
	fmt.Printf("bench server: %s\n", benchServer)
	return mr.Close, nil
}
