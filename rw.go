package atomicredis

import (
	"context"
)

// ---------------------------------------------------------------------------
// Read-write locks: many readers or one writer, in arrival order, on the
// same queue as locks; every hold is a *Lock with a lease of its own

// rwOps: the holds' lease deadlines (zset token -> server ms), their
// extension numbers, handed-over fences and Owners (a hash, see
// scripts/lib/rw.lua), the fence counter, the queue and its waiters.
var rwOps = &holdOps{kind: kindRW, suffixes: []string{"", ":holds", ":fence", ":queue", ":waiters"},
	extendKeys: 2, pttlKeys: 1, acquire: scriptRWAcquire, abandon: scriptRWAbandon,
	release: scriptRWRelease, extend: scriptRWExtend, pttl: scriptRWPTTL, owner: scriptRWOwner}

// RLock takes a shared (read) hold of the named read-write lock, waiting up
// to o.Wait (default 10s) while a writer holds it or is queued ahead of the
// caller, so writers never starve. The hold is a *Lock with its own lease,
// watchdog and Owner; other readers' holds are untouched by its calls.
// Several readers' fences are valid at once (see "Fences" in the package
// doc). Errors are as Lock's. A read-write lock "x" and a plain lock "x"
// are different objects.
func (e *Engine) RLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectReadWriteLock, name, "RLock"}, func(ctx context.Context) (*Lock, error) { return e.lock(ctx, rwOps, "r-", name, o, true) })
	}
	return e.lock(ctx, rwOps, "r-", name, o, true)
}

// TryRLock makes one attempt at a read hold of the named read-write lock:
// it returns an error wrapping ErrNotAcquired if a writer holds it or any
// live waiter is queued. o.Wait is not used.
func (e *Engine) TryRLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectReadWriteLock, name, "TryRLock"}, func(ctx context.Context) (*Lock, error) { return e.lock(ctx, rwOps, "r-", name, o, false) })
	}
	return e.lock(ctx, rwOps, "r-", name, o, false)
}

// WLock takes the exclusive (write) hold of the named read-write lock,
// waiting up to o.Wait (default 10s) while anyone holds it or is queued
// ahead. When it is released, the whole run of readers at the head of the
// queue is let in at once. Otherwise as RLock.
func (e *Engine) WLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectReadWriteLock, name, "WLock"}, func(ctx context.Context) (*Lock, error) { return e.lock(ctx, rwOps, "w-", name, o, true) })
	}
	return e.lock(ctx, rwOps, "w-", name, o, true)
}

// TryWLock makes one attempt at the write hold of the named read-write
// lock: it returns an error wrapping ErrNotAcquired if anyone holds it or
// any live waiter is queued. o.Wait is not used.
func (e *Engine) TryWLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectReadWriteLock, name, "TryWLock"}, func(ctx context.Context) (*Lock, error) { return e.lock(ctx, rwOps, "w-", name, o, false) })
	}
	return e.lock(ctx, rwOps, "w-", name, o, false)
}
