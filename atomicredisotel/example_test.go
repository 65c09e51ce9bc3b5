package atomicredisotel_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/atomicredisotel"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Instrument an engine, and export its metrics to Prometheus through
// OpenTelemetry's exporter: serve reg with promhttp.HandlerFor(reg,
// promhttp.HandlerOpts{}) on /metrics. (Without WithMeterProvider and
// WithTracerProvider, Instrument uses otel's global providers.)
func ExampleInstrument() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	pool := &redigo.Pool{MaxIdle: 16, Dial: func() (redigo.Conn, error) { return redigo.Dial("tcp", mr.Addr()) }}

	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		fmt.Println(err)
		return
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	e := atomicredis.New(pool, atomicredisotel.Instrument(atomicredisotel.WithMeterProvider(mp)))
	defer e.Close(context.Background())
	ctx := context.Background()
	l, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	l.Unlock(ctx)

	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "atomicredis_") {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				fmt.Println(f.GetName(), "count", m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				fmt.Println(f.GetName(), m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// atomicredis_acquire_duration_seconds count 1
	// atomicredis_hold_duration_seconds count 1
	// atomicredis_holdings 0
}
