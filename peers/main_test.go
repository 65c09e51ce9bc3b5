package peers

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/atomicredis/atomicredis/internal/bench"
)

// benchAddr is the server every contender uses, chosen once in TestMain
// (bench.PickServer).
var benchAddr string

func TestMain(m *testing.M) {
	flag.Parse()
	benchmarks := false
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		benchmarks = true
	}
	stop := func() {}
	if benchmarks {
		server, stopServer, err := bench.PickServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(2)
		}
		benchAddr, stop = server.Addr, stopServer
		printSettings(os.Stdout)
	}
	code := m.Run()
	bench.Table{Width: 80, Dated: true}.Print(os.Stdout, targets)
	stop()
	os.Exit(code)
}
