package atomicredis

// The benchmarks' experiments on the bench server, and the verdict table
// that TestMain prints after a benchmark run. How they measure is
// internal/bench's (shared with the peers module):
//
//	func BenchmarkHot(b *testing.B) {
//		x := newExperiment(b)
//		x.Rounds = max(x.Rounds, opRounds()) // rounds of operations are cheap: at least 5
//		e := x.env.engine()                  // on x.env.Pool, in x.env.ns
//		x.AddOps("lua", func(i int) error { ... one operation ... })
//		x.AddOps("watch", func(i int) error { ... })
//		x.Run() // rounds, then BenchmarkHot/lua and BenchmarkHot/watch with the medians
//	}
//
//	func init() {
//		targets = append(targets, bench.Row("hot name: lua speed ÷ watch",
//			[2]string{"BenchmarkHot/watch", "ns/op"}, [2]string{"BenchmarkHot/lua", "ns/op"}, ">=", 1.4))
//	}

import (
	"io"
	"slices"
	"testing"

	"github.com/atomicredis/atomicredis/internal/bench"
)

// experiment is a bench.Experiment on the bench server, in a namespace of
// its own.
type experiment struct {
	*bench.Experiment
	env *benchEnv
}

// newExperiment is an experiment on the bench server, with a namespace of
// its own (deleted afterwards) and a pool (x.env.Pool) that counts the
// commands it sends.
func newExperiment(b *testing.B) *experiment {
	b.Helper()
	env := newBenchEnv(b)
	return &experiment{Experiment: bench.NewExperiment(b, env.Env), env: env}
}

// benchEnv is an experiment's setting: a bench.Env (a pool whose
// connections count the commands they send, an admin connection of its
// own for INFO) and a namespace, deleted afterwards (benchSetup).
type benchEnv struct {
	*bench.Env
	ns string
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	_, ns := benchSetup(b) // the namespace and its cleanup
	return &benchEnv{Env: bench.NewEnv(b, 2*crowdClients), ns: ns}
}

func (env *benchEnv) engine() *Engine { return New(env.Pool, WithNamespace(env.ns)) }

// printVerdicts writes the verdict table for whatever benchmarks ran: the
// rows of targets (report_test.go and init functions), absTargets and
// waitTargets.
func printVerdicts(w io.Writer) {
	rows := slices.Clone(targets)
	for _, a := range absTargets {
		rows = append(rows, bench.Row(a.what, [2]string{a.bench, a.unit}, [2]string{}, a.op, a.want))
	}
	rows = append(rows, waitTargets...)
	bench.Table{Width: 56}.Print(w, rows)
}
