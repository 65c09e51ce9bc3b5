package atomicredis

import (
	"context"
	"errors"
	"time"

	"github.com/gomodule/redigo/redis"
)

// startWatchdog starts extending in the background. Called by adopt,
// under the engine's mu, so that Close, which takes it, finds every
// watchdog it must stop.
func (h *holding) startWatchdog() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stopWatch, h.watchDone, h.reset = cancel, make(chan struct{}), make(chan struct{}, 1)
	go h.watch(ctx)
}

// stopWatchdog ends the watchdog and waits until it has, so no extension is in
// flight afterwards. Safe to call more than once, and without one.
func (h *holding) stopWatchdog() {
	if h.stopWatch != nil {
		h.stopWatch()
		<-h.watchDone
	}
}

// watch extends the lease: every lease/3 (Redisson's rhythm) with a watchdog;
// once, a third into its provisional lease (most short holds are over by
// then), for a handed-over holding without one. A reply saying the holding
// is gone is a loss. A failed extension is retried every tenth of the lease
// until the lease would have run out since the last extension was sent; then
// the holding must be presumed lost. The client clock decides only when
// the holder stops trusting its lease (and paces extensions); who holds it
// is always the server's answer.
func (h *holding) watch(ctx context.Context) {
	defer close(h.watchDone)
	var retry time.Duration
	for {
		h.mu.Lock()
		lease, extended, confirmed := h.lease, h.extended, h.confirmed
		h.mu.Unlock()
		if confirmed && !h.watchdog {
			return // confirmed by TTL, Held or Extend
		}
		next := retry
		switch {
		case next > 0:
		case confirmed: // a third into the lease, counted from when it was granted or extended
			next = time.Until(extended.Add(lease / 3))
		default: // by then it has had its queue entry a third as long
			next = time.Until(extended.Add(h.e.queueTTL / 3))
		}
		t := time.NewTimer(max(next, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-h.reset:
			t.Stop()
			retry = 0
			continue
		case <-t.C:
		}
		h.mu.Lock()
		h.seq++
		lease, extended, seq, span := h.lease, h.extended, h.seq, h.span()
		h.mu.Unlock()
		callCtx, cancel := context.WithDeadline(ctx, extended.Add(span))
		sent := time.Now()
		held, err := h.extendLease(callCtx, lease, seq)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && held:
			h.extendedAt(sent)
			retry = 0
		case err == nil:
			h.lost(h.obj.errorf("fence %d: the lease ran out or another took it: %w", h.fence, ErrNotHeld))
			return
		default:
			h.e.emit(h.event(EventExtendFailed, err))
			h.mu.Lock()
			extended, span = h.extended, h.span() // an Extend meanwhile counts too
			h.mu.Unlock()
			if time.Since(extended) >= span {
				h.lost(h.obj.errorf("fence %d: extensions failed until the lease ran out: %w (%w)", h.fence, ErrNotHeld, err))
				return
			}
			retry = max(span/9, time.Millisecond)
			if errors.Is(err, redis.ErrPoolExhausted) {
				retry = exhaustedPause
			}
		}
	}
}

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

// extendedAt records an extension the server applied, sent at sent.
func (h *holding) extendedAt(sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.extended.Before(sent) {
		h.extended = sent
	}
	h.confirmed = true
}

// extendLease sends extension number seq with lease (a lock's Extend, a permit's
// Extend). held reports the script's answer: a stale extension (2: a newer
// one of this holder's already stands) counts as held. Too few replica
// acknowledgements are an error wrapping ErrNotReplicated, with held as
// the script said.
func (h *holding) extendLease(ctx context.Context, lease time.Duration, seq int64) (held bool, err error) {
	n := h.ops.extendKeys
	args := append(h.keys[:n:n], h.tokenArg, lease.Milliseconds())
	if h.ops.kind == kindSem {
		args = append(args, h.e.retentionArg, h.e.wakeArg)
	} else {
		args = append(args, seq)
	}
	out, err := h.e.call(ctx, h.ops.extend, args, h.e.replicas > 0, 0)
	if err != nil {
		return false, h.obj.err(err)
	}
	v, err := redis.Int64(out.reply, nil)
	if err != nil {
		return false, h.obj.errorf("unexpected reply %v", out.reply)
	}
	if out.shortfall != nil {
		return v >= 1, h.obj.err(out.shortfall)
	}
	return v >= 1, nil
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
	h.lease = ttl
	h.seq++
	seq := h.seq
	h.mu.Unlock()
	sent := time.Now()
	held, err := h.extendLease(ctx, ttl, seq)
	if err != nil && !(held && errors.Is(err, ErrNotReplicated)) {
		return err
	}
	if !held {
		return h.notHeld()
	}
	// Extended (even if too few replicas acknowledged it: the server keeps
	// it, and err says so): the watchdog extends on the new rhythm.
	h.extendedAt(sent)
	if h.reset != nil {
		select {
		case h.reset <- struct{}{}:
		default: // a reset already pending
		}
	}
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
	if ms == -3 {
		return 0, h.notHeld()
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// held turns a TTL call's outcome into Held's.
func held(_ time.Duration, err error) (bool, error) {
	if errors.Is(err, ErrNotHeld) {
		return false, nil
	}
	return err == nil, err
}
