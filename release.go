package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Releasing a holding: Unlock and Release (release), Close's release
// (closeRelease), the release script's retries up to their deadline
// (unlock), the loss armed while a release tries (lapse), and the error of
// a release that got no answer (unanswered).

// release is Unlock and Release: it stops the watchdog, then releases h
// on the server (unless Close did: then it returns nil) and tells the
// observer.
func (h *holding) release(ctx context.Context) error {
	if h.e == nil {
		return errZeroHolding
	}
	h.stopWatchdog() // a nil ctx too: its lease then ends at its TTL
	if ctx == nil {
		return h.obj.err(errNilContext)
	}
	h.releasing.Lock()
	defer h.releasing.Unlock()
	h.mu.Lock()
	byClose := h.byClose
	h.mu.Unlock()
	if byClose {
		return nil
	}
	deadline := time.Now().Add(ReleaseTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.After(deadline) {
		deadline = dl
	}
	if stop := h.lapse(); stop != nil {
		defer func() { // unless the release failed: then it ends h in time
			h.mu.Lock()
			over := h.ended != nil
			h.mu.Unlock()
			if over {
				stop()
			}
		}()
	}
	released, err := h.unlock(ctx, deadline)
	switch {
	case err != nil:
		return err
	case !released:
		return h.notHeld()
	}
	h.released(errReleased)
	return nil
}

// closeRelease is Close's release of a holding the engine still holds,
// its watchdog stopped: unless the caller's own release got there first,
// it releases h by deadline and ends it with a cause wrapping ErrClosed.
// A holding already gone on the server ends as expired (EventExpired) if
// its lease had run out by the client's clock, else as lost.
func (h *holding) closeRelease(ctx context.Context, deadline time.Time) error {
	h.releasing.Lock()
	defer h.releasing.Unlock()
	h.mu.Lock()
	over := h.ended != nil
	h.byClose = !over
	h.mu.Unlock()
	if over {
		return nil
	}
	if stop := h.lapse(); stop != nil {
		defer stop()
	}
	released, err := h.unlock(ctx, deadline)
	if err != nil {
		h.closeLost()
		cause := h.obj.errorf("fence %d: Close could not release it (%v): %w", h.fence, err, ErrClosed)
		if h.end(cause) {
			h.e.observe(h.lossEvent(cause, LostClosed))
		}
		h.lostHook() // a MultiLock's Lost closes with its locks'
		h.mu.Lock()
		h.byClose = false // not released: the caller's Unlock tries again
		h.mu.Unlock()
		return err
	}
	cause := h.obj.errorf("fence %d: released by Close: %w", h.fence, ErrClosed)
	if !released { // gone on the server already
		h.closeLost()
		if h.leaseOver() { // a lease left to run out
			h.expired()
			h.end(cause)
		} else if h.end(cause) { // lost, told as Close saw it
			h.e.observe(h.lossEvent(h.obj.errorf("fence %d: expired or taken before Close: %w", h.fence, ErrNotHeld), h.goneReason()))
		}
		h.lostHook()
		return nil
	}
	h.closeLost()
	h.released(cause)
	h.lostHook()
	return nil
}

// releaseReply is a release script's reply (lib/queue.lua's q_reply): n,
// or {n, wake-ups...} when a lock's release handed it to a waiter of the
// caller's engine, which it did not publish ("token fence arrival", as
// the wake channel carries). n is 1 if the caller held the object, 0 if
// it no longer did.
type releaseReply struct {
	released bool
	wakeups  []string
}

// decodeRelease reads a release script's reply.
func decodeRelease(reply any) (releaseReply, error) {
	vs, ok := reply.([]any)
	if !ok {
		n, err := redis.Int64(reply, nil)
		if err != nil {
			return releaseReply{}, fmt.Errorf("unexpected reply %v", reply)
		}
		return releaseReply{released: n != 0}, nil
	}
	if len(vs) == 0 {
		return releaseReply{}, fmt.Errorf("unexpected reply %v", reply)
	}
	n, err := redis.Int64(vs[0], nil)
	wakeups, err2 := redis.Strings(vs[1:], nil)
	if err != nil || err2 != nil {
		return releaseReply{}, fmt.Errorf("unexpected reply %v", reply)
	}
	return releaseReply{released: n != 0, wakeups: wakeups}, nil
}

// releaseArgs are the release script's keys and arguments, in the
// acquisition's room (done with): the token, the fence retention (not the
// lock's one key, which keeps its fence), the wake prefix and, where the
// script wakes its caller's own waiters, the engine's id.
func (h *holding) releaseArgs() []any {
	args := append(append(h.acq.args[:0], h.keys...), h.tokenArg)
	if !h.ops.oneKey {
		args = append(args, h.e.retentionArg)
	}
	args = append(args, h.e.wakeArg)
	if h.ops.wakesOwn {
		args = append(args, h.e.idArg)
	}
	return args
}

// unlock runs the release script until the server answers, making its
// attempt even when ctx is already done, up to deadline, and retrying a
// pool that is momentarily exhausted and a connection that broke
// (releasing is idempotent: a retry of a release that did run finds the
// holding gone). A holding nobody releases blocks its name until its lease
// ends, which for one just handed over is its queue entry's (up to a
// second), so a cut connection is worth a retry. It reports whether the
// script released h.
func (h *holding) unlock(ctx context.Context, deadline time.Time) (bool, error) {
	caller := ctx
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	h.mu.Lock()
	h.unlocking = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.unlocking = false
		h.mu.Unlock()
	}()
	script, args := h.ops.release, h.releaseArgs()
	if h.late && h.ops.abandon != nil {
		// An attempt of its acquisition got no answer and may land yet:
		// had it been a plain release, the late attempt would queue the
		// token (to be handed the object, with nobody to use it, until its
		// entry lapsed) or take the object again. The abandon script frees
		// it as the release does and voids the token for a call timeout.
		script, args = h.ops.abandon, h.e.abandonArgs(&h.acq)
	}
	var (
		unanswered error // an earlier attempt's, sent and not answered: it may have released
		last       error // the last attempt's failure
		pause      time.Duration
		within     = time.Until(deadline) // for the error, if it goes unanswered
	)
	for {
		out, err := h.e.call(ctx, script, args, false, time.Until(deadline))
		if err == nil {
			r, err := decodeRelease(out.reply)
			if err != nil {
				return false, h.obj.err(err)
			}
			h.e.wakeOwn(r.wakeups)
			if r.released {
				return true, nil
			}
			if unanswered != nil {
				cause := h.obj.errorf("fence %d: released or expired: %w", h.fence, ErrNotHeld)
				h.closeLost()
				if h.end(cause) { // the caller's error says it too: the observer hears of it, the logger does not
					h.e.observe(h.lossEvent(cause, LostError))
					h.lostHook()
				}
				return false, h.obj.errorf("fence %d: no longer held after a release went unanswered (%w): that release or the lease's end freed it", h.fence, unanswered)
			}
			return false, nil
		}
		if h.ops.wakesOwn && out.reached && unknownOutcome(err) {
			// It may have handed h to a waiter of this engine, which only
			// its reply would have woken: every waiter looks again.
			h.e.wake.lookAgain()
		}
		switch {
		case errors.Is(err, redis.ErrPoolExhausted):
			pause = exhaustedPause
		case transient(err):
			pause = backoff(pause, 100*time.Millisecond)
			if out.reached && unknownOutcome(err) {
				unanswered = err
			}
		default:
			pause = 0
		}
		if pause == 0 || !time.Now().Before(deadline) {
			return false, h.unanswered(caller, err, last, within)
		}
		last = err
		time.Sleep(min(pause, time.Until(deadline)))
	}
}

// lapse arms h's loss for when its lease runs out by the client's clock
// (its span after the last extension), as a release begins: the release
// has stopped the watchdog, or the confirmation of a holding handed over,
// so nothing extends h any more, and its Contexts, which have no deadline
// of their own, must end before another can take the name, even while the
// release is still trying, or after it failed. A release that ends h
// first stops it (stop; nil if nothing was armed).
func (h *holding) lapse() (stop func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended != nil || !h.watchdog && h.confirmed { // over, or its Contexts end with the lease
		return nil
	}
	return time.AfterFunc(time.Until(h.extended.Add(h.span())), func() {
		h.mu.Lock()
		held := h.ended == nil
		h.mu.Unlock()
		if held {
			h.lost(h.obj.errorf("fence %d: the lease ran out while its release went unanswered: %w", h.fence, ErrNotHeld), LostError)
		}
	}).Stop
}

// unanswered is the error of a release that got no answer within its
// time: err, the last attempt's, naming the failure before it (last) when
// err is only the release's own deadline; context.DeadlineExceeded only if
// the caller's ctx ended.
func (h *holding) unanswered(caller context.Context, err, last error, within time.Duration) error {
	if cerr := caller.Err(); cerr != nil {
		if last != nil {
			return h.obj.errorf("fence %d: gave up: %w (last attempt: %w)", h.fence, cerr, last)
		}
		return h.obj.errorf("fence %d: gave up: %w (%w)", h.fence, cerr, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errSpent) {
		return h.obj.err(err)
	}
	if last != nil {
		return h.obj.errorf("fence %d: unanswered within %v: last attempt: %w", h.fence, within.Round(time.Millisecond), last)
	}
	return h.obj.errorf("fence %d: unanswered within %v", h.fence, within.Round(time.Millisecond))
}
