package atomicredisotel_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/atomicredisotel"
	"github.com/atomicredis/atomicredis/internal/bench"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	stop := func() {}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		_, stopServer, err := bench.PickServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(2)
		}
		stop = stopServer
	}
	code := m.Run()
	bench.Table{Width: 80, Dated: true}.Print(os.Stdout, targets)
	stop()
	os.Exit(code)
}

var (
	cyclePlain = [2]string{"BenchmarkCycle/plain", "client-us/op"}
	cycleOtel  = [2]string{"BenchmarkCycle/otel", "client-us/op"}
	targets    = []bench.Target{
		bench.Row("uncontended TryLock+Unlock, clients' CPU/op: instrumented ÷ plain", cycleOtel, cyclePlain, "<=", 1.15),
		bench.Row("the same, spans exported to a sink that keeps none: instrumented ÷ plain", [2]string{"BenchmarkCycle/otel-drop", "client-us/op"}, cyclePlain, "", 0),
		bench.Row("uncontended TryLock+Unlock, ops/s: instrumented ÷ plain", [2]string{"BenchmarkCycle/otel", "ops/s"}, [2]string{"BenchmarkCycle/plain", "ops/s"}, "", 0),
	}
)

// dropSpans is an exporter that keeps nothing: the SDK's own cost of a
// span, without tracetest's copying of every span it keeps.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkCycle is the uncontended TryLock+Unlock on one engine without
// instrumentation and on one with it (an SDK MeterProvider with a
// ManualReader; a TracerProvider sampling every span into tracetest's
// SpanRecorder, a fresh one each visit), in interleaved rounds: the
// clients' CPU per cycle is what instrumenting costs. otel-drop has its
// spans go through a SimpleSpanProcessor to an exporter that keeps none.
func BenchmarkCycle(b *testing.B) {
	x := bench.NewExperiment(b, bench.NewEnv(b, 16))
	ns := fmt.Sprintf("otelbench-%d:", time.Now().UnixNano())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(recorder))
	b.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	dropTP := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(dropSpans{})))
	b.Cleanup(func() { dropTP.Shutdown(context.Background()) })
	engines := []struct {
		name string
		e    *atomicredis.Engine
	}{
		{"plain", atomicredis.New(x.Env.Pool, atomicredis.WithNamespace(ns))},
		{"otel", atomicredis.New(x.Env.Pool, atomicredis.WithNamespace(ns),
			atomicredisotel.Instrument(atomicredisotel.WithMeterProvider(mp), atomicredisotel.WithTracerProvider(tp)))},
		{"otel-drop", atomicredis.New(x.Env.Pool, atomicredis.WithNamespace(ns),
			atomicredisotel.Instrument(atomicredisotel.WithMeterProvider(mp), atomicredisotel.WithTracerProvider(dropTP)))},
	}
	ctx := context.Background()
	for _, c := range engines {
		e, name := c.e, "cycle-"+c.name
		b.Cleanup(func() { e.Close(ctx) })
		x.Add(c.name, func(r *bench.Round) error {
			// A fresh recorder each visit: an exporter sends spans away, and a
			// recorder that kept every span of the run would grow the heap,
			// and the collector's work, round after round.
			tp.UnregisterSpanProcessor(recorder)
			recorder = tracetest.NewSpanRecorder()
			tp.RegisterSpanProcessor(recorder)
			u, ops, err := r.Timed(func(bu bench.Budget) (int, error) {
				return bu.Ops(func(int) error {
					l, err := e.TryLock(ctx, name, atomicredis.LockOptions{})
					if err != nil {
						return err
					}
					return l.Unlock(ctx)
				})
			})
			if err == nil {
				r.Add("ops/s", float64(ops)/u.Wall.Seconds())
				r.ServerFigures(u, float64(ops), "op")
			}
			return err
		})
	}
	x.Run()
}
