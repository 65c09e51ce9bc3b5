package atomicredis

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Operation names one public call, for a Hook: the kind of object (an
// Object… constant, "" for the engine's own calls such as Ping), its name
// ("" where there is none; LockAll's names joined by ","), and the method,
// as "Lock", "Unlock", "Campaign" or "MarkActiveMany".
type Operation struct{ Object, Name, Method string }

// Hook sees each public call of an engine that does I/O, with the caller's
// context: a tracer's way in (atomicredisotel is one). Start runs as the
// call begins and returns the context the call's commands run under; End
// runs as the call returns, with that context and the outcome as an Event.
// Every Start has its End. A Hook with an Observe(Event) method also gets
// every Event the observer gets. Its methods must be quick and must not
// call the engine. See "Hooks" in the package doc.
type Hook interface {
	Start(ctx context.Context, op Operation) context.Context
	End(ctx context.Context, op Operation, ev Event)
}

// WithHook has h see each public call (see Hook); an engine without one
// spends nothing on it.
func WithHook(h Hook) Option {
	return func(e *Engine) {
		e.hook = h
		if o, ok := h.(interface{ Observe(Event) }); ok {
			e.hookObserve = o.Observe
		}
	}
}

// hooked reports whether e has a hook (a nil engine has none).
func (e *Engine) hooked() bool { return e != nil && e.hook != nil }

// hooked runs f, the public call op, between e's hook's Start and End,
// which sees its outcome (see Hook); call it only when e.hooked().
func hooked[T any](e *Engine, ctx context.Context, op Operation, f func(context.Context) (T, error)) (T, error) {
	if ctx == nil { // the call's own check says so: no span for it
		return f(ctx)
	}
	ctx = e.hook.Start(ctx, op)
	began := time.Now()
	ended := false
	defer func() {
		if !ended {
			endPanicked(e.hook, ctx, op, time.Since(began))
		}
	}()
	var told Event // an acquisition's, as the observer was told of it
	fctx := ctx
	switch any(*new(T)).(type) {
	case *Lock, *Permit:
		fctx = context.WithValue(ctx, outcomeKey{}, &told)
	}
	v, err := f(fctx)
	ev := told
	if ev.Type == 0 { // not an acquisition, or refused before it began
		ev = endEvent(op, v, err, time.Since(began))
	}
	ended = true
	e.hook.End(ctx, op, ev.told())
	return v, err
}

// errPanicked is the Err of the Event End gets for a call that panicked
// (in a Pool, say): the panic goes on.
var errPanicked = errors.New("atomicredis: the call panicked")

// endPanicked is End for a hooked call that did not return (it panicked,
// in a Pool say, or its goroutine exited), so that no span is left open.
func endPanicked(hook Hook, ctx context.Context, op Operation, took time.Duration) {
	hook.End(ctx, op, Event{Type: EventDone, Object: op.Object, Name: op.Name, Err: errPanicked, Wait: took})
}

// outcomeKey is the context key of where an acquisition under a hook puts
// the event it told (tellOutcome), for End.
type outcomeKey struct{}

// tellOutcome puts ev, an acquisition's outcome, where hooked reads it.
func tellOutcome(ctx context.Context, ev Event) {
	if p, ok := ctx.Value(outcomeKey{}).(*Event); ok {
		*p = ev
	}
}

// hookedErr is hooked for a call that returns only an error.
func hookedErr(e *Engine, ctx context.Context, op Operation, f func(context.Context) error) error {
	_, err := hooked(e, ctx, op, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// hookedRelease is hooked for Unlock and Release of h: End gets
// EventReleased when it gave the holding back.
func hookedRelease(h *holding, ctx context.Context, op Operation, f func(context.Context) error) error {
	if ctx == nil {
		return f(ctx)
	}
	ctx = h.e.hook.Start(ctx, op)
	began := time.Now()
	ended := false
	defer func() {
		if !ended {
			endPanicked(h.e.hook, ctx, op, time.Since(began))
		}
	}()
	err := f(ctx)
	ev := h.event(EventReleased, nil)
	if err != nil {
		ev.Type, ev.Err = EventDone, err
	} else {
		ev.Held = time.Since(h.since)
	}
	ev.Wait = time.Since(began)
	ended = true
	h.e.hook.End(ctx, op, ev)
	return err
}

// endEvent is End's Event for the call op that returned v and err after
// took.
func endEvent(op Operation, v any, err error, took time.Duration) Event {
	ev := Event{Type: EventDone, Object: op.Object, Name: op.Name, Err: err, Wait: took}
	var h *holding
	switch v := v.(type) {
	case *Lock:
		ev.Type = EventNotAcquired
		if v != nil {
			h = &v.holding
		}
	case *Permit:
		ev.Type = EventNotAcquired
		if v != nil {
			h = &v.holding
		}
	case *MultiLock:
		ev.Type = EventNotAcquired
		if v != nil && len(v.locks) > 0 {
			h = &v.locks[0].holding // the first name's: LockAll's one fence to show
			for _, l := range v.locks {
				ev.Queued = ev.Queued || l != nil && l.queued // any name it waited for
			}
		}
	}
	if h != nil && err == nil {
		ev.Type, ev.Token, ev.Fence, ev.Queued = EventAcquired, h.token, h.fence, ev.Queued || h.queued
	}
	return ev
}

// joinNames is LockAll's names as its Operation's Name.
func joinNames(ns []string) string { return strings.Join(ns, ",") }

// observed tells the hook's Observe of ev, if the hook has one.
func (e *Engine) observed(ev Event) {
	if e.hookObserve != nil {
		e.hookObserve(ev)
	}
}
