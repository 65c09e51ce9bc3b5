package peers

import (
	"slices"
	"strings"
	"testing"

	"github.com/atomicredis/atomicredis/internal/bench"
)

// ---------------------------------------------------------------------------
// The rows

func sub(name string) func(unit string) [2]string {
	return func(unit string) [2]string { return [2]string{name, unit} }
}

var (
	unAR, unRL, unRS, unFloor = sub("BenchmarkUncontended/atomicredis"), sub("BenchmarkUncontended/redislock"), sub("BenchmarkUncontended/redsync"), sub("BenchmarkUncontended/floor")
	hotAR, hotRL, hotRS       = sub("BenchmarkHotName/atomicredis"), sub("BenchmarkHotName/redislock"), sub("BenchmarkHotName/redsync")
	crAR, crRL, crRS          = sub("BenchmarkCrowd/atomicredis"), sub("BenchmarkCrowd/redislock"), sub("BenchmarkCrowd/redsync")
	none                      = [2]string{}
)

// targets are the goals (item 1) and the figures reported beside
// them. A row is met when every round's ratio reaches the goal.
var targets = []bench.Target{
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ redislock", unAR("ops/s"), unRL("ops/s"), ">=", 1),
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ redsync", unAR("ops/s"), unRS("ops/s"), ">=", 1),
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ the floor", unAR("ops/s"), unFloor("ops/s"), ">=", 0.9),
	bench.Row("uncontended, ops/s: redislock ÷ the floor", unRL("ops/s"), unFloor("ops/s"), "", 0),
	bench.Row("uncontended, ops/s: redsync ÷ the floor", unRS("ops/s"), unFloor("ops/s"), "", 0),
	bench.Row("uncontended, allocations/op: atomicredis ÷ redislock", unAR("allocs/op"), unRL("allocs/op"), "", 0),
	bench.Row("uncontended, allocations/op: atomicredis ÷ redsync", unAR("allocs/op"), unRS("allocs/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis ÷ redislock", unAR("client-us/op"), unRL("client-us/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis ÷ redsync", unAR("client-us/op"), unRS("client-us/op"), "", 0),
	bench.Row("hot name, 16 goroutines, no hold, acq/s: atomicredis ÷ redislock", hotAR("acq/s"), hotRL("acq/s"), ">=", 1),
	bench.Row("hot name, 16 goroutines, no hold, acq/s: atomicredis ÷ redsync", hotAR("acq/s"), hotRS("acq/s"), ">=", 1),
	bench.Row("hot name, server CPU/acq: atomicredis ÷ redislock", hotAR("cpu-us/acq"), hotRL("cpu-us/acq"), "", 0),
	bench.Row("hot name, server CPU/acq: atomicredis ÷ redsync", hotAR("cpu-us/acq"), hotRS("cpu-us/acq"), "", 0),
	bench.Row("hot name, clients' CPU/acq: atomicredis ÷ redislock", hotAR("client-us/acq"), hotRL("client-us/acq"), "", 0),
	bench.Row("hot name, clients' CPU/acq: atomicredis ÷ redsync", hotAR("client-us/acq"), hotRS("client-us/acq"), "", 0),
	bench.Row("hot name, busiest goroutine's share % (fair 6.25): atomicredis", hotAR("busiest%"), none, "", 0),
	bench.Row("hot name, busiest goroutine's share %: redislock", hotRL("busiest%"), none, "", 0),
	bench.Row("hot name, busiest goroutine's share %: redsync", hotRS("busiest%"), none, "", 0),
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ redislock", crAR("acq/s"), crRL("acq/s"), "", 0),
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ redsync", crAR("acq/s"), crRS("acq/s"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ redislock", crAR("cpu-us/acq"), crRL("cpu-us/acq"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ redsync", crAR("cpu-us/acq"), crRS("cpu-us/acq"), "", 0),
	bench.Row("crowd, commands/acq: atomicredis ÷ redislock", crAR("cmds/acq"), crRL("cmds/acq"), "", 0),
	bench.Row("crowd, commands/acq: atomicredis ÷ redsync", crAR("cmds/acq"), crRS("cmds/acq"), "", 0),
	bench.Row("crowd, busiest goroutine's share % (fair 1.56): atomicredis", crAR("busiest%"), none, "", 0),
	bench.Row("crowd, busiest goroutine's share %: redislock", crRL("busiest%"), none, "", 0),
	bench.Row("crowd, busiest goroutine's share %: redsync", crRS("busiest%"), none, "", 0),
	bench.Row("crowd, goroutines with no acquisition in the window: redislock", crRL("idle-clients"), none, "", 0),
	bench.Row("crowd, goroutines with no acquisition in the window: redsync", crRS("idle-clients"), none, "", 0),
	bench.Row("crowd, waits that ran out per acquisition: redsync", crRS("gave-up/acq"), none, "", 0),
}

// The rows name only benchmarks and units that the experiments report.
func TestTargetsNameWhatRuns(t *testing.T) {
	benches := map[string][]string{
		"BenchmarkUncontended": {"ns/op", "ops/s", "allocs/op", "cmds/op", "srv-us/op", "cpu-us/op", "client-us/op"},
		"BenchmarkHotName":     {"ns/op", "acq/s", "busiest%", "idle-clients", "gave-up/acq", "cmds/acq", "srv-us/acq", "cpu-us/acq", "client-us/acq"},
		"BenchmarkCrowd":       {"ns/op", "acq/s", "busiest%", "idle-clients", "gave-up/acq", "cmds/acq", "srv-us/acq", "cpu-us/acq", "client-us/acq"},
	}
	for _, r := range targets {
		for _, side := range [][2]string{r.Num, r.Den} {
			if side[0] == "" {
				continue
			}
			fn, who, _ := strings.Cut(side[0], "/")
			if !slices.Contains([]string{"atomicredis", "redislock", "redsync", "floor"}, who) || !slices.Contains(benches[fn], side[1]) {
				t.Errorf("row %q: %s %s is not reported", r.What, side[0], side[1])
			}
		}
	}
}
