package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// holdOps are the scripts one kind of holding (a lock, a read-write lock's
// hold, a permit) is taken and kept with, and the object's keys they
// take, in order: the release script takes them all, the extend and pttl
// scripts the first extendKeys and pttlKeys; the acquire and abandon
// scripts add the token's abandon mark.
type holdOps struct {
	kind                                    *kind
	suffixes                                []string
	extendKeys, pttlKeys                    int
	acquire, abandon, release, extend, pttl *script
	owner                                   *script // SetOwner's (its keys: the extend script's; an election's, see observed)
	observed                                bool    // an election's: the scripts above but extend and pttl take the observers key last
	wakesOwn                                bool    // the release script takes the engine's id and returns its own waiters' wake-ups (Engine.wakeOwn)
	oneKey                                  bool    // the lock's one key (scripts/lib/lock.lua): the abandon marks live in it (no key of the token's), and its scripts take no fence retention, nor its acquire the wake prefix
}

// keys are the object's keys in the scripts' order.
func (ops *holdOps) keys(o object) []any {
	return ops.keysAnd(o)
}

// keysAnd is keys followed by the key whose suffix is the concatenation
// of more, if any. The keys are cut from one string: one allocation, not
// one a key.
func (ops *holdOps) keysAnd(o object, more ...string) []any {
	suffix := 0
	for _, s := range more {
		suffix += len(s)
	}
	base := len(o.ns) + len(o.kind.word) + len(o.name) + 3 // <ns><word>:{<name>}
	n := base*(len(ops.suffixes)+1) + suffix
	for _, s := range ops.suffixes {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range ops.suffixes {
		o.writeKey(&b, s)
	}
	if len(more) > 0 {
		o.writeKey(&b, "")
		for _, s := range more {
			b.WriteString(s)
		}
	}
	all := b.String()
	keys := make([]any, 0, len(ops.suffixes)+1)
	at := 0
	for _, s := range ops.suffixes {
		keys = append(keys, all[at:at+base+len(s)])
		at += base + len(s)
	}
	if len(more) > 0 {
		keys = append(keys, all[at:])
	}
	return keys
}

// writeKey writes o.key(suffix) to b.
func (o object) writeKey(b *strings.Builder, suffix string) {
	b.WriteString(o.ns)
	b.WriteString(o.kind.word)
	b.WriteString(":{")
	b.WriteString(o.name)
	b.WriteString("}")
	b.WriteString(suffix)
}

// holding is what a Lock and a Permit share: one grant of an object, its
// lease, what keeps it in the background (a watchdog; or, for a holding a
// release handed over to a waiter, its confirmation), and how its end is
// told (Lost, Context, events).
//
// A handed-over holding's lease runs only to the end of its waiter's
// queue entry, which the waiter's last extension set: at the latest
// extended + queueTTL by the client's clock. Until it is confirmed (a
// extension with its own lease: the watchdog's first, TTL, Held, Extend, or
// a confirmation sent by itself a third into that time), a failed or late
// confirmation is a loss.
type holding struct {
	e        *Engine
	obj      object
	ops      *holdOps
	keys     []any // ops.keys(obj)
	token    string
	tokenArg any // token, as the scripts take it
	fence    int64
	queued   bool
	late     bool      // an attempt of its acquisition may still land: its release voids the token (grant.late)
	since    time.Time // when it was granted, for EventReleased
	watchdog bool

	slot int16 // its name's cluster slot, for the renewer (renew.go)

	acq       acquisition // how it was taken (take's, kept here to save an allocation)
	releasing sync.Mutex  // held by the release under way: the caller's or Close's
	owning    sync.Mutex  // held by the SetOwner under way, so that owner is the last one stored

	mu          sync.Mutex
	lease       time.Duration                         // what extensions ask for
	extended    time.Time                             // when the last extension the server applied (or the grant) was sent
	confirmed   bool                                  // false: handed over, its lease runs to extended + queueTTL
	retryAt     time.Time                             // when the renewer tries again after a failed extension; zero if none failed
	spanEnd     *time.Timer                           // while the renewer keeps it: its loss at extended + span, whatever the renewer is waiting on
	owner       string                                // the Owner stored with it
	onLost      func()                                // a MultiLock's: called when it is lost
	ended       error                                 // why it ended (released, lost, the engine closed); nil while held
	byClose     bool                                  // Close released it (or found it gone)
	unlocking   bool                                  // a release script is on its way: it, not a call that finds h gone, says how h ended
	lostCh      chan struct{}                         // made when Lost is first called
	lostClosed  bool                                  // Lost is closed
	expiredTold bool                                  // EventExpired went out: no other end of h is told
	contexts    map[*context.CancelCauseFunc]struct{} // of Context's contexts: cancelled when it ends
}

// leaseOver reports whether nothing extends h and its lease has run out by
// the client's clock, so that Close need not release it.
func (h *holding) leaseOver() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended != nil || !h.watchdog && h.confirmed && time.Since(h.extended) > h.lease
}

// adopt registers h, just granted, so that Close releases it, and starts
// its watchdog if watch; false, doing neither, if the engine is closed.
// Every so often it prunes the registry of holdings whose lease has run
// out by the client's clock (no watchdog extends them, and Close need not
// release them).
func (e *Engine) adopt(h *holding, watch bool) bool {
	var pruned []*holding
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	if e.held == nil {
		e.held = map[*holding]struct{}{}
	}
	if len(e.held) >= e.pruneAt {
		for old := range e.held {
			if old.leaseOver() {
				delete(e.held, old)
				pruned = append(pruned, old)
			}
		}
		e.pruneAt = max(1024, 2*len(e.held))
	}
	e.held[h] = struct{}{}
	if watch {
		h.startWatchdog()
	}
	e.mu.Unlock()
	for _, old := range pruned {
		old.expired()
	}
	return true
}

// expired tells the observer that h's lease ran out by the client's clock
// with nothing extending it and no release (a lease left to run out:
// EventExpired), unless h had ended already. h is not ended here: a late
// Unlock still sends its release (the server's lease may outlast the
// client's reckoning by a round trip), but the observer hears of no other
// end of h (end reports false), so a count of holdings comes down once.
func (h *holding) expired() {
	h.mu.Lock()
	tell := h.ended == nil && !h.expiredTold
	h.expiredTold = true
	h.mu.Unlock()
	if tell {
		h.e.observe(h.event(EventExpired, h.obj.errorf("fence %d: its lease ran out unreleased: %w", h.fence, ErrNotHeld)))
	}
}

// disown forgets h, released or lost.
func (e *Engine) disown(h *holding) {
	e.mu.Lock()
	delete(e.held, h)
	e.mu.Unlock()
}

// usable reports why a call on h cannot run: a nil ctx, a zero holding
// (no engine's), a closed engine (which has released h, or is about to),
// or h's end (released or lost: nothing is sent for it any more, so a
// holding given up as lost is never extended again).
func (h *holding) usable(ctx context.Context) error {
	if ctx == nil {
		return h.obj.err(errNilContext)
	}
	if h.e == nil {
		return errZeroHolding
	}
	if h.e.isClosed() {
		return h.obj.errorf("fence %d: %w", h.fence, ErrClosed)
	}
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	var oe *Error
	switch {
	case ended == nil:
		return nil
	case errors.Is(ended, ErrNotHeld):
		return ended
	case ended == errReleased:
		return h.obj.errorf("fence %d: released: %w", h.fence, ErrNotHeld)
	case errors.As(ended, &oe): // it names the object and the fence already
		return h.obj.err(fmt.Errorf("%w: %w", oe.Err, ErrNotHeld))
	}
	return h.obj.errorf("fence %d: %w: %w", h.fence, ended, ErrNotHeld)
}

// errReleased stands for the cause of a holding its caller released until
// a context needs it (cause), so that a release builds no error.
var errReleased = errors.New("released")

// cause is the cause of h's end, built from errReleased if it is that.
func (h *holding) cause(ended error) error {
	if ended == errReleased {
		return h.obj.errorf("fence %d: released", h.fence)
	}
	return ended
}

// released ends h, released, with cause, and tells the observer.
func (h *holding) released(cause error) {
	if !h.end(cause) {
		return // lost first (its lease ran out by this clock while the release tried): told then
	}
	ev := h.event(EventReleased, nil)
	ev.Held = time.Since(h.since)
	h.e.emit(ev)
}

// notHeld is the error for a holding a caller's call found gone, which it
// records as lost: the observer hears of it, the logger does not (the
// error is the caller's to log).
func (h *holding) notHeld() error {
	var err error
	if h.ops.kind == kindSem {
		err = h.obj.errorf("permit %d: released or timed out: %w", h.fence, ErrNotHeld)
	} else {
		err = h.obj.errorf("fence %d: released, expired or taken by another: %w", h.fence, ErrNotHeld)
	}
	h.mu.Lock()
	over := h.ended != nil || h.unlocking
	h.mu.Unlock()
	if over { // released or lost already, or a release on its way decides: Lost stays as that leaves it
		return err
	}
	h.closeLost()
	if h.end(err) {
		h.e.observe(h.lossEvent(err, h.goneReason()))
		h.lostHook()
	}
	return err
}

// lossEvent is the EventLost of h, lost for reason (Lost...).
func (h *holding) lossEvent(cause error, reason string) Event {
	ev := h.event(EventLost, cause)
	ev.Reason = reason
	return ev
}

// lostHook tells a MultiLock that h is lost.
func (h *holding) lostHook() {
	h.mu.Lock()
	f := h.onLost
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

// end marks the holding over for cause: its contexts end with it, and the
// engine forgets it. It reports whether it was the first to, and the
// observer is to hear of it (not after EventExpired).
func (h *holding) end(cause error) bool {
	h.mu.Lock()
	first := h.ended == nil
	told := h.expiredTold
	if first {
		h.ended = cause
	}
	contexts := h.contexts
	h.contexts = nil
	h.mu.Unlock()
	if len(contexts) > 0 {
		cause = h.cause(cause)
	}
	for cancel := range contexts {
		(*cancel)(cause)
	}
	if first {
		h.e.disown(h)
	}
	return first && !told
}

// lost records that the background found the holding gone (cause wraps
// ErrNotHeld). The first time, its contexts end and EventLost is reported
// (and logged).
func (h *holding) lost(cause error, reason string) {
	h.closeLost()
	if h.end(cause) {
		h.e.emit(h.lossEvent(cause, reason))
		h.lostHook()
	}
}

// closeLost closes Lost if the engine was keeping h (a watchdog; the
// confirmation of a handed-over holding) or is closing.
func (h *holding) closeLost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if (h.watchdog || !h.confirmed || h.byClose) && !h.lostClosed {
		h.lostClosed = true
		if h.lostCh != nil {
			close(h.lostCh)
		}
	}
}

func (h *holding) lostChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lostCh == nil {
		h.lostCh = make(chan struct{})
		if h.lostClosed {
			close(h.lostCh)
		}
	}
	return h.lostCh
}

// context is Lock.Context and Permit.Context. Its cause (context.Cause)
// says why it ended: the holding's release, its loss (an *Error wrapping
// ErrNotHeld), Close, or, without a watchdog, the lease's end.
func (h *holding) context(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	base, stop := parent, context.CancelFunc(func() {})
	if !h.watchdog {
		base, stop = context.WithDeadlineCause(parent, h.extended.Add(h.lease-h.lease/10),
			h.obj.errorf("fence %d: the lease ends (less a tenth for the client's clock): %w", h.fence, ErrNotHeld))
	}
	ctx, cancelCause := context.WithCancelCause(base)
	cancel := context.CancelCauseFunc(func(cause error) { cancelCause(cause); stop() })
	if h.ended != nil {
		cancel(h.cause(h.ended))
		return ctx, func() {}
	}
	if h.contexts == nil {
		h.contexts = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &cancel
	h.contexts[key] = struct{}{}
	return ctx, func() {
		h.mu.Lock()
		delete(h.contexts, key)
		h.mu.Unlock()
		cancel(nil)
	}
}

// endContextsBy ends a plain holding's Contexts when its lease, less a
// tenth, runs out, if that is before was (an Extend shortened it): each
// Context's deadline was set by the lease when it was made. A later
// extension moves that end on; a watchdog's Contexts end with the holding.
func (h *holding) endContextsBy(was time.Time) {
	h.mu.Lock()
	shorter := !h.watchdog && h.ended == nil && len(h.contexts) > 0 && h.extended.Add(h.lease-h.lease/10).Before(was)
	h.mu.Unlock()
	if shorter {
		h.endContextsAtLeaseEnd()
	}
}

// endContextsAtLeaseEnd ends h's Contexts at its lease's end (less a
// tenth), now if it has passed.
func (h *holding) endContextsAtLeaseEnd() {
	h.mu.Lock()
	if h.ended != nil || len(h.contexts) == 0 {
		h.mu.Unlock()
		return
	}
	if left := time.Until(h.extended.Add(h.lease - h.lease/10)); left > 0 {
		h.mu.Unlock()
		time.AfterFunc(left, h.endContextsAtLeaseEnd)
		return
	}
	contexts := h.contexts
	h.contexts = nil
	h.mu.Unlock()
	cause := h.obj.errorf("fence %d: the lease ends (less a tenth for the client's clock): %w", h.fence, ErrNotHeld)
	for cancel := range contexts {
		(*cancel)(cause)
	}
}

// event is an Event about h.
func (h *holding) event(t EventType, err error) Event {
	ev := h.obj.event(t, h.token, h.fence, err)
	ev.Queued = h.queued
	return ev
}

// closedChan is what Lost returns for a nil holding.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// canceled is what Context returns for a nil holding.
func canceled(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx, cancel
}

// currentOwner is the Owner last stored with h.
func (h *holding) currentOwner() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owner
}

// setOwner is Lock.SetOwner: it stores owner with the holding, if it is
// still held, and keeps it as h's. One call at a time, so that h's owner
// is the one the server stores.
func (h *holding) setOwner(ctx context.Context, owner string) error {
	if err := h.usable(ctx); err != nil {
		return err
	}
	if len(owner) > MaxOwner {
		return h.obj.errorf("Owner is %d bytes, more than MaxOwner (%d): %w", len(owner), MaxOwner, ErrInvalid)
	}
	h.owning.Lock()
	defer h.owning.Unlock()
	// The owner script takes the extend script's keys; an election's, the
	// wrapper's: the fence counter and the observers too.
	args := append(h.keys[:h.ops.extendKeys:h.ops.extendKeys], h.tokenArg, owner)
	if h.ops.observed {
		args = []any{h.keys[0], h.keys[1], h.keys[len(h.keys)-1], h.tokenArg, owner}
	}
	n, err := redis.Int64(h.e.eval(ctx, h.obj, h.ops.owner, args...))
	if err != nil {
		return err
	}
	if n == 0 {
		return h.notHeld()
	}
	h.mu.Lock()
	h.owner = owner
	h.mu.Unlock()
	return nil
}
