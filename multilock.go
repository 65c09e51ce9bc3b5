package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Many keys: all of a set of locks, or none

// MaxLockAll is how many names LockAll and TryLockAll take at most.
const MaxLockAll = 64

// MultiLock is a holding of several locks, taken together by LockAll or
// TryLockAll. Losing any of them loses it: the rest are released. Its
// methods are safe for concurrent use; on a nil *MultiLock they report
// ErrNotHeld.
type MultiLock struct {
	e     *Engine
	locks []*Lock // in the caller's order

	lostOnce sync.Once
	lostCh   chan struct{}
}

// LockAll takes every named lock (1 to MaxLockAll distinct names) or none,
// waiting up to o.Wait in all (default 10s); o.Owner is stored with each
// lock, o.Watchdog extends each. Two LockAll calls over the same names in
// any order never deadlock (see "Many locks" in the package doc). Errors
// are as Lock's; on failure or a done ctx, whatever was taken is released
// before it returns. A name held by another goroutine of the same engine
// is waited for, as Lock waits.
func (e *Engine) LockAll(ctx context.Context, names []string, o LockOptions) (*MultiLock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, joinNames(names), "LockAll"}, func(ctx context.Context) (*MultiLock, error) { return e.lockAll(ctx, names, o, true) })
	}
	return e.lockAll(ctx, names, o, true)
}

// TryLockAll makes one attempt at every named lock and returns an error
// wrapping ErrNotAcquired, holding none, if any is held or its queue is
// not empty (a queue whose waiters lapsed lingers up to 2 s). o.Wait is neither used nor checked.
func (e *Engine) TryLockAll(ctx context.Context, names []string, o LockOptions) (*MultiLock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, joinNames(names), "TryLockAll"}, func(ctx context.Context) (*MultiLock, error) { return e.lockAll(ctx, names, o, false) })
	}
	return e.lockAll(ctx, names, o, false)
}

// crossSlotErr: the one script over every name was refused because the
// server is a cluster.
func crossSlotErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "CROSSSLOT")
}

func (e *Engine) lockAll(ctx context.Context, names []string, o LockOptions, mayWait bool) (*MultiLock, error) {
	if err := e.checkLockAll(ctx, names, o, mayWait); err != nil {
		return nil, err
	}
	m := &MultiLock{e: e, locks: make([]*Lock, len(names)), lostCh: make(chan struct{})}
	if len(names) == 1 {
		var err error
		m.locks[0], err = e.lock(ctx, lockOps, "", names[0], o, mayWait) // not Lock: a Hook sees LockAll alone
		return m.ready(err)
	}
	// One wait in all, from here: the first try at all the names at once
	// counts against it, and ends with it.
	wait := o.Wait
	if wait == 0 {
		wait = DefaultWait
	}
	deadline, tctx := time.Now().Add(wait), ctx
	if mayWait {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	busy, err := m.tryAll(tctx, names, o)
	switch {
	case err != nil && (!mayWait || !retryable(err) || ctxErr(ctx) != nil):
		return m.ready(err)
	case err != nil: // a failure a wait retries: one name at a time, each retried
	case busy < 0:
		return m.ready(nil)
	case !mayWait:
		return m.ready(&Error{Object: ObjectLock, Name: names[busy], Err: fmt.Errorf("held or waited for, so LockAll took none of its %d names: %w", len(names), ErrNotAcquired)})
	}
	return m.ready(m.oneByOne(ctx, names, o, wait, deadline))
}

// checkLockAll checks everything LockAll's arguments can get wrong before
// anything is sent.
func (e *Engine) checkLockAll(ctx context.Context, names []string, o LockOptions, mayWait bool) error {
	if err := e.usable(); err != nil {
		return err
	}
	if len(names) == 0 || len(names) > MaxLockAll {
		return &Error{Object: ObjectLock, Err: fmt.Errorf("%d names: LockAll takes 1 to %d: %w", len(names), MaxLockAll, ErrInvalid)}
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		obj, err := e.object(kindLock, name)
		if err != nil {
			return err
		}
		if seen[name] {
			return obj.errorf("named twice: %w", ErrInvalid)
		}
		seen[name] = true
		if ctx == nil {
			return obj.err(errNilContext)
		}
		if _, err := obj.duration("TTL", o.TTL, DefaultTTL); err != nil {
			return err
		}
		if mayWait {
			if _, err := obj.duration("Wait", o.Wait, DefaultWait); err != nil {
				return err
			}
		}
		if len(o.Owner) > MaxOwner {
			return obj.errorf("Owner is %d bytes, more than MaxOwner (%d): %w", len(o.Owner), MaxOwner, ErrInvalid)
		}
	}
	return nil
}

// tryAll makes one attempt at every lock: on a server that is not a
// cluster in one script; on a cluster (the script's CROSSSLOT says so) in
// one script a slot, the slots at once. It returns the index of a name that
// was busy (-1: all are taken), having released what it took.
func (m *MultiLock) tryAll(ctx context.Context, names []string, o LockOptions) (busy int, err error) {
	all := make([]int, len(names))
	for i := range all {
		all[i] = i
	}
	if !m.e.clustered.Load() {
		busy, cross, err := m.tryGroup(ctx, names, all, o)
		if !cross {
			return busy, m.undo(err, busy)
		}
		m.e.clustered.Store(true)
	}
	slots := map[uint16][]int{}
	for i, name := range names {
		slots[hashSlot(name)] = append(slots[hashSlot(name)], i)
	}
	busy = -1
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, group := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _, err := m.tryGroup(ctx, names, group, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if b >= 0 && busy < 0 {
				busy = b
			}
		}()
	}
	wg.Wait()
	return busy, m.undo(errors.Join(errs...), busy)
}

// undo releases every lock m took if err is not nil or a name was busy,
// and returns err.
func (m *MultiLock) undo(err error, busy int) error {
	if err == nil && busy < 0 {
		return nil
	}
	m.releaseAll()
	return err
}

// releaseAll releases the locks m holds, and forgets them.
func (m *MultiLock) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range m.locks {
		if l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Unlock(ctx)
		}()
		m.locks[i] = nil
	}
	wg.Wait()
}

// tryGroup takes the locks of names at indexes group in one script
// (lock_acquire_all). It returns the index of a busy name (-1: it took
// them all), or cross if the server refused keys of several slots.
func (m *MultiLock) tryGroup(ctx context.Context, names []string, group []int, o LockOptions) (busy int, cross bool, err error) {
	e := m.e
	r := request{ops: lockOps, ttl: o.TTL, watchdog: o.Watchdog}
	hs := make([]*Lock, len(group))
	n := len(group)
	// The key count, each lock's key, then the arguments: the lease, the
	// Owner and the tokens.
	args := make([]any, 1+n+2+n)
	args[0] = n
	for j, i := range group {
		hs[j] = &Lock{}
		if err := e.prepare(ctx, &hs[j].holding, names[i], &r); err != nil {
			return -1, false, err
		}
		a := &hs[j].acq
		args[1+j] = a.keys[0]
		args[1+n+2+j] = a.tokenArg
	}
	args[1+n], args[2+n] = msArg(hs[0].acq.lease), o.Owner
	sent := time.Now()
	out, err := e.call(ctx, scriptLockAll, args, e.replicas > 0, 0)
	if crossSlotErr(err) {
		return -1, true, nil
	}
	if err != nil && out.reached && unknownOutcome(err) {
		for _, l := range hs { // a late arrival of the script finds each abandoned
			e.abandon(&l.acq)
		}
	}
	first := names[group[0]]
	if err != nil {
		return -1, false, &Error{Object: ObjectLock, Name: first, Err: fmt.Errorf("LockAll of %d names: %w", len(group), err)}
	}
	all, err := decodeLockAll(out.reply, n)
	if err != nil {
		return -1, false, &Error{Object: ObjectLock, Name: first, Err: fmt.Errorf("LockAll: %w", err)}
	}
	if !all.took {
		return group[all.busy], false, nil
	}
	if out.shortfall != nil { // a failover could grant them again: give them back
		for _, l := range hs {
			e.abandon(&l.acq)
		}
		return -1, false, &Error{Object: ObjectLock, Name: first, Err: out.shortfall}
	}
	r.owner = o.Owner
	var errs []error
	for j, l := range hs {
		if _, err := e.settle(&l.holding, r, grant{fence: all.fences[j], sent: sent}, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		m.locks[group[j]] = l
	}
	return -1, false, errors.Join(errs...)
}

// lockAllReply is lock_acquire_all's reply: {1, each lock's fence} when
// the caller took them all, {0, i} when the i-th lock (from 1) was busy.
type lockAllReply struct {
	took   bool
	busy   int     // not took: the busy lock's index, from 0
	fences []int64 // took: each lock's fence, in the keys' order
}

// decodeLockAll reads lock_acquire_all's reply for n locks.
func decodeLockAll(reply any, n int) (lockAllReply, error) {
	v, err := redis.Int64s(reply, nil)
	switch {
	case err != nil:
	case len(v) == n+1 && v[0] == 1:
		return lockAllReply{took: true, fences: v[1:]}, nil
	case len(v) == 2 && v[0] == 0 && v[1] >= 1 && v[1] <= int64(n):
		return lockAllReply{busy: int(v[1] - 1)}, nil
	}
	return lockAllReply{}, fmt.Errorf("unexpected reply %v", reply)
}

// oneByOne takes the locks one after another, in slot and name order, each
// with a watchdog until all are taken, waiting for them until deadline
// (LockAll's wait, wait, from its start); then checks each held with an
// extension that starts its lease anew, and stops the watchdogs o does not
// ask for.
func (m *MultiLock) oneByOne(ctx context.Context, names []string, o LockOptions, wait time.Duration, deadline time.Time) error {
	e := m.e
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if sa, sb := hashSlot(names[a]), hashSlot(names[b]); sa != sb {
			return int(sa) - int(sb)
		}
		return strings.Compare(names[a], names[b])
	})
	each := LockOptions{TTL: o.TTL, Watchdog: true, Owner: o.Owner}
	for _, i := range order {
		each.Wait = time.Until(deadline)
		if each.Wait < time.Millisecond {
			return &Error{Object: ObjectLock, Name: names[i], Err: fmt.Errorf("LockAll's wait of %v ran out: %w", wait, ErrNotAcquired)}
		}
		l, err := e.lock(ctx, lockOps, "", names[i], each, true) // not Lock: a Hook sees LockAll alone
		if err != nil {
			return err
		}
		m.locks[i] = l
	}
	var errs []error
	for _, l := range m.locks {
		if !o.Watchdog {
			l.stopWatchdog()
			l.mu.Lock()
			l.watchdog = false
			l.mu.Unlock()
		}
		if err := l.Extend(ctx, 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ready returns m if err is nil, else releases what m took and returns err.
// A MultiLock that is ready loses all its locks with any of them.
func (m *MultiLock) ready(err error) (*MultiLock, error) {
	if err != nil {
		m.releaseAll()
		return nil, err
	}
	for _, l := range m.locks {
		l.mu.Lock()
		l.onLost = m.lostOne
		ended := l.ended != nil
		l.mu.Unlock()
		if ended {
			m.lostOne()
		}
	}
	return m, nil
}

// lostOne is called when one of m's locks is lost: m is lost, and the
// others are released in the background.
func (m *MultiLock) lostOne() {
	m.lostOnce.Do(func() {
		close(m.lostCh)
		m.e.goTracked(func() {
			ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
			defer cancel()
			for _, l := range m.locks {
				l.Unlock(ctx) // a lost one says so, and changes nothing
			}
		})
	})
}

var errNilMultiLock = &Error{Object: ObjectLock, Err: fmt.Errorf("nil multi-lock: %w", ErrNotHeld)}

// Locks returns the locks, in the order of LockAll's names, each with its
// own fence and token.
func (m *MultiLock) Locks() []*Lock {
	if m == nil {
		return nil
	}
	return slices.Clone(m.locks)
}

// Unlock releases every lock, and returns each failure (errors.Join).
func (m *MultiLock) Unlock(ctx context.Context) error {
	if m == nil {
		return errNilMultiLock
	}
	return m.each(func(l *Lock) error { return l.Unlock(ctx) })
}

// Extend extends every lock to ttl (0: its current lease), and returns
// each failure (errors.Join).
func (m *MultiLock) Extend(ctx context.Context, ttl time.Duration) error {
	if m == nil {
		return errNilMultiLock
	}
	return m.each(func(l *Lock) error { return l.Extend(ctx, ttl) })
}

// each runs f on every lock at once, and joins their errors.
func (m *MultiLock) each(f func(*Lock) error) error {
	errs := make([]error, len(m.locks))
	var wg sync.WaitGroup
	for i, l := range m.locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(l)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TTL returns the shortest remaining lease among the locks, or an error
// (wrapping ErrNotHeld if one is no longer this holder's).
func (m *MultiLock) TTL(ctx context.Context) (time.Duration, error) {
	if m == nil {
		return 0, errNilMultiLock
	}
	var mu sync.Mutex
	least := time.Duration(1 << 62)
	err := m.each(func(l *Lock) error {
		d, err := l.TTL(ctx)
		mu.Lock()
		least = min(least, d)
		mu.Unlock()
		return err
	})
	if err != nil {
		return 0, err
	}
	return least, nil
}

// Held reports whether every lock is still held by this holder.
func (m *MultiLock) Held(ctx context.Context) (bool, error) {
	return held(m.TTL(ctx))
}

// Lost returns a channel that closes when any of the locks is lost (see
// Lock.Lost); the others are then released.
func (m *MultiLock) Lost() <-chan struct{} {
	if m == nil {
		return closedChan
	}
	return m.lostCh
}

// Context returns a context derived from parent that is done when any of
// the locks' Context is: when one is released or lost.
func (m *MultiLock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if m == nil {
		return canceled(parent)
	}
	ctx := parent
	cancels := make([]context.CancelFunc, 0, len(m.locks))
	for _, l := range m.locks {
		var cancel context.CancelFunc
		ctx, cancel = l.Context(ctx)
		cancels = append(cancels, cancel)
	}
	return ctx, func() {
		for _, cancel := range cancels {
			cancel()
		}
	}
}
