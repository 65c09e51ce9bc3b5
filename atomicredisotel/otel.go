// Package atomicredisotel exports an atomicredis engine's metrics and
// traces through OpenTelemetry, as go-redis's redisotel and rueidis's
// rueidisotel do for their clients:
//
//	e := atomicredis.New(pool, atomicredisotel.Instrument())
//
// Metrics (units as OpenTelemetry's: seconds, {holding}, ...):
//
//   - atomicredis.acquire.duration (histogram, s): each acquisition call
//     (Lock, TryLock, RLock, WLock, AcquireSemaphore, LockAll, Campaign and
//     their Try forms), with atomicredis.object, atomicredis.outcome
//     (acquired, not_acquired, error), atomicredis.queued (whether it
//     waited in the queue) and, for an error, error.type.
//   - atomicredis.hold.duration (histogram, s): how long each released
//     holding was held.
//   - atomicredis.holdings (up-down counter): holdings this process holds.
//     A lease left to run out without Unlock counts until the engine sees
//     it over (EventExpired: its registry's pruning, Close, or a call on
//     it).
//   - atomicredis.waiters (up-down counter): acquisitions of this process
//     waiting in a queue.
//   - atomicredis.lost (counter): holdings lost, with atomicredis.lost.reason
//     (expired, taken, closed, error). Alert on it: work ran, or was about
//     to, without the lock.
//   - atomicredis.extend.failures (counter): extensions that failed (the
//     lease may still hold; a loss follows if they keep failing).
//   - atomicredis.background.errors (counter): abandons and wake-ups that
//     failed.
//
// Every metric has atomicredis.object and the WithAttributes attributes;
// names are left out unless WithNameAttribute maps them (a name per cart
// or user would make one series each).
//
// Spans: one INTERNAL span per public call, named atomicredis.<Method>
// (atomicredis.Lock, atomicredis.Unlock, atomicredis.Campaign,
// atomicredis.MarkActiveMany, ...), a child of the caller's span and the
// parent of the client's own command spans where the pool passes the
// context on (the goredis adapter with redisotel installed on its client),
// with the fence, whether it queued and how long it took.
package atomicredisotel

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/atomicredis/atomicredis"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/atomicredis/atomicredis/atomicredisotel"

// The attributes' keys.
const (
	AttrObject     = attribute.Key("atomicredis.object")
	AttrName       = attribute.Key("atomicredis.name")
	AttrOutcome    = attribute.Key("atomicredis.outcome")
	AttrQueued     = attribute.Key("atomicredis.queued")
	AttrLostReason = attribute.Key("atomicredis.lost.reason")
	AttrFence      = attribute.Key("atomicredis.fence")
	AttrWait       = attribute.Key("atomicredis.wait.duration") // s, on spans
	AttrErrorType  = attribute.Key("error.type")
)

// Option configures Instrument.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	attrs []attribute.KeyValue
	name  func(string) (string, bool)
}

// WithMeterProvider sets the MeterProvider (default: otel's global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the TracerProvider (default: otel's global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithAttributes adds attrs to every metric and span (a service's role,
// the Redis it runs on).
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// WithNameAttribute adds atomicredis.name to metrics and spans, as f maps
// each object's name (ok false: none for that name). Names can be
// unbounded (a lock per cart): map them to a bounded set, as
// "cart:42" to "cart". LockAll's name is its names joined by ",".
func WithNameAttribute(f func(name string) (string, bool)) Option {
	return func(c *config) { c.name = f }
}

// Instrument returns the engine option that exports the engine's metrics
// and spans (see the package doc). Instruments that cannot be made are
// reported to otel.Handle and left out.
func Instrument(opts ...Option) atomicredis.Option {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	return atomicredis.WithHook(newHook(c))
}

// hook is the engine's Hook: spans from Start and End, metrics from End
// (acquisitions) and Observe (the rest).
type hook struct {
	cfg    config
	tracer trace.Tracer
	sets   sync.Map // series → *measure

	acquire, hold                 metric.Float64Histogram
	holdings, waiters             metric.Int64UpDownCounter
	lost, extendFails, background metric.Int64Counter
}

// durationBuckets are the histograms' bounds, in s: from a round trip on
// a LAN to a long wait in a queue.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

func newHook(c config) *hook {
	m := c.mp.Meter(ScopeName)
	h := &hook{cfg: c, tracer: c.tp.Tracer(ScopeName)}
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	h.acquire, err = m.Float64Histogram("atomicredis.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long an acquisition call took, by outcome."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	note(err)
	h.hold, err = m.Float64Histogram("atomicredis.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a released holding was held."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	note(err)
	h.holdings, err = m.Int64UpDownCounter("atomicredis.holdings", metric.WithUnit("{holding}"),
		metric.WithDescription("Locks, holds and permits this process holds."))
	note(err)
	h.waiters, err = m.Int64UpDownCounter("atomicredis.waiters", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquisitions of this process waiting in a queue."))
	note(err)
	h.lost, err = m.Int64Counter("atomicredis.lost", metric.WithUnit("{holding}"),
		metric.WithDescription("Holdings lost while held, by reason."))
	note(err)
	h.extendFails, err = m.Int64Counter("atomicredis.extend.failures", metric.WithUnit("{extension}"),
		metric.WithDescription("Extensions that failed; the lease may still hold."))
	note(err)
	h.background, err = m.Int64Counter("atomicredis.background.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Abandons and wake-ups that failed."))
	note(err)
	if len(errs) > 0 {
		otel.Handle(fmt.Errorf("atomicredisotel: %w", errors.Join(errs...)))
	}
	return h
}

// base is the attributes every metric and span of an object has.
func (h *hook) base(object, name string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, len(h.cfg.attrs)+2)
	attrs = append(attrs, h.cfg.attrs...)
	if object != "" {
		attrs = append(attrs, AttrObject.String(object))
	}
	if name != "" {
		attrs = append(attrs, AttrName.String(name))
	}
	return attrs
}

// series names one set of a metric's attributes.
type series struct {
	object, name             string // name: as WithNameAttribute mapped it
	outcome, errType, reason string
	queued, withQueued       bool
}

// mapped is name as WithNameAttribute maps it ("": none).
func (h *hook) mapped(name string) string {
	if h.cfg.name == nil || name == "" {
		return ""
	}
	if n, ok := h.cfg.name(name); ok {
		return n
	}
	return ""
}

// measure is the options of a measurement of one series, made once: a
// metric's attributes are a few objects and outcomes, and building a set
// (and the options' slices) for every measurement would cost each call
// allocations and a sort.
type measure struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// of returns the measurement options of the series s.
func (h *hook) of(s series) *measure {
	if m, ok := h.sets.Load(s); ok {
		return m.(*measure)
	}
	kvs := h.base(s.object, s.name)
	if s.outcome != "" {
		kvs = append(kvs, AttrOutcome.String(s.outcome))
	}
	if s.withQueued {
		kvs = append(kvs, AttrQueued.Bool(s.queued))
	}
	if s.errType != "" {
		kvs = append(kvs, AttrErrorType.String(s.errType))
	}
	if s.reason != "" {
		kvs = append(kvs, AttrLostReason.String(s.reason))
	}
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	m, _ := h.sets.LoadOrStore(s, &measure{add: []metric.AddOption{o}, record: []metric.RecordOption{o}})
	return m.(*measure)
}

// spanStart is how every span starts: its attributes come at its end, in
// one call (fewer allocations than some at the start and more at the end).
var spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// Start begins op's span.
func (h *hook) Start(ctx context.Context, op atomicredis.Operation) context.Context {
	ctx, _ = h.tracer.Start(ctx, "atomicredis."+op.Method, spanStart...)
	return ctx
}

// End ends op's span and, for an acquisition, records its duration.
func (h *hook) End(ctx context.Context, op atomicredis.Operation, ev atomicredis.Event) {
	span := trace.SpanFromContext(ctx)
	outcome := ""
	switch ev.Type {
	case atomicredis.EventAcquired, atomicredis.EventElected:
		outcome = "acquired"
	case atomicredis.EventNotAcquired:
		outcome = "not_acquired"
		if !errors.Is(ev.Err, atomicredis.ErrNotAcquired) {
			outcome = "error"
		}
	}
	name := h.mapped(op.Name)
	if span.IsRecording() {
		var kv [8]attribute.KeyValue
		attrs := kv[:0]
		if op.Object != "" {
			attrs = append(attrs, AttrObject.String(op.Object))
		}
		if name != "" {
			attrs = append(attrs, AttrName.String(name))
		}
		attrs = append(attrs, AttrWait.Float64(ev.Wait.Seconds()))
		if ev.Fence != 0 {
			attrs = append(attrs, AttrFence.Int64(ev.Fence))
		}
		if outcome != "" {
			attrs = append(attrs, AttrOutcome.String(outcome), AttrQueued.Bool(ev.Queued))
		}
		if ev.Err != nil && outcome != "not_acquired" {
			span.RecordError(ev.Err)
			span.SetStatus(codes.Error, ev.Err.Error())
			attrs = append(attrs, AttrErrorType.String(errorType(ev.Err)))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
	if outcome == "" {
		return
	}
	s := series{object: op.Object, name: name, outcome: outcome, queued: ev.Queued, withQueued: true}
	if outcome == "error" {
		s.errType = errorType(ev.Err)
	}
	h.acquire.Record(ctx, ev.Wait.Seconds(), h.of(s).record...)
}

// Observe counts what happens to holdings, in calls and in the background.
func (h *hook) Observe(ev atomicredis.Event) {
	ctx := context.Background()
	s := series{object: ev.Object, name: h.mapped(ev.Name)}
	switch ev.Type {
	case atomicredis.EventAcquired, atomicredis.EventElected:
		m := h.of(s)
		h.holdings.Add(ctx, 1, m.add...)
		if ev.Queued {
			h.waiters.Add(ctx, -1, m.add...)
		}
	case atomicredis.EventNotAcquired:
		if ev.Queued {
			h.waiters.Add(ctx, -1, h.of(s).add...)
		}
	case atomicredis.EventQueued, atomicredis.EventCampaign:
		h.waiters.Add(ctx, 1, h.of(s).add...)
	case atomicredis.EventExpired: // a lease left to run out: its end, not a loss
		h.holdings.Add(ctx, -1, h.of(s).add...)
	case atomicredis.EventReleased:
		m := h.of(s)
		h.holdings.Add(ctx, -1, m.add...)
		h.hold.Record(ctx, ev.Held.Seconds(), m.record...)
	case atomicredis.EventLost, atomicredis.EventDeposed:
		h.holdings.Add(ctx, -1, h.of(s).add...)
		s.reason = ev.Reason
		if s.reason == "" {
			s.reason = atomicredis.LostError
		}
		h.lost.Add(ctx, 1, h.of(s).add...)
	case atomicredis.EventExtendFailed:
		h.extendFails.Add(ctx, 1, h.of(s).add...)
	case atomicredis.EventBackgroundError:
		h.background.Add(ctx, 1, h.of(s).add...)
	}
}

// errorType is error.type for err: the sentinel it wraps, else _OTHER.
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{atomicredis.ErrNotAcquired, "not_acquired"},
		{atomicredis.ErrNotHeld, "not_held"},
		{atomicredis.ErrInvalid, "invalid"},
		{atomicredis.ErrClosed, "closed"},
		{atomicredis.ErrNotReplicated, "not_replicated"},
		{context.DeadlineExceeded, "context_deadline_exceeded"},
		{context.Canceled, "context_canceled"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "_OTHER"
}
