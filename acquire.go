package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

// acquisition is one attempt to take an object, waiting or not: the
// acquire script and its abandon script, their keys, and the arguments
// after the standard ones.
//
// Acquire scripts share one shape: ARGV token, mode (0 one try, 1 wait, 2
// wait and believed queued), queue entry lifetime in ms, lease in ms, fence
// retention in ms, engine id, wake channel prefix, extra...; reply {1,
// fence} (held, for the full lease: also the pickup of a handoff), {0, hint
// ms, rank, arrival, ...} (not held: hint is how long the holder has left,
// -1 if none; rank the caller's place in the queue), {2} (the token was
// abandoned) or {3} (a semaphore has no limit stored and none was given).
// Abandon scripts take the same keys and ARGV token, ms a late call of the
// token's could still act for, fence retention in ms, wake channel prefix.
type acquisition struct {
	obj              object
	acquire, abandon *redis.Script
	keys             []any // the object's keys and the token's abandon mark
	token            string
	tokenArg         any // token, as the scripts take it
	lease            time.Duration
	wait             time.Duration // 0: one attempt
	extra            []any
}

// attempt is an acquire script's reply.
type attempt struct {
	granted   bool
	fence     int64
	abandoned bool          // the token was abandoned
	noLimit   bool          // a semaphore with no stored limit, and none given
	hint      time.Duration // how long the holder has left, -1 if none
	rank      int64         // the caller's place in the queue (one try: how many are queued)
	arrival   int64         // the arrival number the queue gave it, if it just queued
	limit     int64         // semaphores: the limit in force
	held      int64         // semaphores: the permits held
}

func decodeAttempt(reply any) (a attempt, err error) {
	v, err := redis.Int64s(reply, nil)
	if err != nil || len(v) == 0 {
		return a, fmt.Errorf("unexpected reply %v", reply)
	}
	switch {
	case v[0] == 1 && len(v) == 2:
		a.granted, a.fence = true, v[1]
	case v[0] == 2:
		a.abandoned = true
	case v[0] == 3:
		a.noLimit = true
	case v[0] == 0 && len(v) >= 4:
		a.hint, a.rank, a.arrival = time.Duration(v[1])*time.Millisecond, v[2], v[3]
		if v[1] < 0 {
			a.hint = -1
		}
		if len(v) == 6 {
			a.limit, a.held = v[4], v[5]
		}
	default:
		return a, fmt.Errorf("unexpected reply %v", reply)
	}
	return a, nil
}

// refusal says why a one-try acquisition was refused.
func (a attempt) refusal(o object) string {
	switch {
	case o.kind == kindSem && a.held >= a.limit:
		return fmt.Sprintf("all %d permits are held; the first times out in %v", a.limit, a.hint)
	case a.hint < 0:
		return "free, but waiters are queued ahead"
	}
	return fmt.Sprintf("held by another; its lease ends in %v", a.hint)
}

// grant is what an acquisition got.
type grant struct {
	fence   int64
	arrival int64 // the number the queue gave the caller, 0 if it never queued (tests check the order by it)
	queued  bool  // it waited in the queue
	// handed: a release handed it over and woke the caller, which has not
	// confirmed it: its lease runs only to the end of the caller's queue
	// entry, set by the last extension sent at sent.
	handed bool
	sent   time.Time // when the granting call, or the last extension, was sent
	took   time.Duration
}

// acquire takes the object, in one attempt or, with a.wait > 0, queueing
// on the server until the object is handed over, the wait runs out or ctx
// ends. A waiter blocks on nothing of its own: the engine's wake
// subscription wakes it with the grant, and it extends its queue entry
// every third of the entry's lifetime (the same script: it also picks up
// what was handed to it, and takes the object if it is at the head and the
// holder is gone). Whatever the wait's end, an attempt that may have
// reached the server is abandoned in the background unless it granted.
func (e *Engine) acquire(ctx context.Context, a *acquisition) (grant, error) {
	start := time.Now()
	g, err := e.wait(ctx, a, start)
	g.took = time.Since(start)
	if err != nil {
		e.emit(Event{Type: EventNotAcquired, Object: a.obj.kind.noun, Name: a.obj.name, Queued: g.queued, Wait: g.took, Err: err})
		return g, err
	}
	e.emit(Event{Type: EventAcquired, Object: a.obj.kind.noun, Name: a.obj.name, Token: a.token, Fence: g.fence, Queued: g.queued, Wait: g.took})
	return g, nil
}

func (e *Engine) wait(ctx context.Context, a *acquisition, start time.Time) (g grant, err error) {
	if e.isClosed() {
		return g, a.obj.err(ErrClosed)
	}
	mode := 0
	var w *waiter
	if a.wait > 0 {
		mode = 1
		w = e.wake.join(a.token)
		defer e.wake.leave(a.token)
	}
	args := make([]any, 0, len(a.keys)+7+len(a.extra))
	args = append(append(args, a.keys...), a.tokenArg, mode, e.queueTTL.Milliseconds(), a.lease.Milliseconds(),
		e.retentionArg, e.id, e.wakeArg)
	args = append(args, a.extra...)
	deadline := start.Add(a.wait)
	var (
		abandon bool  // the server may hold something of the token's
		failure error // the last attempt's, if it got no answer
		pause   time.Duration
		rank    int64
	)
	giveUp := func(err error) (grant, error) {
		if abandon {
			e.abandon(a)
		}
		return g, err
	}
	for {
		timeout := e.callTimeout
		if mode == 1 {
			timeout = min(timeout, time.Until(deadline))
		}
		if timeout <= 0 { // the wait ran out between attempts
			if failure != nil {
				return giveUp(a.obj.errorf("waited %v; last attempt: %w", a.wait, failure))
			}
			return giveUp(a.obj.errorf("waited %v, %d ahead in the queue: %w", a.wait, rank, ErrNotAcquired))
		}
		var at attempt
		sent := time.Now()
		out, err := e.call(ctx, a.acquire, args, e.replicas > 0, timeout)
		if err == nil {
			at, err = decodeAttempt(out.reply)
		}
		abandon = abandon || out.reached && unknownOutcome(err)
		if err == nil && at.granted && out.shortfall != nil { // a failover could grant it again
			abandon = true
			return giveUp(a.obj.err(out.shortfall))
		}
		switch {
		case err != nil && ctxErr(ctx) != nil:
			took := time.Since(start).Round(time.Millisecond)
			switch {
			case failure != nil: // the last answer was no answer
				return giveUp(a.obj.errorf("gave up after %v: %w (last attempt: %w)", took, ctxErr(ctx), failure))
			case g.queued: // the server had queued the caller
				return giveUp(a.obj.errorf("gave up after %v, %d ahead in the queue: %w: %w", took, rank, ErrNotAcquired, ctxErr(ctx)))
			}
			return giveUp(a.obj.errorf("gave up after %v: %w", took, err))
		case err != nil && (mode == 0 || !retryable(err)):
			return giveUp(a.obj.err(err))
		case err != nil:
			if !time.Now().Before(deadline) {
				return giveUp(a.obj.errorf("waited %v; last attempt: %w", a.wait, err))
			}
			failure = err
			pause = backoff(pause, 500*time.Millisecond)
			if errors.Is(err, redis.ErrPoolExhausted) {
				pause = exhaustedPause // nothing was sent: look at the pool again soon
			}
			if err := sleep(ctx, min(pause, time.Until(deadline))); err != nil {
				return giveUp(a.obj.errorf("gave up after %v: %w (last attempt: %w)", time.Since(start).Round(time.Millisecond), err, failure))
			}
			continue
		case at.granted:
			g.fence, g.sent = at.fence, sent
			return g, nil
		case at.abandoned:
			return giveUp(a.obj.errorf("attempt abandoned: %w", ErrNotAcquired))
		case at.noLimit:
			return giveUp(a.obj.errorf("no limit is stored: give Limit: %w", ErrInvalid))
		case mode == 0:
			return giveUp(a.obj.errorf("%s: %w", at.refusal(a.obj), ErrNotAcquired))
		}

		args[len(a.keys)+1] = 2 // the next call extends the entry
		// Queued: wait for the wake-up, the time to extend, or the end. A
		// grant handed to this entry came after this call ran (else the
		// call would have picked it up), so its lease runs at least a queue
		// TTL from when the call was sent.
		abandon, failure, pause = true, nil, 0
		g.queued, g.sent, rank = true, sent, at.rank
		if at.arrival > 0 { // a new entry: a grant to an earlier one has lapsed
			g.arrival = at.arrival
		}
		left := time.Until(deadline)
		if left <= 0 {
			return giveUp(a.obj.errorf("waited %v, %d ahead in the queue: %w", a.wait, rank, ErrNotAcquired))
		}
		next := e.queueTTL / 3
		if rank == 0 && at.hint > 0 && at.hint < next {
			next = at.hint // the head takes over when the holder's time is up
		}
		t := time.NewTimer(min(next, left))
		select {
		case <-w.signal:
			if f, arrival := w.handed(); f != 0 && arrival == g.arrival && e.replicas == 0 {
				t.Stop()
				g.fence, g.handed = f, true
				return g, nil
			}
			// A call to look again; a grant to an entry of ours that lapsed
			// before this call re-queued us; or a grant that must be
			// acknowledged by replicas before the caller runs: the next
			// attempt picks up whatever is ours.
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return giveUp(a.obj.errorf("gave up after %v, %d ahead in the queue: %w: %w", time.Since(start).Round(time.Millisecond), rank, ErrNotAcquired, ctx.Err()))
		}
		t.Stop()
	}
}

// abandon runs the abandon script in the background, bounded by AbandonTimeout,
// for an acquisition whose caller has already been told it failed. Close
// waits for it. If it fails, the lease still ends whatever the late acquire
// took; the failure is reported as a background error.
func (e *Engine) abandon(a *acquisition) {
	args := append(a.keys[:len(a.keys):len(a.keys)], a.tokenArg, max(a.lease, e.queueTTL).Milliseconds(), e.retentionArg, e.wakeArg)
	obj, token, abandon := a.obj, a.token, a.abandon
	e.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), AbandonTimeout)
		defer cancel()
		if _, err := e.call(ctx, abandon, args, false, AbandonTimeout); err != nil {
			e.emit(Event{Type: EventBackgroundError, Object: obj.kind.noun, Name: obj.name, Token: token,
				Err: obj.errorf("abandoning an acquisition: %w", err)})
		}
	})
}

// take makes one acquisition of a holding of ops' kind into h.
func (e *Engine) take(ctx context.Context, h *holding, o object, ops *holdOps, token string, lease, wait time.Duration, watchdog bool, extra ...any) error {
	keys := ops.keys(o)
	tokenArg := any(token)
	g, err := e.acquire(ctx, &acquisition{obj: o, acquire: ops.acquire, abandon: ops.abandon,
		keys: append(keys, o.key(":void:"+token)), token: token, tokenArg: tokenArg, lease: lease, wait: wait, extra: extra})
	if err != nil {
		return err
	}
	h.e, h.obj, h.ops, h.keys, h.token, h.tokenArg = e, o, ops, keys, token, tokenArg
	h.fence, h.arrival, h.queued = g.fence, g.arrival, g.queued
	h.since, h.watchdog, h.lease, h.extended, h.confirmed = time.Now(), watchdog, lease, g.sent, !g.handed
	if watchdog || g.handed {
		h.startWatchdog()
	}
	return nil
}

// newToken is a holding's random identifier.
func newToken() (string, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return id.String(), nil
}
