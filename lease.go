package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// span is how long the holder may count on the lease after extended: its
// own, or, until confirmed, the queue entry's lifetime, less a tenth. The
// server's lease runs at least the whole of it from when the extension was
// sent; the tenth is for the client's clock and its scheduling, so that a
// holder learns it lost the lease before the next one can take it. Called
// with mu held.
func (h *holding) span() time.Duration {
	span := h.lease
	if !h.confirmed {
		span = h.e.queueTTL
	}
	return span - span/10
}

// goneReason is why the server, having just answered, no longer has h:
// LostTaken while its span still runs (the lease cannot have run out
// before the script ran, which was before now), else LostExpired.
func (h *holding) goneReason() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Now().Before(h.extended.Add(h.span())) {
		return LostTaken
	}
	return LostExpired
}

// extendedAt records an extension the server applied, sent at sent.
func (h *holding) extendedAt(sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.extended.Before(sent) {
		h.extended = sent
	}
	h.confirmed = true
	h.retryAt = time.Time{} // back to the rhythm of a third into the lease
	if h.spanEnd != nil {
		h.spanEnd.Reset(time.Until(h.extended.Add(h.span())))
	}
}

// armSpanEnd arms h's loss for when its span runs out after its last
// extension, unless an extension moves it on: the renewer declares the
// loss itself when it is free to, but one batch's reply may keep it
// waiting past another holding's end (at most a call's timeout).
func (h *holding) armSpanEnd() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.spanEnd == nil && h.ended == nil {
		h.spanEnd = time.AfterFunc(time.Until(h.extended.Add(h.span())), h.spanRanOut)
	}
}

// stopSpanEnd disarms it: the renewer keeps h no more.
func (h *holding) stopSpanEnd() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.spanEnd != nil {
		h.spanEnd.Stop()
		h.spanEnd = nil
	}
}

// spanRanOut is the span's end: h is lost unless an extension moved it on
// meanwhile (then the timer is armed again) or the renewer let h go.
func (h *holding) spanRanOut() {
	h.mu.Lock()
	if h.ended != nil || h.spanEnd == nil {
		h.mu.Unlock()
		return
	}
	if left := time.Until(h.extended.Add(h.span())); left > 0 {
		h.spanEnd.Reset(left)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	if h.e.renew.keeps(h) {
		h.lost(h.obj.errorf("fence %d: extensions failed until the lease ran out (none was answered within its span): %w", h.fence, ErrNotHeld), LostError)
	}
}

// extendLease sends extension number seq with lease (a lock's Extend, a permit's
// Extend). held reports the script's answer: a stale extension (2: a newer
// one of this holder's already stands) counts as held. Too few replica
// acknowledgements are an error wrapping ErrNotReplicated, with held as
// the script said.
func (h *holding) extendLease(ctx context.Context, lease time.Duration, seq int64) (held bool, err error) {
	out, err := h.e.call(ctx, h.ops.extend, h.extendArgs(lease, seq), h.e.replicas > 0, 0)
	if err != nil {
		return false, h.obj.err(err)
	}
	return h.extendReply(out.reply, out.shortfall)
}

// extend is Lock.Extend and Permit.Extend: an extension with ttl (0: the
// current lease) that becomes the watchdog's lease from now on.
func (h *holding) extend(ctx context.Context, ttl time.Duration) error {
	if err := h.usable(ctx); err != nil {
		return err
	}
	ttl, err := h.obj.duration("TTL", ttl, h.currentLease())
	if err != nil {
		return err
	}
	// The new lease is the watchdog's from this instant: any extension
	// numbered after this one carries it.
	h.mu.Lock()
	before, ends := h.lease, h.extended.Add(h.lease-h.lease/10)
	h.lease = ttl
	seq := h.e.renew.extensions.Add(1)
	h.mu.Unlock()
	defer h.endContextsBy(ends) // a shorter lease: the Contexts made before end with it
	sent := time.Now()
	held, err := h.extendLease(ctx, ttl, seq)
	if err != nil && !(held && errors.Is(err, ErrNotReplicated)) {
		// The server may not have applied it: a longer lease is not
		// counted on (extensions numbered later carry the old one again),
		// a shorter one is, on the renewer's new rhythm.
		h.mu.Lock()
		if h.lease == ttl && ttl > before {
			h.lease = before
		}
		if h.spanEnd != nil { // a shorter lease kept: its span ends sooner
			h.spanEnd.Reset(time.Until(h.extended.Add(h.span())))
		}
		h.mu.Unlock()
		h.e.renew.poke()
		return err
	}
	if !held {
		h.mu.Lock()
		if h.lease == ttl {
			h.lease = before // the lease in force when it was found gone: it says expired or taken
		}
		h.mu.Unlock()
		return h.notHeld()
	}
	// Extended (even if too few replicas acknowledged it: the server keeps
	// it, and err says so): the renewer extends on the new rhythm.
	h.extendedAt(sent)
	h.e.renew.poke()
	return err
}

func (h *holding) currentLease() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// ttl is the remaining lease as the server counts it. A holding not yet
// confirmed is confirmed in the same script (an extension): its lease is then
// its own in full.
func (h *holding) ttl(ctx context.Context) (time.Duration, error) {
	if err := h.usable(ctx); err != nil {
		return 0, err
	}
	h.mu.Lock()
	confirmed, lease := h.confirmed, h.lease
	h.mu.Unlock()
	if !confirmed {
		if err := h.extend(ctx, lease); err != nil {
			return 0, err
		}
		return lease, nil
	}
	n := h.ops.pttlKeys
	ms, err := redis.Int64(h.e.eval(ctx, h.obj, h.ops.pttl, append(h.keys[:n:n], h.tokenArg)...))
	if err != nil {
		return 0, err
	}
	if ms == pttlGone {
		return 0, h.notHeld()
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// pttlGone is a pttl script's reply (lock_pttl, rw_pttl, semaphore_pttl)
// when the caller no longer holds: else it is the ms left.
const pttlGone = -3

// held turns a TTL call's outcome into Held's.
func held(_ time.Duration, err error) (bool, error) {
	if errors.Is(err, ErrNotHeld) {
		return false, nil
	}
	return err == nil, err
}

// extendArgs are the one-name extend script's keys and arguments for an
// extension numbered seq with lease.
func (h *holding) extendArgs(lease time.Duration, seq int64) []any {
	n := h.ops.extendKeys
	if h.ops.kind == kindSem {
		return append(h.keys[:n:n], h.seqKey(), h.tokenArg, lease.Milliseconds(), h.e.retentionArg, h.e.wakeArg, seq)
	}
	return append(h.keys[:n:n], h.tokenArg, lease.Milliseconds(), seq)
}

// seqKey is a permit's extension number's key: <sem>:seq:<id>.
func (h *holding) seqKey() string {
	return h.obj.key(":seq:") + h.token
}

// extendCode is an extend script's reply for one holding (lock_extend,
// rw_extend, semaphore_extend; each element of the _many scripts' array).
type extendCode int64

const (
	extendGone  extendCode = 0 // no longer held: nothing changed
	extendDone  extendCode = 1 // extended
	extendStale extendCode = 2 // held, but a newer extension of the holder's stands: nothing changed
)

// held reports whether the holding was still held.
func (c extendCode) held() bool { return c == extendDone || c == extendStale }

// decodeExtends reads the reply of an extend script for n holdings: one
// code, or (n > 1, or a _many script) an array of n codes.
func decodeExtends(reply any, many bool, n int) ([]extendCode, error) {
	if !many {
		v, err := redis.Int64(reply, nil)
		if err != nil || v < 0 || v > 2 || n != 1 {
			return nil, fmt.Errorf("unexpected reply %v", reply)
		}
		return []extendCode{extendCode(v)}, nil
	}
	vs, err := redis.Int64s(reply, nil)
	if err != nil || len(vs) != n {
		return nil, fmt.Errorf("unexpected reply %v", reply)
	}
	codes := make([]extendCode, n)
	for i, v := range vs {
		if v < 0 || v > 2 {
			return nil, fmt.Errorf("unexpected reply %v", reply)
		}
		codes[i] = extendCode(v)
	}
	return codes, nil
}

// extendReply reads a one-holding extend script's reply: held if it
// extended or found a newer extension of the holder's own. A reply that
// stands with too few replica acknowledgements is an error wrapping
// ErrNotReplicated, with held as the script said.
func (h *holding) extendReply(reply any, short error) (held bool, err error) {
	codes, err := decodeExtends(reply, false, 1)
	if err != nil {
		return false, h.obj.err(err)
	}
	if short != nil {
		return codes[0].held(), h.obj.err(short)
	}
	return codes[0].held(), nil
}
