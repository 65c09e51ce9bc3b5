package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Locks (Redis in Action §6.2, with Redisson's lease, wait and watchdog)

// LockOptions tunes one acquisition. The zero value means the defaults.
type LockOptions struct {
	TTL      time.Duration // lease; 0 = 10s
	Wait     time.Duration // how long Lock waits; 0 = 10s (TryLock never waits)
	Watchdog bool          // extend the lease every TTL/3 until Unlock or loss
	// Owner is stored with the holding for others to read (LockInfo.Owner,
	// an election's Leader): who holds it, in any bytes, at most MaxOwner.
	// "" stores none, and costs nothing.
	Owner string
}

// MaxOwner is the longest Owner a holding takes, in bytes.
const MaxOwner = 1024

// Lock is one holding of a named lock, or one hold (a reader's or the
// writer's) of a read-write lock. Its methods are safe for concurrent use,
// and on a nil *Lock (as a failed TryLock returns) none panics: they
// report ErrNotHeld.
type Lock struct{ holding }

// lockOps: the lock's one key, a hash of its holding (the value built and
// parsed in scripts/lib/lock.lua), its queue and its abandon marks.
var lockOps = &holdOps{kind: kindLock, suffixes: []string{""}, oneKey: true,
	extendKeys: 1, pttlKeys: 1, acquire: scriptLockAcquire, abandon: scriptLockAbandon,
	release: scriptLockRelease, extend: scriptLockExtend, pttl: scriptLockPTTL, owner: scriptLockOwner, wakesOwn: true}

var errNilLock = &Error{Err: fmt.Errorf("nil lock: %w", ErrNotHeld)}

// errZeroHolding is the error of a call on a zero Lock or Permit, which no
// engine returned.
var errZeroHolding = &Error{Err: fmt.Errorf("a zero value, not one an engine returned: %w", ErrNotHeld)}

// Lock acquires the named lock, waiting up to o.Wait (default 10s) in
// arrival order while another holds it (see "Waiting" in the package doc).
// On success it returns the held *Lock. It returns an error wrapping
// ErrNotAcquired when the server kept the caller queued until the wait ran
// out or ctx ended (then wrapping ctx.Err() as well), and an error wrapping
// the failure, not ErrNotAcquired, when the last attempt could not reach
// Redis (connection refused, a timeout, CLUSTERDOWN...).
func (e *Engine) Lock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, name, "Lock"}, func(ctx context.Context) (*Lock, error) { return e.lock(ctx, lockOps, "", name, o, true) })
	}
	return e.lock(ctx, lockOps, "", name, o, true)
}

// TryLock makes one attempt at the named lock and returns an error wrapping
// ErrNotAcquired if another holds it or live waiters are queued. o.Wait is
// neither used nor checked.
func (e *Engine) TryLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, name, "TryLock"}, func(ctx context.Context) (*Lock, error) { return e.lock(ctx, lockOps, "", name, o, false) })
	}
	return e.lock(ctx, lockOps, "", name, o, false)
}

// lock takes a holding of ops' kind; prefix ("", or "r-"/"w-" for a
// read-write lock's reader or writer) starts its token, so the queue knows
// what each waiter wants.
func (e *Engine) lock(ctx context.Context, ops *holdOps, prefix, name string, o LockOptions, mayWait bool) (*Lock, error) {
	l := &Lock{}
	err := e.take(ctx, &l.holding, name, request{ops: ops, prefix: prefix, ttl: o.TTL, wait: o.Wait, mayWait: mayWait, watchdog: o.Watchdog, owner: o.Owner})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// IsLocked reports whether anyone holds the named lock. It reads one key
// with one GET, where LockInfo also reads the lock's PTTL and every queued
// waiter: the call for a probe that asks only this.
func (e *Engine) IsLocked(ctx context.Context, name string) (bool, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, name, "IsLocked"}, func(ctx context.Context) (bool, error) { return e.isLocked(ctx, name) })
	}
	return e.isLocked(ctx, name)
}

// isLocked is IsLocked.
func (e *Engine) isLocked(ctx context.Context, name string) (bool, error) {
	obj, err := e.object(kindLock, name)
	if err != nil {
		return false, err
	}
	n, err := redis.Int64(e.eval(ctx, obj, scriptLockLocked, obj.key("")))
	return n == 1, err
}

// Token returns the random identifier (a UUID v4; for a read-write lock's
// hold prefixed "r-" for a reader, "w-" for the writer) that marks this
// holding, or "" for a nil lock.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns this holding's fencing token (0 for a nil lock). It grows
// strictly with every acquisition of the lock's name, across engines,
// processes, expiries and restarts, and has 16 digits: keep it in a 64-bit
// column. Pass Fence and Token to the resource the lock guards, which
// should admit a holder only if its fence is higher than the highest it has
// seen, or equal with the same token (see "Fences" in the package doc).
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Lost returns a channel that closes when the engine finds the lock gone
// while it keeps it (the watchdog found it expired or taken, or could not
// extend it before the lease ran out; a lock handed over to this waiter
// could not be confirmed), or when Engine.Close released it. Without a
// watchdog, a confirmed lock's channel otherwise never closes (Context
// then ends with the lease); for a nil lock it is closed.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	return l.lostChan()
}

// Context returns a context derived from parent that is done when parent
// is, when the lock is released, or when it is lost (without a watchdog,
// at the lease's end: see "Leases" in the package doc). context.Cause says
// which (a loss is an *Error wrapping ErrNotHeld). Run the guarded work
// under it. For a nil lock it is done at once; a nil parent is taken as
// context.Background().
func (l *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if l == nil {
		return canceled(parent)
	}
	return l.context(parent)
}

// Unlock releases the lock and hands it to the first live waiter. It stops
// the watchdog first, so no extension is sent after Unlock returns. It makes
// its attempt even when ctx is already done, bounded by ReleaseTimeout (or
// ctx's later deadline), so that defer l.Unlock(ctx) on a finished request
// still frees the lock. It returns an error wrapping ErrNotHeld if the
// lock had already expired or passed to another holder, whom it never
// disturbs, and nil if Engine.Close released it.
func (l *Lock) Unlock(ctx context.Context) error {
	if l == nil {
		return errNilLock
	}
	if l != nil && l.e.hooked() {
		return hookedRelease(&l.holding, ctx, Operation{l.obj.kind.noun, l.obj.name, "Unlock"}, func(ctx context.Context) error { return l.release(ctx) })
	}
	return l.release(ctx)
}

// Extend sets the lock's remaining lease to ttl (0 = its current lease:
// the TTL it was taken with, or the last Extend's), and the watchdog extends
// with ttl from then on. A watchdog extension sent before Extend never undoes
// it, however late it reaches the server: extensions are numbered, and the
// server applies none older than one it has applied. It returns an error
// wrapping ErrNotHeld if the lock is no longer this holder's.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return errNilLock
	}
	if l != nil && l.e.hooked() {
		return hookedErr(l.e, ctx, Operation{l.obj.kind.noun, l.obj.name, "Extend"}, func(ctx context.Context) error { return l.extend(ctx, ttl) })
	}
	return l.extend(ctx, ttl)
}

// TTL returns the lock's remaining lease, as the server counts it, or an
// error wrapping ErrNotHeld if the lock is no longer this holder's.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, errNilLock
	}
	if l != nil && l.e.hooked() {
		return hooked(l.e, ctx, Operation{l.obj.kind.noun, l.obj.name, "TTL"}, func(ctx context.Context) (time.Duration, error) { return l.ttl(ctx) })
	}
	return l.ttl(ctx)
}

// Owner returns the Owner stored with this holding: LockOptions.Owner, or
// the last SetOwner's ("" for a nil lock).
func (l *Lock) Owner() string {
	if l == nil {
		return ""
	}
	return l.currentOwner()
}

// SetOwner stores owner (at most MaxOwner bytes; "" for none) with the
// lock in place of its Owner, in one script that changes nothing else (the
// lease runs on). It returns an error wrapping ErrNotHeld, and stores
// nothing, if the lock is no longer this holder's. For an election's
// leader it is Proclaim: observers see the new value in the same term.
func (l *Lock) SetOwner(ctx context.Context, owner string) error {
	if l == nil {
		return errNilLock
	}
	if l != nil && l.e.hooked() {
		return hookedErr(l.e, ctx, Operation{l.obj.kind.noun, l.obj.name, "SetOwner"}, func(ctx context.Context) error { return l.setOwner(ctx, owner) })
	}
	return l.setOwner(ctx, owner)
}

// Held reports whether this holder still holds the lock (false for a nil
// lock).
func (l *Lock) Held(ctx context.Context) (bool, error) {
	if l != nil && l.e.hooked() {
		return hooked(l.e, ctx, Operation{l.obj.kind.noun, l.obj.name, "Held"}, func(ctx context.Context) (bool, error) { return held(l.ttl(ctx)) })
	}
	return held(l.TTL(ctx))
}

// LockInfo is what LockInfo tells of a lock.
type LockInfo struct {
	Held    bool
	Token   string        // the holder's token, "" when free
	Fence   int64         // the holder's fence
	TTL     time.Duration // the holder's remaining lease
	Waiting int           // live waiters queued
	Owner   string        // the Owner stored with the holding, "" if none
}

// decodeLockInfo reads lock_info's reply: names and values in turn (when
// held, the value's fields from lib/lock.lua's lock_fields and "ttl" in
// ms; then "waiting"), a case each. A name it does not know is skipped.
func decodeLockInfo(reply any) (LockInfo, error) {
	var info LockInfo
	v, err := redis.Values(reply, nil)
	if err == nil && len(v)%2 != 0 {
		err = errors.New("odd length")
	}
	for i := 0; err == nil && i < len(v); i += 2 {
		name, ok := v[i].([]byte)
		if !ok {
			err = errors.New("a name not a string")
			break
		}
		switch x := v[i+1]; string(name) {
		case "token":
			info.Token, err = redis.String(x, nil)
			info.Held = true
		case "fence":
			info.Fence, err = redis.Int64(x, nil)
		case "owner":
			info.Owner, err = redis.String(x, nil)
		case "ttl":
			var ms int64
			ms, err = redis.Int64(x, nil)
			info.TTL = time.Duration(max(ms, 0)) * time.Millisecond
		case "waiting":
			info.Waiting, err = redis.Int(x, nil)
		}
	}
	if err != nil {
		return LockInfo{}, fmt.Errorf("unexpected reply %v: %w", reply, err)
	}
	return info, nil
}

// LockInfo returns who holds the named lock, for how long, and how many
// live waiters are queued, in one script that writes nothing. (Read-write
// locks have no such call yet; permits are listed by SemaphoreInfo.)
func (e *Engine) LockInfo(ctx context.Context, name string) (LockInfo, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, name, "LockInfo"}, func(ctx context.Context) (LockInfo, error) { return e.lockInfo(ctx, name) })
	}
	return e.lockInfo(ctx, name)
}

// lockInfo is LockInfo.
func (e *Engine) lockInfo(ctx context.Context, name string) (LockInfo, error) {
	obj, err := e.object(kindLock, name)
	if err != nil {
		return LockInfo{}, err
	}
	return e.lockInfoOf(ctx, obj)
}

// lockInfoOf runs lock_info on obj's lock (a lock's, or an election's).
func (e *Engine) lockInfoOf(ctx context.Context, obj object) (LockInfo, error) {
	var reply any
	var err error
	if obj.kind == kindElection { // v4's string layout, kept by elections
		reply, err = e.eval(ctx, obj, scriptElInfo, obj.key(""), obj.key(":waiters"))
	} else {
		reply, err = e.eval(ctx, obj, scriptLockInfo, obj.key(""))
	}
	if err != nil {
		return LockInfo{}, err
	}
	info, err := decodeLockInfo(reply)
	if err != nil {
		return LockInfo{}, obj.err(err)
	}
	return info, nil
}

// ForceUnlock is an administrator's call: it frees the named lock whoever
// holds it, in one script, and hands it to the first live waiter (whose
// fence is higher). It reports false if the lock was free. The old
// holder's Unlock then returns ErrNotHeld, and its watchdog finds the lock
// gone at its next extension (Lost closes, its Context ends). Whatever the
// old holder was doing is no longer guarded: use it for a holder that is
// known to be stuck, and let the guarded resource check fences.
func (e *Engine) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectLock, name, "ForceUnlock"}, func(ctx context.Context) (bool, error) { return e.forceUnlock(ctx, name) })
	}
	return e.forceUnlock(ctx, name)
}

// forceUnlock is ForceUnlock.
func (e *Engine) forceUnlock(ctx context.Context, name string) (bool, error) {
	obj, err := e.object(kindLock, name)
	if err != nil {
		return false, err
	}
	keys := lockOps.keys(obj)
	n, err := redis.Int64(e.eval(ctx, obj, scriptLockForce, append(keys, e.wakeArg)...))
	return n == 1, err
}
