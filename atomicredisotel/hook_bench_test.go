package atomicredisotel

import (
	"context"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkBareSpans is the floor of BenchmarkHookCycle's spans: two
// spans with no attributes, on the same SDK set-up.
func BenchmarkBareSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	tr := tp.Tracer("x")
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		for range 2 {
			_, sp := tr.Start(ctx, "atomicredis.TryLock")
			sp.End()
		}
	}
}

// BenchmarkHookCycle is the hook's own cost of an uncontended
// TryLock+Unlock, with no Redis: what Start, End and Observe do for it,
// with metrics and spans, metrics only (no-op tracer) and spans only
// (no-op meter).
func BenchmarkHookCycle(b *testing.B) {
	for _, mode := range []string{"both", "metrics", "traces"} {
		b.Run(mode, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
			c := config{mp: mp, tp: tp}
			if mode == "metrics" {
				c.tp = tracenoop.NewTracerProvider()
			}
			if mode == "traces" {
				c.mp = metricnoop.NewMeterProvider()
			}
			h := newHook(c)
			ctx := context.Background()
			lock := atomicredis.Operation{Object: "lock", Name: "x", Method: "TryLock"}
			unlock := atomicredis.Operation{Object: "lock", Name: "x", Method: "Unlock"}
			acq := atomicredis.Event{Type: atomicredis.EventAcquired, Object: "lock", Name: "x", Fence: 7, Wait: time.Millisecond}
			rel := atomicredis.Event{Type: atomicredis.EventReleased, Object: "lock", Name: "x", Fence: 7, Held: time.Millisecond}
			b.ReportAllocs()
			for range b.N {
				c1 := h.Start(ctx, lock)
				h.Observe(acq)
				h.End(c1, lock, acq)
				c2 := h.Start(ctx, unlock)
				h.Observe(rel)
				h.End(c2, unlock, rel)
			}
		})
	}
}
