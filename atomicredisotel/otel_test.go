package atomicredisotel_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/atomicredisotel"
	"github.com/atomicredis/atomicredis/goredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// server is the real server of REDIS_ADDR, else a miniredis (the test
// says which).
func server(t *testing.T) *testserver.Server {
	t.Helper()
	if addr := testserver.RedisAddr(); addr != "" {
		t.Logf("on the redis-server at %s", addr)
		return testserver.Real(t, "redis", addr)
	}
	t.Log("on miniredis: REDIS_ADDR not set")
	return testserver.Mini(t)
}

// telemetry is an SDK meter provider with a ManualReader and a tracer
// provider that samples every span into a recorder.
type telemetry struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(tel.spans))
	t.Cleanup(func() {
		tel.mp.Shutdown(context.Background())
		tel.tp.Shutdown(context.Background())
	})
	return tel
}

func (tel *telemetry) options(more ...atomicredisotel.Option) atomicredis.Option {
	return atomicredisotel.Instrument(append([]atomicredisotel.Option{
		atomicredisotel.WithMeterProvider(tel.mp), atomicredisotel.WithTracerProvider(tel.tp)}, more...)...)
}

// metric returns the named metric as collected now.
func (tel *telemetry) metric(t *testing.T, name string) (metricdata.Metrics, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// has reports whether set holds every one of kvs.
func has(set attribute.Set, kvs ...attribute.KeyValue) bool {
	for _, kv := range kvs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// histogram returns the count and sum of the named histogram's points
// that have every one of kvs.
func (tel *telemetry) histogram(t *testing.T, name string, kvs ...attribute.KeyValue) (count uint64, sum float64) {
	t.Helper()
	m, ok := tel.metric(t, name)
	if !ok {
		return 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
	}
	if m.Unit != "s" {
		t.Errorf("%s's unit is %q, want s", name, m.Unit)
	}
	for _, p := range h.DataPoints {
		if has(p.Attributes, kvs...) {
			count += p.Count
			sum += p.Sum
		}
	}
	return count, sum
}

// sum returns the named counter's (or up-down counter's) total over its
// points that have every one of kvs.
func (tel *telemetry) sum(t *testing.T, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := tel.metric(t, name)
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if has(p.Attributes, kvs...) {
			n += p.Value
		}
	}
	return n
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5 s", what)
}

var (
	lockObj     = atomicredisotel.AttrObject.String(atomicredis.ObjectLock)
	acquired    = atomicredisotel.AttrOutcome.String("acquired")
	notAcquired = atomicredisotel.AttrOutcome.String("not_acquired")
	queued      = atomicredisotel.AttrQueued.Bool(true)
	notQueued   = atomicredisotel.AttrQueued.Bool(false)
)

// Each metric the package doc names is emitted with its attributes: an
// acquisition's duration by outcome and queueing, a queued wait's length,
// holdings and waiters up and down, a hold's duration, a loss by reason,
// failed extensions and background errors.
func TestMetrics(t *testing.T) {
	s := server(t)
	s.Realtime(t) // the watchdog and the waiter pace themselves in real time
	tel := newTelemetry(t)
	pool := &failingPool{Pool: s.Pool}
	e := atomicredis.New(pool, atomicredis.WithNamespace(s.NS), tel.options())
	defer e.Close(context.Background())
	ctx := context.Background()

	l, err := e.Lock(ctx, "a", atomicredis.LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n := tel.sum(t, "atomicredis.holdings", lockObj); n != 1 {
		t.Errorf("holdings while one lock is held: %d, want 1", n)
	}
	if _, err := e.TryLock(ctx, "a", atomicredis.LockOptions{}); !errors.Is(err, atomicredis.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	if n, _ := tel.histogram(t, "atomicredis.acquire.duration", lockObj, acquired, notQueued); n != 1 {
		t.Errorf("acquire.duration, acquired at once: %d points, want 1", n)
	}
	if n, _ := tel.histogram(t, "atomicredis.acquire.duration", lockObj, notAcquired); n != 1 {
		t.Errorf("acquire.duration, not acquired: %d points, want 1", n)
	}

	// A queued wait: its duration is at least the hold it waited behind.
	got := make(chan *atomicredis.Lock)
	go func() {
		w, err := e.Lock(ctx, "a", atomicredis.LockOptions{Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	waitFor(t, "the waiter counted", func() bool { return tel.sum(t, "atomicredis.waiters", lockObj) == 1 })
	const hold = 150 * time.Millisecond
	time.Sleep(hold)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	if n, sum := tel.histogram(t, "atomicredis.acquire.duration", lockObj, acquired, queued); n != 1 || sum < hold.Seconds() {
		t.Errorf("acquire.duration, acquired after waiting: %d points, %.3f s; want 1 of at least %v", n, sum, hold)
	}
	if n := tel.sum(t, "atomicredis.waiters", lockObj); n != 0 {
		t.Errorf("waiters after the wait: %d, want 0", n)
	}
	if n, sum := tel.histogram(t, "atomicredis.hold.duration", lockObj); n != 1 || sum < hold.Seconds() {
		t.Errorf("hold.duration after one release: %d points, %.3f s; want 1 of at least %v", n, sum, hold)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := tel.sum(t, "atomicredis.holdings", lockObj); n != 0 {
		t.Errorf("holdings after both released: %d, want 0", n)
	}

	// Lost: taken (its key deleted under a watchdog), and after
	// extensions failed until the lease ran out (the pool refuses).
	gone, err := e.TryLock(ctx, "gone", atomicredis.LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Must(t, "DEL", s.NS+"lock:{gone}")
	<-gone.Lost()
	waitFor(t, "the loss counted", func() bool {
		return tel.sum(t, "atomicredis.lost", lockObj, atomicredisotel.AttrLostReason.String("taken")) == 1
	})
	cut, err := e.TryLock(ctx, "cut", atomicredis.LockOptions{TTL: 300 * time.Millisecond, Watchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	pool.refuse(true)
	<-cut.Lost()
	waitFor(t, "the failed extensions counted", func() bool {
		return tel.sum(t, "atomicredis.lost", lockObj, atomicredisotel.AttrLostReason.String("error")) == 1
	})
	if n := tel.sum(t, "atomicredis.extend.failures", lockObj); n < 1 {
		t.Errorf("extend.failures after extensions failed: %d", n)
	}
	if n := tel.sum(t, "atomicredis.holdings"); n != 0 {
		t.Errorf("holdings after both were lost: %d, want 0", n)
	}
	pool.refuse(false)

	// A background error: the wake subscription cannot be made.
	be := atomicredis.New(brokenSubscriber{s.Pool}, atomicredis.WithNamespace(s.NS), tel.options())
	defer be.Close(context.Background())
	bl, err := be.TryLock(ctx, "bg", atomicredis.LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	go be.Lock(wctx, "bg", atomicredis.LockOptions{Wait: time.Minute})
	waitFor(t, "the background error counted", func() bool { return tel.sum(t, "atomicredis.background.errors") >= 1 })
	cancel()
	bl.Unlock(ctx)
}

// failingPool is a pool whose connections can be refused, as when Redis
// cannot be reached.
type failingPool struct {
	atomicredis.Pool
	mu      sync.Mutex
	refused bool
}

var errRefused = errors.New("refused by the test")

func (p *failingPool) refuse(on bool) {
	p.mu.Lock()
	p.refused = on
	p.mu.Unlock()
}

func (p *failingPool) GetContext(ctx context.Context) (redigo.Conn, error) {
	p.mu.Lock()
	refused := p.refused
	p.mu.Unlock()
	if refused {
		return nil, errRefused
	}
	return p.Pool.GetContext(ctx)
}

// brokenSubscriber is a pool whose subscriptions always fail.
type brokenSubscriber struct{ atomicredis.Pool }

func (brokenSubscriber) Subscribe(context.Context, string) (atomicredis.Subscription, error) {
	return nil, errors.New("subscriptions refused by the test")
}

// Lock names stay out of metrics and spans unless WithNameAttribute maps
// them; mapped, they are there.
func TestNameAttribute(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	for _, mapped := range []bool{false, true} {
		tel := newTelemetry(t)
		var opts []atomicredisotel.Option
		if mapped {
			opts = append(opts, atomicredisotel.WithNameAttribute(func(name string) (string, bool) { return "cart", true }))
		}
		e := atomicredis.New(s.Pool, atomicredis.WithNamespace(s.NS), tel.options(opts...))
		l, err := e.TryLock(ctx, "cart:42", atomicredis.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock(ctx)
		e.Close(ctx)
		m, ok := tel.metric(t, "atomicredis.acquire.duration")
		if !ok {
			t.Fatal("no acquire.duration")
		}
		for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			v, named := p.Attributes.Value(atomicredisotel.AttrName)
			if named != mapped || mapped && v.AsString() != "cart" {
				t.Errorf("mapped %v: a point's name attribute %q (%v)", mapped, v.AsString(), named)
			}
		}
		for _, sp := range tel.spans.Ended() {
			if sp.Name() == "atomicredis.Close" {
				continue // the engine's own call: no name
			}
			named := false
			for _, a := range sp.Attributes() {
				named = named || a.Key == atomicredisotel.AttrName
				if a.Value.AsString() == "cart:42" {
					t.Errorf("span %s carries the raw name in %s", sp.Name(), a.Key)
				}
			}
			if named != mapped {
				t.Errorf("mapped %v: span %s has a name attribute: %v", mapped, sp.Name(), named)
			}
		}
	}
}

// attr returns the span's attribute key, and whether it has it.
func attr(sp sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, a := range sp.Attributes() {
		if a.Key == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// spanNamed returns the ended spans named name.
func spanNamed(tel *telemetry, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range tel.spans.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// Each public call is an INTERNAL span named atomicredis.<Method>, a
// child of the caller's, with the fence, whether it queued and how long
// it took; through the goredis adapter with redisotel on its client, the
// client's EVALSHA spans are children of the atomicredis span.
func TestSpans(t *testing.T) {
	s := server(t)
	tel := newTelemetry(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tel.tp)); err != nil {
		t.Fatal(err)
	}
	pool := goredis.NewPool(rdb)
	defer pool.Close()
	e := atomicredis.New(pool, atomicredis.WithNamespace(s.NS), tel.options())
	defer e.Close(context.Background())

	ctx, parent := tel.tp.Tracer("test").Start(context.Background(), "request")
	l, err := e.Lock(ctx, "cart:7", atomicredis.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryLock(ctx, "bad{name}", atomicredis.LockOptions{}); !errors.Is(err, atomicredis.ErrInvalid) {
		t.Fatalf("TryLock of a bad name: %v", err)
	}
	parent.End()

	locks := spanNamed(tel, "atomicredis.Lock")
	if len(locks) != 1 {
		t.Fatalf("%d atomicredis.Lock spans, want 1", len(locks))
	}
	lk := locks[0]
	if lk.SpanKind() != trace.SpanKindInternal || lk.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("atomicredis.Lock: kind %v, parent %v; want internal under the request's span %v", lk.SpanKind(), lk.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	if v, ok := attr(lk, atomicredisotel.AttrFence); !ok || v.AsInt64() != l.Fence() {
		t.Errorf("atomicredis.Lock's fence: %v (%v), want %d", v.AsInt64(), ok, l.Fence())
	}
	if v, ok := attr(lk, atomicredisotel.AttrQueued); !ok || v.AsBool() {
		t.Errorf("atomicredis.Lock's queued: %v (%v), want false", v.AsBool(), ok)
	}
	if _, ok := attr(lk, atomicredisotel.AttrWait); !ok {
		t.Error("atomicredis.Lock has no wait duration")
	}
	evalshas := 0
	for _, sp := range tel.spans.Ended() {
		if sp.Parent().SpanID() == lk.SpanContext().SpanID() {
			if strings.Contains(sp.Name(), "evalsha") { // "evalsha", or a pipeline with SCRIPT LOAD ("redis.pipeline script evalsha")
				evalshas++
			}
		}
	}
	if evalshas == 0 {
		t.Error("no EVALSHA span under atomicredis.Lock")
	}
	if n := len(spanNamed(tel, "atomicredis.Unlock")); n != 1 {
		t.Errorf("%d atomicredis.Unlock spans, want 1", n)
	}
	bad := spanNamed(tel, "atomicredis.TryLock")
	if len(bad) != 1 || bad[0].Status().Code.String() != "Error" {
		t.Fatalf("atomicredis.TryLock of a bad name: %d spans, want 1 with an error status", len(bad))
	}
	if v, _ := attr(bad[0], atomicredisotel.AttrErrorType); v.AsString() != "invalid" {
		t.Errorf("bad name's error.type: %q, want invalid", v.AsString())
	}
}
