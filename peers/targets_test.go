package peers

import (
	"fmt"
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

	unARc, unARG, unARGc, unCAD     = sub("BenchmarkUncontended/atomicredis/cancel"), sub("BenchmarkUncontended/atomicredis-goredis"), sub("BenchmarkUncontended/atomicredis-goredis/cancel"), sub("BenchmarkUncontended/floor-cad")
	ownAR, ownARc, ownFloor, ownCAD = sub("BenchmarkOwnNames/atomicredis"), sub("BenchmarkOwnNames/atomicredis/cancel"), sub("BenchmarkOwnNames/floor"), sub("BenchmarkOwnNames/floor-cad")
	hotARc, hotRU                   = sub("BenchmarkHotName/atomicredis/cancel"), sub("BenchmarkHotName/rueidislock")
	crARc, crRU                     = sub("BenchmarkCrowd/atomicredis/cancel"), sub("BenchmarkCrowd/rueidislock")

	peerNames = []string{"redislock", "redsync", "rueidislock"}
)

// peerRows are, reported, each peer ÷ atomicredis in experiment exp
// (described as what): its speed (speed, "ops/s" or "acq/s"), the
// server's time in its commands and the clients' CPU per operation (per:
// "op" or "acq").
func peerRows(what, exp, speed, per string) []bench.Target {
	ar := sub(exp + "/atomicredis")
	var rows []bench.Target
	for _, f := range []struct{ label, unit string }{
		{speed, speed},
		{"server time/" + per, "srv-us/" + per},
		{"clients' CPU/" + per, "client-us/" + per},
	} {
		for _, p := range peerNames {
			rows = append(rows, bench.Row(fmt.Sprintf("%s, %s: %s ÷ atomicredis", what, f.label, p), sub(exp+"/"+p)(f.unit), ar(f.unit), "", 0))
		}
	}
	return rows
}

// targets are the comparison's goals and the figures reported beside
// them. A row is met when every round's ratio reaches the goal; a row
// of one side shows the server's time and the clients' CPU under it, as
// a row of two shows them of both.
var targets = slices.Concat([]bench.Target{
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ redislock", unAR("ops/s"), unRL("ops/s"), ">=", 1),
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ redsync", unAR("ops/s"), unRS("ops/s"), ">=", 1),
	bench.Row("uncontended TryLock+Unlock, ops/s: atomicredis ÷ the floor", unAR("ops/s"), unFloor("ops/s"), ">=", 0.9),
	bench.Row("uncontended, ops/s: atomicredis ÷ floor-cad", unAR("ops/s"), unCAD("ops/s"), "", 0),
	bench.Row("uncontended, ops/s: redislock ÷ the floor", unRL("ops/s"), unFloor("ops/s"), "", 0),
	bench.Row("uncontended, ops/s: redsync ÷ the floor", unRS("ops/s"), unFloor("ops/s"), "", 0),
	bench.Row("uncontended, allocations/op: atomicredis ÷ redislock", unAR("allocs/op"), unRL("allocs/op"), "", 0),
	bench.Row("uncontended, allocations/op: atomicredis ÷ redsync", unAR("allocs/op"), unRS("allocs/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis ÷ redislock", unAR("client-us/op"), unRL("client-us/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis ÷ redsync", unAR("client-us/op"), unRS("client-us/op"), "", 0),
	bench.Row("uncontended, clients' CPU/op: atomicredis/cancel ÷ atomicredis", unARc("client-us/op"), unAR("client-us/op"), "<=", 1.1),
	bench.Row("uncontended, ops/s: atomicredis/cancel ÷ atomicredis", unARc("ops/s"), unAR("ops/s"), ">=", 0.95),
	bench.Row("uncontended, clients' CPU/op: atomicredis-goredis/cancel ÷ atomicredis-goredis", unARGc("client-us/op"), unARG("client-us/op"), "<=", 1.1),
	bench.Row("uncontended, ops/s: atomicredis-goredis/cancel ÷ atomicredis-goredis", unARGc("ops/s"), unARG("ops/s"), ">=", 0.95),
	bench.Row("uncontended, ops/s: atomicredis-goredis ÷ atomicredis", unARG("ops/s"), unAR("ops/s"), "", 0),
}, peerRows("uncontended", "BenchmarkUncontended", "ops/s", "op"), []bench.Target{
	bench.Row("own names, 16 goroutines, ops/s: atomicredis ÷ the floor", ownAR("ops/s"), ownFloor("ops/s"), "", 0),
	bench.Row("own names, ops/s: atomicredis ÷ floor-cad", ownAR("ops/s"), ownCAD("ops/s"), "", 0),
	bench.Row("own names, ops/s: atomicredis/cancel ÷ atomicredis", ownARc("ops/s"), ownAR("ops/s"), "", 0),
}, peerRows("own names", "BenchmarkOwnNames", "ops/s", "op"), []bench.Target{
	bench.Row("hot name, 16 goroutines, no hold, acq/s: atomicredis ÷ redislock", hotAR("acq/s"), hotRL("acq/s"), ">=", 1),
	bench.Row("hot name, 16 goroutines, no hold, acq/s: atomicredis ÷ redsync", hotAR("acq/s"), hotRS("acq/s"), ">=", 1),
	bench.Row("hot name, server CPU/acq: atomicredis ÷ redislock", hotAR("cpu-us/acq"), hotRL("cpu-us/acq"), "", 0),
	bench.Row("hot name, server CPU/acq: atomicredis ÷ redsync", hotAR("cpu-us/acq"), hotRS("cpu-us/acq"), "", 0),
	bench.Row("hot name, clients' CPU/acq: atomicredis ÷ redislock", hotAR("client-us/acq"), hotRL("client-us/acq"), "", 0),
	bench.Row("hot name, clients' CPU/acq: atomicredis ÷ redsync", hotAR("client-us/acq"), hotRS("client-us/acq"), "", 0),
	bench.Row("hot name, acq/s: atomicredis/cancel ÷ atomicredis", hotARc("acq/s"), hotAR("acq/s"), "", 0),
	bench.Row("hot name, busiest goroutine's share % (fair 6.25): atomicredis", hotAR("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("hot name, busiest goroutine's share %: redislock", hotRL("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("hot name, busiest goroutine's share %: redsync", hotRS("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("hot name, busiest goroutine's share %: rueidislock", hotRU("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
}, peerRows("hot name", "BenchmarkHotName", "acq/s", "acq"), []bench.Target{
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ redislock", crAR("acq/s"), crRL("acq/s"), "", 0),
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ redsync", crAR("acq/s"), crRS("acq/s"), "", 0),
	bench.Row("crowd 64×10ms, acq/s: atomicredis ÷ rueidislock", crAR("acq/s"), crRU("acq/s"), "", 0),
	bench.Row("crowd, acq/s: atomicredis/cancel ÷ atomicredis", crARc("acq/s"), crAR("acq/s"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ redislock", crAR("cpu-us/acq"), crRL("cpu-us/acq"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ redsync", crAR("cpu-us/acq"), crRS("cpu-us/acq"), "", 0),
	bench.Row("crowd, server CPU/acq: atomicredis ÷ rueidislock", crAR("cpu-us/acq"), crRU("cpu-us/acq"), "", 0),
	bench.Row("crowd, commands/acq: atomicredis ÷ redislock", crAR("cmds/acq"), crRL("cmds/acq"), "", 0),
	bench.Row("crowd, commands/acq: atomicredis ÷ redsync", crAR("cmds/acq"), crRS("cmds/acq"), "", 0),
	bench.Row("crowd, busiest goroutine's share % (fair 1.56): atomicredis", crAR("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, busiest goroutine's share %: redislock", crRL("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, busiest goroutine's share %: redsync", crRS("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, busiest goroutine's share %: rueidislock", crRU("busiest%"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, goroutines with no acquisition in the window: redislock", crRL("idle-clients"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, goroutines with no acquisition in the window: redsync", crRS("idle-clients"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, goroutines with no acquisition in the window: rueidislock", crRU("idle-clients"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
	bench.Row("crowd, waits that ran out per acquisition: redsync", crRS("gave-up/acq"), none, "", 0).Showing("srv-us/acq", "client-us/acq"),
})

// sideNames are the names of an experiment's contenders, cts, in every
// variant.
func sideNames(cts []contender) []string {
	var names []string
	for _, ct := range cts {
		for _, v := range variants {
			names = append(names, ct.name+v.suffix)
		}
	}
	return names
}

// The rows name only benchmarks, contenders (in their variants) and units
// that the experiments report, and every row shows the server's time and
// the clients' CPU.
func TestTargetsNameWhatRuns(t *testing.T) {
	opUnits := []string{"ns/op", "ops/s", "allocs/op", "cmds/op", "srv-us/op", "cpu-us/op", "client-us/op"}
	acqUnits := []string{"ns/op", "acq/s", "busiest%", "idle-clients", "gave-up/acq", "cmds/acq", "srv-us/acq", "cpu-us/acq", "client-us/acq"}
	units := map[string][]string{"BenchmarkUncontended": opUnits, "BenchmarkOwnNames": opUnits, "BenchmarkHotName": acqUnits, "BenchmarkCrowd": acqUnits, "BenchmarkBudget": opUnits}
	if len(units) != len(contendersOf) {
		t.Errorf("units of %d experiments, contenders of %d", len(units), len(contendersOf))
	}
	for _, r := range targets {
		for _, side := range [][2]string{r.Num, r.Den} {
			if side[0] == "" {
				continue
			}
			fn, who, _ := strings.Cut(side[0], "/")
			if !slices.Contains(sideNames(contendersOf[fn]), who) || !slices.Contains(units[fn], side[1]) {
				t.Errorf("row %q: %s %s is not reported", r.What, side[0], side[1])
			}
			for _, u := range r.Also {
				if !slices.Contains(units[fn], u) {
					t.Errorf("row %q: %s %s (shown under it) is not reported", r.What, side[0], u)
				}
			}
		}
		// Under a row of two contenders the table shows both sides'
		// srv-us/ and client-us/ figures; a row of one shows its Also.
		if r.Den[0] == "" && r.Num[0] != "" {
			for _, prefix := range []string{"srv-us/", "client-us/"} {
				if !slices.ContainsFunc(r.Also, func(u string) bool { return strings.HasPrefix(u, prefix) }) {
					t.Errorf("row %q: shows no %s figure", r.What, prefix)
				}
			}
		}
	}
}
