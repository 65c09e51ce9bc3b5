package atomicredis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// One renewal for many holdings: an engine extends all its watchdog
// holdings (locks, read-write holds, permits), and confirms the holdings
// handed over to it, from one goroutine. Each holding keeps its own rhythm
// (a third into its lease) and its own numbered extensions; what is due
// at about the same time goes in one round trip: on a server that is no
// cluster, a few scripts that each extend many names (their keys lie in
// different slots, which only a server that is no cluster allows); on a
// cluster, one pipeline of the one-name scripts per primary.

// Names per batch script, so that none runs much over a millisecond of
// server time, even on a busy machine. Measured on the 2-core bench server
// shared with other work (load average 5), INFO commandstats per EVALSHA:
// 100 locks 765 µs in one run, 1,209 µs in another, busier (BenchmarkRenew's
// us/script; 200 took 1.9 ms); 30 read holds 464 µs, 40 permits 754 µs
// (3,000 held for two renewal periods). So 64, 24 and 24.
const (
	batchLocks   = 64
	batchHolds   = 24
	batchPermits = 24
)

// renewer is an engine's one renewal goroutine and the holdings it keeps.
type renewer struct {
	mu      sync.Mutex
	held    map[*holding]struct{} // what it keeps: startWatchdog adds, stopWatchdog and ends remove
	running bool                  // its goroutine runs (it ends when held is empty)
	kick    chan struct{}         // (1 buffered) look again: a holding came, or a lease changed; made in New, never assigned again
	sending map[*holding]struct{} // extensions on their way: stopWatchdog waits for them
	sent    sync.Cond             // on mu: sending emptied

	// extensions is the last extension's number: every extension of the
	// engine's holdings, one (Extend) or a batch (all under one number),
	// takes the next; an extension numbered lower than one applied changes
	// nothing.
	extensions atomic.Int64

	// Owned by the goroutine (one at a time: running hands it over).
	layout   *layout
	learned  time.Time // when layout was learned
	stale    bool      // a cluster's layout must be learned again (MOVED, a node failed)
	batch    []*renewal
	live     []*renewal // the part of batch not yet too late to send
	pieces   []piece
	scratchA []any
}

// layoutLife is how long a cluster's layout is trusted without a MOVED.
const layoutLife = time.Minute

// renewal is one holding's extension in a batch, and its outcome.
type renewal struct {
	h        *holding
	lease    time.Duration
	seq      int64
	deadline time.Time // extended + span: past it, the holding is lost
	held     bool
	err      error
}

// piece is one script call of a pipeline: the renewals it carries, its
// reply and error.
type piece struct {
	s     *script
	args  []any
	rs    []*renewal
	reply any
	err   error // the script's error, or the connection's
	short error // WithReplicaAck: too few acknowledgements (the reply stands)
}

// init makes what the renewer's fields hold, once, in New: none of them is
// assigned again, so poke, which Extend calls without mu, reads kick
// safely while another goroutine hands the renewer its first holding.
func (r *renewer) init() {
	r.held, r.kick, r.sending = map[*holding]struct{}{}, make(chan struct{}, 1), map[*holding]struct{}{}
	r.sent.L = &r.mu
}

// startWatchdog hands h to the engine's renewer, starting its goroutine if
// none runs. Called by adopt, under the engine's mu, so that Close, which
// takes it, finds every holding it must stop, and waits for the goroutine
// (the engine's background).
func (h *holding) startWatchdog() {
	h.slot = int16(hashSlot(h.obj.name))
	h.armSpanEnd()
	r := &h.e.renew
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[h] = struct{}{}
	if r.running {
		r.poke()
		return
	}
	r.running = true
	h.e.background.Add(1)
	go r.watch(h.e)
}

// stopWatchdog takes h from the renewer: once it returns, no extension of
// h is sent. An extension of h on its way waits for its reply (at most a
// call's timeout), whose outcome is then ignored; one not yet sent is
// not. Safe to call more than once, and for a holding the renewer never
// had.
func (h *holding) stopWatchdog() {
	r := &h.e.renew
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[h]; !ok {
		return
	}
	delete(r.held, h)
	h.stopSpanEnd()
	if len(r.held) == 0 {
		r.poke() // so that the goroutine ends now
	}
	for {
		if _, ok := r.sending[h]; !ok {
			return
		}
		r.sent.Wait()
	}
}

// toSend keeps, of xs, the extensions of holdings the renewer still keeps,
// and marks them on their way; sentAll ends that.
func (r *renewer) toSend(xs []*renewal) []*renewal {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := xs[:0]
	for _, x := range xs {
		if _, ok := r.held[x.h]; ok {
			r.sending[x.h] = struct{}{}
			kept = append(kept, x)
		}
	}
	return kept
}

// sentAll marks every extension on its way arrived, for stopWatchdog.
func (r *renewer) sentAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.sending)
	r.sent.Broadcast()
}

// poke has the goroutine look at its holdings again.
func (r *renewer) poke() {
	select {
	case r.kick <- struct{}{}:
	default: // one already pending
	}
}

// keeps reports whether h is still the renewer's.
func (r *renewer) keeps(h *holding) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[h]
	return ok
}

// watch is the renewer's goroutine: it extends what is due, then sleeps
// until the next is, until it keeps nothing or the engine closes.
func (r *renewer) watch(e *Engine) {
	defer e.background.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if e.stop.Err() != nil {
			r.quit()
			return
		}
		wait, more := r.due(time.Now())
		if !more {
			return
		}
		if len(r.batch) > 0 {
			r.extend(e.stop, e)
			continue
		}
		t.Reset(wait)
		select {
		case <-e.stop.Done():
		case <-r.kick:
		case <-t.C:
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

// quit marks the goroutine ended (the engine closed).
func (r *renewer) quit() {
	r.mu.Lock()
	r.running = false
	r.mu.Unlock()
}

// due puts in r.batch, all under one number, the extensions due now, and returns how
// long until the next is due; more is false, the goroutine marked ended,
// if the renewer keeps nothing. A holding is due a third into its lease
// (or, handed over and not yet confirmed, a third into its queue entry's
// lifetime), or at its retry after a failed extension. A watchdog holding
// half way to its time goes with a batch that is sent anyway, so that
// holdings taken at about the same time come to share their round trips:
// none is extended sooner than a sixth into its lease.
func (r *renewer) due(now time.Time) (wait time.Duration, more bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batch = r.batch[:0]
	next := time.Duration(1<<63 - 1)
	// One number for the batch: each holding's extensions are numbered in
	// the order they were made, whatever else the engine extends between.
	var seq int64
	for h := range r.held {
		h.mu.Lock()
		if h.ended != nil || h.confirmed && !h.watchdog {
			h.mu.Unlock()
			delete(r.held, h) // over, or confirmed by TTL, Held or Extend
			continue
		}
		var at time.Time
		early := time.Duration(0)
		switch {
		case !h.retryAt.IsZero():
			at = h.retryAt
		case h.confirmed:
			at = h.extended.Add(h.lease / 3)
			early = h.lease / 6
		default:
			at = h.extended.Add(h.e.queueTTL / 3)
		}
		if until := at.Sub(now); until > early {
			next = min(next, until)
			h.mu.Unlock()
			continue
		}
		if seq == 0 {
			seq = h.e.renew.extensions.Add(1)
		}
		r.batch = append(r.batch, &renewal{h: h, lease: h.lease, seq: seq, deadline: h.extended.Add(h.span())})
		h.mu.Unlock()
	}
	switch {
	case len(r.held) == 0:
		r.running = false
		return 0, false
	case len(r.batch) > 0:
		return 0, true
	}
	return next, true
}

// extend sends r.batch and acts on each outcome as the holding's own
// watchdog did: extended; lost (the server says it is gone, or extensions
// failed until its lease would have run out); or failed, to be retried
// every tenth of the lease (a pool with no connection to give: in a
// moment).
func (r *renewer) extend(stop context.Context, e *Engine) {
	sent := time.Now()
	deadline := sent.Add(e.callTimeout)
	all, live := r.batch, r.live[:0]
	for _, x := range all {
		if !x.deadline.After(sent) {
			// Too late to send (the renewer ran late, or retries did):
			// the call would fail at once, and fail the batch with it.
			x.err = x.h.obj.err(errSpent)
			continue
		}
		live = append(live, x)
		if x.deadline.Before(deadline) {
			deadline = x.deadline // none waits past its own loss
		}
	}
	if live = r.toSend(live); len(live) > 0 {
		ctx, cancel := context.WithDeadline(stop, deadline)
		r.batch = live
		r.send(ctx, e, sent)
		r.batch = all
		cancel()
	}
	r.sentAll()
	r.live = live[:0]
	for _, x := range r.batch {
		if stop.Err() != nil {
			return
		}
		h := x.h
		if !r.keeps(h) {
			continue // released meanwhile
		}
		if x.err == nil && !x.held && h.ops.kind == kindSem {
			// The batch only extends: semaphore_extend removes the
			// permit's remnants and hands its slot on.
			if len(r.toSend([]*renewal{x})) == 0 {
				continue // released meanwhile
			}
			ctx, cancel := context.WithTimeout(stop, e.callTimeout)
			x.held, x.err = h.extendLease(ctx, x.lease, x.seq)
			cancel()
			r.sentAll()
		}
		switch {
		case x.err == nil && x.held:
			h.extendedAt(sent)
		case x.err == nil:
			h.lost(h.obj.errorf("fence %d: the lease ran out or another took it: %w", h.fence, ErrNotHeld), h.goneReason())
		default:
			h.e.emit(h.event(EventExtendFailed, x.err))
			h.mu.Lock()
			extended, span := h.extended, h.span() // an Extend meanwhile counts too
			if time.Since(extended) < span {
				retry := max(span/9, time.Millisecond)
				if errors.Is(x.err, redis.ErrPoolExhausted) {
					retry = exhaustedPause
				}
				h.retryAt = time.Now().Add(retry)
				if end := extended.Add(span); h.retryAt.After(end) {
					h.retryAt = end // it is lost then, not a retry later
				}
				h.mu.Unlock()
				continue
			}
			h.mu.Unlock()
			h.lost(h.obj.errorf("fence %d: extensions failed until the lease ran out: %w (%w)", h.fence, ErrNotHeld, x.err), LostError)
		}
	}
	for i := range r.batch {
		r.batch[i] = nil
	}
}

// send sends r.batch and fills in each outcome.
func (r *renewer) send(ctx context.Context, e *Engine, now time.Time) {
	l, err := r.learn(ctx, e, now)
	if err != nil {
		for _, x := range r.batch {
			x.err = x.h.obj.err(err)
		}
		return
	}
	if l.single {
		r.sendBatches(ctx, e)
		return
	}
	r.sendNodes(ctx, e, l)
}

// learn returns the layout (cluster.go), learning it first if it is not
// known, or is a cluster's that is stale or old by now. If it cannot be
// learned, the last one known serves: MOVED replies correct it.
func (r *renewer) learn(ctx context.Context, e *Engine, now time.Time) (*layout, error) {
	if r.layout != nil && (r.layout.single || !r.stale && now.Sub(r.learned) < layoutLife) {
		return r.layout, nil
	}
	l, err := e.learnLayout(ctx)
	if err != nil {
		if r.layout != nil {
			return r.layout, nil
		}
		return nil, err
	}
	r.layout, r.learned, r.stale = l, now, false
	return l, nil
}

// sendBatches sends r.batch to one server that is no cluster: a batch
// script per kind, lease and up to batchLocks or batchHolds names, all in
// one pipeline (followed by WAIT with WithReplicaAck).
func (r *renewer) sendBatches(ctx context.Context, e *Engine) {
	pieces := r.pieces[:0]
	args := r.scratchA[:0]
	if byLease := func(a, b *renewal) int { return cmp.Compare(a.lease, b.lease) }; !slices.IsSortedFunc(r.batch, byLease) {
		slices.SortStableFunc(r.batch, byLease) // a script carries one lease
	}
	for _, k := range []struct {
		kind *kind
		s    *script
		most int
	}{{kindLock, scriptLockExtends, batchLocks}, {kindElection, scriptElExtends, batchLocks}, {kindRW, scriptRWExtends, batchHolds}, {kindSem, scriptSemExtends, batchPermits}} {
		var rs []*renewal
		flush := func() {
			if len(rs) == 0 {
				return
			}
			// KEYS then ARGV: the count first (a script loaded with -1).
			start := len(args)
			keys := 0
			args = append(args, 0)
			for _, x := range rs {
				n := x.h.ops.extendKeys
				if k.kind == kindSem {
					args = append(args, x.h.keys[0], x.h.keys[1], x.h.seqKey())
					keys += 3
				} else {
					args = append(args, x.h.keys[:n]...)
					keys += n
				}
			}
			args[start] = keys
			args = append(args, rs[0].lease.Milliseconds(), rs[0].seq) // the batch's: one lease a script, one number
			for _, x := range rs {
				args = append(args, x.h.tokenArg)
			}
			pieces = append(pieces, piece{s: k.s, args: args[start:len(args):len(args)], rs: rs})
			rs = nil
		}
		for _, x := range r.batch {
			if kind := x.h.ops.kind; kind != k.kind {
				continue
			}
			if len(rs) > 0 && x.lease != rs[0].lease {
				flush()
			}
			rs = append(rs, x)
			if len(rs) == k.most {
				flush()
			}
		}
		flush()
	}
	r.pieces, r.scratchA = pieces, args
	c, err := e.conn(ctx, routeKey(pieces[0].args), e.callTimeout)
	if err == nil {
		e.pipeline(c, pieces, e.replicas > 0)
		c.close()
	} else {
		fail(pieces, err)
	}
	for i := range pieces {
		p := &pieces[i]
		codes, verr := decodeExtends(p.reply, true, len(p.rs)) // of no use if p.err
		for j, x := range p.rs {
			switch {
			case p.err != nil:
				x.err = x.h.obj.err(e.callErr(ctx, p.err))
			case verr != nil:
				x.err = x.h.obj.err(verr)
			default:
				x.held = codes[j].held()
				if p.short != nil {
					x.err = x.h.obj.err(p.short)
				}
			}
		}
		*p = piece{}
	}
}

// sendNodes sends r.batch to a cluster: a pipeline of the one-name
// scripts per primary (followed by WAIT with WithReplicaAck), all sent
// before any reply is read. A holding whose slot has moved (MOVED) is
// extended on its own, following the redirect, and the layout learned
// again before the next batch.
func (r *renewer) sendNodes(ctx context.Context, e *Engine, l *layout) {
	byNode := make([][]piece, len(l.nodes))
	for _, x := range r.batch {
		at := l.slots[x.h.slot]
		if at < 0 {
			x.err = x.h.obj.errorf("no primary serves slot %d", x.h.slot)
			r.stale = true
			continue
		}
		byNode[at] = append(byNode[at], piece{s: x.h.ops.extend, args: x.h.extendArgs(x.lease, x.seq), rs: []*renewal{x}})
	}
	conns := make([]*conn, len(l.nodes))
	ack := e.replicas > 0
	for i, ps := range byNode {
		if len(ps) == 0 {
			continue
		}
		var err error
		if conns[i], err = e.conn(ctx, l.nodes[i].key, e.callTimeout); err != nil {
			fail(ps, err)
			r.stale = true
			continue
		}
		if err := e.send(conns[i], ps, ack, false); err != nil {
			fail(ps, err)
		}
	}
	for i, ps := range byNode {
		if conns[i] == nil {
			continue
		}
		if e.receive(conns[i], ps, ack) == nil {
			e.again(conns[i], ps, ack)
		}
		conns[i].close()
	}
	for _, ps := range byNode {
		for j := range ps {
			p := &ps[j]
			x := p.rs[0]
			switch {
			case replyIs(p.err, "MOVED"):
				r.stale = true
				x.held, x.err = x.h.extendLease(ctx, x.lease, x.seq)
			case p.err != nil:
				if _, reply := errorReply(p.err); !reply {
					r.stale = true // the node may have failed over
				}
				x.err = x.h.obj.err(e.callErr(ctx, p.err))
			default:
				x.held, x.err = x.h.extendReply(p.reply, p.short)
			}
		}
	}
}

// callErr is err, naming the batch's deadline or the engine's close if
// ctx ended, as call does.
func (e *Engine) callErr(ctx context.Context, err error) error {
	if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}
