package atomicredis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

// request is what Lock, RLock, WLock, AcquireSemaphore and their Try
// forms ask of take.
type request struct {
	ops      *holdOps
	prefix   string        // starts the token: "r-" or "w-" for a read-write lock's reader or writer
	ttl      time.Duration // the lease; 0: DefaultTTL
	wait     time.Duration // how long to wait; 0: DefaultWait
	mayWait  bool          // false: one attempt
	watchdog bool
	extra    []any  // the acquire script's arguments after the standard ones
	limit    int    // a semaphore's Limit (0: the stored one), reported if the stored one differs
	owner    string // stored with the holding; "" for none
	weight   int    // a semaphore's permit's weight (0 or 1: none to send)
}

// take checks r, acquires a holding of the named object into h, and tells
// the observer how it went.
func (e *Engine) take(ctx context.Context, h *holding, name string, r request) error {
	if err := e.prepare(ctx, h, name, &r); err != nil {
		return err
	}
	g, err := e.acquire(ctx, &h.acq)
	ev, err := e.settle(h, r, g, err)
	if e.hook != nil {
		tellOutcome(ctx, ev)
	}
	return err
}

// prepare checks r and readies h's acquisition (h.acq) of the named object:
// its token, keys and arguments.
func (e *Engine) prepare(ctx context.Context, h *holding, name string, r *request) error {
	obj, err := e.object(r.ops.kind, name)
	if err != nil {
		return err
	}
	if ctx == nil {
		return obj.err(errNilContext)
	}
	lease, err := obj.duration("TTL", r.ttl, DefaultTTL)
	if err != nil {
		return err
	}
	var wait time.Duration // a Try form's Wait is not used, so not checked
	if r.mayWait {
		if wait, err = obj.duration("Wait", r.wait, DefaultWait); err != nil {
			return err
		}
	}
	if len(r.owner) > MaxOwner {
		return obj.errorf("Owner is %d bytes, more than MaxOwner (%d): %w", len(r.owner), MaxOwner, ErrInvalid)
	}
	switch {
	case r.ops.observed: // a leader's value, after how many times it proclaimed (lib/election.lua)
		r.extra = append(r.extra[:len(r.extra):len(r.extra)], "0 "+r.owner)
	case r.owner != "" || r.weight > 1:
		r.extra = append(r.extra[:len(r.extra):len(r.extra)], r.owner)
	}
	if r.weight > 1 { // after the Owner ("" for none)
		r.extra = append(r.extra, r.weight)
	}
	token, err := newToken()
	if err != nil {
		return obj.err(err)
	}
	token = r.prefix + token
	var all, keys []any
	if r.ops.oneKey {
		all = r.ops.keys(obj)
		keys = all[:len(all):len(all)]
	} else {
		all = r.ops.keysAnd(obj, ":void:", token) // the object's keys and the token's abandon mark
		keys = all[: len(all)-1 : len(all)-1]
	}
	if r.ops.observed { // and, last, an election's observers
		observers := obj.key(":observers")
		all, keys = append(all, observers), append(keys, observers)
	}
	h.acq = acquisition{obj: obj, ops: r.ops, keys: all, token: token, tokenArg: token,
		lease: lease, wait: wait, extra: r.extra, limit: int64(r.limit), weight: int64(max(r.weight, 1))} // in h, allocated already
	h.keys = keys
	return nil
}

// settle makes h the holding its acquisition got (err nil: g), or reports
// why not, and tells the observer: it returns the event it told.
func (e *Engine) settle(h *holding, r request, g grant, err error) (Event, error) {
	a, obj := &h.acq, h.acq.obj
	if err == nil {
		h.e, h.obj, h.ops, h.token, h.tokenArg = e, obj, r.ops, a.token, a.tokenArg
		h.fence, h.queued, h.owner, h.late = g.fence, g.queued, r.owner, g.late
		h.since, h.watchdog, h.lease, h.extended, h.confirmed = time.Now(), r.watchdog, a.lease, g.sent, !g.handed
		if !e.adopt(h, r.watchdog || g.handed) { // granted as Close ran: pass it on
			e.abandon(a)
			err = obj.errorf("granted as the engine closed, and passed on: %w", ErrClosed)
		}
	}
	if err != nil {
		ev := obj.event(EventNotAcquired, "", 0, err)
		ev.Queued, ev.Wait = g.queued, g.took
		e.observe(ev)
		return ev, err
	}
	ev := h.event(EventAcquired, nil)
	ev.Wait = g.took
	e.emit(ev)
	return ev, nil
}

// newToken is a holding's random identifier.
func newToken() (string, error) {
	var id uuid.UUID // a version 4 UUID, read into place: one allocation, its string
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id.String(), nil
}

// msArg is d in ms as a script argument, boxed once for the defaults.
func msArg(d time.Duration) any {
	switch d {
	case DefaultTTL:
		return defaultTTLArg
	case defaultQueueTTL:
		return defaultQueueTTLArg
	}
	return d.Milliseconds()
}

var defaultTTLArg, defaultQueueTTLArg any = DefaultTTL.Milliseconds(), defaultQueueTTL.Milliseconds()

// acquisition is one attempt to take an object, waiting or not: its
// scripts, their keys, and the arguments after the standard ones.
//
// Acquire scripts share one shape: ARGV token, mode (0 one try, 1 wait, 2
// wait and believed queued), queue entry lifetime in ms, lease in ms, fence
// retention in ms, engine id, wake channel prefix, extra...; reply {1,
// fence} (held, for the full lease: also the pickup of a handoff; a
// semaphore adds the stored limit when it differs from the caller's), {0, hint
// ms, rank, arrival, ...} (not held: hint is how long the holder has left,
// -1 if none; rank the caller's place in the queue), {2} (the token was
// abandoned), {3} (a semaphore has no limit stored and none was given) or
// {4, limit} (a semaphore's limit in force is below the caller's weight).
// Abandon scripts take the same keys and ARGV token, ms the token's mark
// is kept (the call timeout), fence retention in ms, wake channel prefix.
type acquisition struct {
	obj      object
	ops      *holdOps
	keys     []any // the object's keys and the token's abandon mark
	token    string
	tokenArg any // token, as the scripts take it
	lease    time.Duration
	wait     time.Duration // 0: one attempt
	extra    []any
	limit    int64   // a semaphore's Limit, 0 otherwise
	weight   int64   // a semaphore's permit's weight, 1 otherwise
	args     [16]any // room for the acquire script's arguments
}

// attempt is an acquire script's reply.
type attempt struct {
	granted   bool
	fence     int64
	abandoned bool          // the token was abandoned
	noLimit   bool          // a semaphore with no stored limit, and none given
	tooHeavy  bool          // a semaphore's limit in force (limit) is below the caller's weight
	hint      time.Duration // how long the holder has left, -1 if none
	rank      int64         // the caller's place in the queue (one try: how many are queued)
	arrival   int64         // the arrival number the queue gave it, if it just queued
	limit     int64         // semaphores: the limit in force (on a grant: the stored one, only if it differs from the caller's)
	held      int64         // semaphores: the weight the permits hold
}

// The codes that open an acquire script's reply (see acquisition).
const (
	attemptQueued    = 0 // {0, hint ms, rank, arrival[, limit, held]}: not held
	attemptGranted   = 1 // {1, fence[, the stored limit]}
	attemptAbandoned = 2 // {2}
	attemptNoLimit   = 3 // {3}
	attemptTooHeavy  = 4 // {4, limit}
)

// decodeAttempt reads an acquire script's reply into an attempt.
func decodeAttempt(reply any) (a attempt, err error) {
	var v [6]int64
	if f, ok := reply.(int64); ok && f > 0 { // a fence alone: granted (lock_acquire's common case)
		return attempt{granted: true, fence: f}, nil
	}
	vs, _ := reply.([]any)
	n := len(vs)
	for i, x := range vs {
		f, ok := x.(int64)
		if !ok || i >= len(v) {
			return a, fmt.Errorf("unexpected reply %v", reply)
		}
		v[i] = f
	}
	switch {
	case v[0] == attemptGranted && (n == 2 || n == 3):
		a.granted, a.fence = true, v[1]
		if n == 3 {
			a.limit = v[2]
		}
	case n == 1 && v[0] == attemptAbandoned:
		a.abandoned = true
	case n == 1 && v[0] == attemptNoLimit:
		a.noLimit = true
	case n == 2 && v[0] == attemptTooHeavy:
		a.tooHeavy, a.limit = true, v[1]
	case n >= 4 && v[0] == attemptQueued:
		a.hint, a.rank, a.arrival = time.Duration(v[1])*time.Millisecond, v[2], v[3]
		if v[1] < 0 {
			a.hint = -1
		}
		if n == 6 {
			a.limit, a.held = v[4], v[5]
		}
	default:
		return a, fmt.Errorf("unexpected reply %v", reply)
	}
	return a, nil
}

// refusal says why a one-try acquisition of weight (1 but for a
// semaphore's) was refused.
func (a attempt) refusal(o object, weight int64) string {
	switch {
	case o.kind == kindSem && a.held >= a.limit:
		return fmt.Sprintf("%d of %d held, none free; the first permit times out in %v", a.held, a.limit, a.hint)
	case o.kind == kindSem && a.held+weight > a.limit && a.hint >= 0:
		return fmt.Sprintf("%d of %d held, no room for weight %d; the first permit times out in %v", a.held, a.limit, weight, a.hint)
	case o.kind == kindSem && a.held+weight > a.limit:
		return fmt.Sprintf("%d of %d held, no room for weight %d", a.held, a.limit, weight)
	case o.kind == kindSem:
		return fmt.Sprintf("%d of %d held, and waiters are queued ahead", a.held, a.limit)
	case a.hint < 0:
		return "free, but waiters are queued ahead"
	}
	return fmt.Sprintf("held by another; its lease ends in %v", a.hint)
}

// grant is what an acquisition got.
type grant struct {
	fence   int64
	arrival int64 // the number the queue gave the caller's entry, 0 if it never queued
	queued  bool  // it waited in the queue
	// handed: a release handed it over and woke the caller, which has not
	// confirmed it: its lease runs only to the end of the caller's queue
	// entry, set by the last extension sent at sent.
	handed bool
	sent   time.Time // when the granting call, or the last extension, was sent
	took   time.Duration
	// late: an attempt was sent and got no answer, so it may still land
	// after the holding ends (queueing the token, or taking the object
	// again): the release then voids the token as an abandon does.
	late bool
}

// waiting is the state of one acquisition's attempts.
type waiting struct {
	a        *acquisition
	start    time.Time
	deadline time.Time // start + a.wait
	g        grant
	rank     int64 // the caller's place in the queue at the last attempt
	failure  error // the last attempt's, if it got no answer
	mayHold  bool  // the server may hold something of the token's: abandon it on giving up
}

// acquire takes the object, in one attempt or, with a.wait > 0, queueing
// on the server until the object is handed over, the wait runs out or ctx
// ends. A waiter blocks on nothing of its own: the engine's wake
// subscription wakes it with the grant, and it extends its queue entry
// every third of the entry's lifetime (the same script: it also picks up
// what was handed to it, and takes the object if it is at the head and the
// holder is gone). Whatever the wait's end, an attempt that may have
// reached the server is abandoned, unless it granted, before acquire
// returns: a release never hands the object to a caller that was told it
// failed.
func (e *Engine) acquire(ctx context.Context, a *acquisition) (grant, error) {
	w := &waiting{a: a, start: time.Now()}
	w.deadline = w.start.Add(a.wait)
	g, err := e.attempts(ctx, w)
	if err != nil && w.mayHold {
		err = e.abandonNow(a, err)
	}
	g.took = time.Since(w.start)
	return g, err
}

// attemptArgs are a's acquire script's keys and arguments in a's own room
// (no allocation for the common shapes), and the index of the mode among
// them.
func (e *Engine) attemptArgs(a *acquisition, mode int) (args []any, modeAt int) {
	args = append(a.args[:0], a.keys...)
	modeAt = len(a.keys) + 1
	if a.ops.oneKey { // scripts/lock_acquire.lua: a one-try's mode and what follows it only if it has an Owner
		args = append(args, a.tokenArg, msArg(a.lease))
		if mode != 0 || len(a.extra) > 0 {
			args = append(args, mode, msArg(e.queueTTL), e.idArg)
		}
		modeAt++
	} else {
		args = append(args, a.tokenArg, mode, msArg(e.queueTTL), msArg(a.lease), e.retentionArg, e.idArg, e.wakeArg)
	}
	return append(args, a.extra...), modeAt
}

// attempts runs the acquire script until it grants, refuses for good, or
// the wait ends.
func (e *Engine) attempts(ctx context.Context, w *waiting) (grant, error) {
	a := w.a
	if e.isClosed() {
		return w.g, a.obj.err(ErrClosed)
	}
	var wk *waiter
	mode := 0
	if a.wait > 0 {
		mode = 1
		wk = e.wake.join(a.token)
		defer e.wake.leave(a.token)
	}
	args, modeAt := e.attemptArgs(a, mode)
	var pause time.Duration
	for {
		timeout := e.callTimeout
		if mode == 1 {
			timeout = min(timeout, time.Until(w.deadline))
		}
		if timeout <= 0 { // the wait ran out between attempts
			return w.g, w.ended(nil)
		}
		sent := time.Now()
		out, err := e.call(ctx, a.ops.acquire, args, e.replicas > 0, timeout)
		var at attempt
		if err == nil {
			at, err = decodeAttempt(out.reply)
		}
		if out.reached && unknownOutcome(err) { // it may have taken effect, and may still land
			w.mayHold, w.g.late = true, true
		}
		if err == nil && a.limit != 0 && at.limit != 0 && at.limit != a.limit {
			e.limitDiffers(a.obj, at.limit, a.limit)
		}
		switch {
		case err == nil && at.granted && out.shortfall != nil: // a failover could grant it again
			w.mayHold = true
			return w.g, a.obj.err(out.shortfall)
		case err != nil && e.isClosed():
			return w.g, a.obj.errorf("%w (last attempt: %w)", ErrClosed, err)
		case err != nil && ctxErr(ctx) != nil:
			if w.failure == nil && !w.g.queued {
				return w.g, w.ended(err) // the call's own error says it
			}
			return w.g, w.ended(ctxErr(ctx))
		case err != nil && (mode == 0 || !retryable(err)):
			return w.g, a.obj.err(err)
		case err != nil:
			if err := e.retry(ctx, w, err, &pause); err != nil {
				return w.g, err
			}
			continue
		case at.granted:
			w.g.fence, w.g.sent = at.fence, sent
			return w.g, nil
		case at.abandoned:
			return w.g, a.obj.errorf("attempt abandoned: %w", ErrNotAcquired)
		case at.noLimit:
			return w.g, a.obj.errorf("no limit is stored: give Limit: %w", ErrInvalid)
		case at.tooHeavy:
			return w.g, a.obj.errorf("weight %d is above the limit %d: %w", a.weight, at.limit, ErrInvalid)
		case mode == 0:
			return w.g, a.obj.errorf("%s: %w", at.refusal(a.obj, a.weight), ErrNotAcquired)
		}
		args[modeAt] = 2 // the next call extends the entry
		e.joined(w, at, sent)
		pause = 0
		if handed, err := e.await(ctx, w, wk, at.hint); handed || err != nil {
			return w.g, err
		}
	}
}

// retry pauses after a failed attempt that a wait may try again (err),
// up to pause (the last pause, updated), or returns why the wait ends.
func (e *Engine) retry(ctx context.Context, w *waiting, err error, pause *time.Duration) error {
	w.failure = err
	if !time.Now().Before(w.deadline) {
		return w.ended(nil)
	}
	*pause = backoff(*pause, 500*time.Millisecond)
	if errors.Is(err, redis.ErrPoolExhausted) {
		*pause = exhaustedPause // nothing was sent: look at the pool again soon
	}
	if err := e.sleep(ctx, min(*pause, time.Until(w.deadline))); err != nil {
		return w.ended(err)
	}
	return nil
}

// joined records an attempt that left the caller queued (w.queued), and
// tells the observer the first time.
func (e *Engine) joined(w *waiting, at attempt, sent time.Time) {
	if !w.g.queued {
		ev := w.a.obj.event(EventQueued, w.a.token, 0, nil)
		ev.Queued, ev.Wait = true, time.Since(w.start)
		e.observe(ev)
	}
	w.queued(at, sent)
	if e.queuedHook != nil && at.arrival > 0 {
		e.queuedHook(w.a.token, at.arrival)
	}
}

// queued records an attempt that left the caller queued. A grant handed to
// its entry came after the attempt ran (else the attempt would have picked
// it up), so its lease runs at least a queue TTL from when it was sent.
func (w *waiting) queued(at attempt, sent time.Time) {
	w.mayHold, w.failure = true, nil
	w.g.queued, w.g.sent, w.rank = true, sent, at.rank
	if at.arrival > 0 { // a new entry: a grant to an earlier one has lapsed
		w.g.arrival = at.arrival
	}
}

// await waits, queued, for a wake-up with the grant (handed), the time to
// extend the entry, or the end of the wait (err). hint is how long the
// holder has left: the head of the queue takes over when it is up.
func (e *Engine) await(ctx context.Context, w *waiting, wk *waiter, hint time.Duration) (handed bool, err error) {
	left := time.Until(w.deadline)
	if left <= 0 {
		return false, w.ended(nil)
	}
	next := e.queueTTL / 3
	if w.rank == 0 && hint >= 0 && hint < next {
		next = hint // 0: the lease ends in this millisecond (its key goes in the next)
	}
	t := time.NewTimer(min(next, left))
	defer t.Stop()
	select {
	case <-wk.signal:
		if f, arrival := wk.handed(); f != 0 && arrival == w.g.arrival && e.replicas == 0 {
			w.g.fence, w.g.handed = f, true
			return true, nil
		}
		// A call to look again; a grant to an entry of ours that lapsed
		// before the last attempt re-queued us; or a grant that must be
		// acknowledged by replicas before the caller runs: the next
		// attempt picks up whatever is ours.
	case <-t.C:
	case <-ctx.Done():
		return false, w.ended(ctx.Err())
	case <-e.stop.Done():
		return false, w.a.obj.errorf("waited %v, %d ahead in the queue: %w", time.Since(w.start).Round(time.Millisecond), w.rank, ErrClosed)
	}
	return false, nil
}

// ended is the error of a wait that ended before a grant: its Wait ran out
// (cause nil) or its ctx ended (cause), saying what the last attempt got:
// no answer (failure), or a place in the queue.
func (w *waiting) ended(cause error) error {
	o := w.a.obj
	if cause == nil {
		if w.failure != nil {
			return o.errorf("waited %v; last attempt: %w", w.a.wait, w.failure)
		}
		return o.errorf("waited %v, %d ahead in the queue: %w", w.a.wait, w.rank, ErrNotAcquired)
	}
	took := time.Since(w.start).Round(time.Millisecond)
	switch {
	case w.failure != nil:
		return o.errorf("gave up after %v: %w (last attempt: %w)", took, cause, w.failure)
	case w.g.queued:
		return o.errorf("gave up after %v, %d ahead in the queue: %w: %w", took, w.rank, ErrNotAcquired, cause)
	}
	return o.errorf("gave up after %v: %w", took, cause)
}

// abandonNow runs the abandon script for an acquisition that failed with
// err, bounded by the call timeout whatever the caller's ctx, and returns
// err. If the abandon got no answer in time, the error says so and the
// abandon is tried again in the background.
func (e *Engine) abandonNow(a *acquisition, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.callTimeout)
	defer cancel()
	if _, abErr := e.call(ctx, a.ops.abandon, e.abandonArgs(a), false, 0); abErr != nil {
		e.abandon(a)
		var oe *Error
		if errors.As(err, &oe) {
			err = oe.Err
		}
		return a.obj.errorf("%w; abandoning the attempt got no answer within %v (%v), so a release may hand it the %s until its queue entry or lease ends: tried again in the background", err, e.callTimeout, abErr, a.obj.kind.noun)
	}
	return err
}

// abandonArgs are the abandon script's keys and arguments for a. A late
// call of the token's, still on its way when the abandon lands, finds the
// token's mark for a call timeout: it then takes nothing.
func (e *Engine) abandonArgs(a *acquisition) []any {
	if a.ops.oneKey {
		return append(a.keys[:len(a.keys):len(a.keys)], a.tokenArg, e.callTimeout.Milliseconds(), e.wakeArg)
	}
	return append(a.keys[:len(a.keys):len(a.keys)], a.tokenArg, e.callTimeout.Milliseconds(), e.retentionArg, e.wakeArg)
}

// abandon runs the abandon script in the background, bounded by
// AbandonTimeout, for an acquisition whose caller has already been told it
// failed (on a closed engine, whose Close may be waiting already, at once).
// Close waits for it. If it fails, the lease still ends whatever the late
// acquire took; the failure is reported as a background error.
func (e *Engine) abandon(a *acquisition) {
	args := e.abandonArgs(a)
	obj, token, abandon := a.obj, a.token, a.ops.abandon
	f := func() {
		ctx, cancel := context.WithTimeout(context.Background(), AbandonTimeout)
		defer cancel()
		if _, err := e.call(ctx, abandon, args, false, AbandonTimeout); err != nil {
			e.emit(obj.event(EventBackgroundError, token, 0, obj.errorf("abandoning an acquisition: %w", err)))
		}
	}
	if !e.goTracked(f) {
		f()
	}
}
