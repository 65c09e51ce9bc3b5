package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Counting semaphores (Redis in Action §6.3: the fair semaphore, in one
// script, on the server's clock)

// SemaphoreOptions tunes one acquisition. The zero value means the
// defaults, Limit included once a limit is stored.
type SemaphoreOptions struct {
	Limit    int           // permits that may be held at once, at most 2^53 - 1; 0 = the stored limit
	TTL      time.Duration // permit timeout; 0 = 10s
	Wait     time.Duration // how long AcquireSemaphore waits; 0 = 10s (TryAcquireSemaphore never waits)
	Watchdog bool          // extend the permit every TTL/3 until Release or loss
	// Owner is stored with the permit for others to read
	// (SemaphoreInfo.Permits): who holds it, in any bytes, at most
	// MaxOwner. "" stores none, and costs nothing.
	Owner string
	// Weight is how much of the limit the permit takes, as
	// x/sync/semaphore's n: 0 means 1, a negative weight or one above
	// 2^53 - 1 is ErrInvalid. Waiters are admitted strictly in arrival
	// order, whatever their weights. A weight above the limit in force is
	// refused with an error wrapping ErrInvalid, nothing written (see
	// "Semaphores" in the package doc).
	Weight int
}

// Permit is one held permit of a counting semaphore. Its methods are safe
// for concurrent use, and on a nil *Permit none panics: they report
// ErrNotHeld.
type Permit struct {
	holding
	weight int // how much of the limit it takes
}

// semOps: the permits' deadlines (timeouts), their counters (owner, the
// book's name), the counter, the stored limit, the queue and its waiters,
// and the permits' Owners (owners: a field only for a permit that has one).
var semOps = &holdOps{kind: kindSem, suffixes: []string{"", ":owner", ":counter", ":limit", ":queue", ":waiters", ":owners"},
	extendKeys: 7, pttlKeys: 2, acquire: scriptSemAcquire, abandon: scriptSemAbandon,
	release: scriptSemRelease, extend: scriptSemExtend, pttl: scriptSemPTTL, owner: scriptSemOwner}

// AcquireSemaphore takes one permit of the named semaphore, for o.TTL
// (default 10s) unless extended, waiting up to o.Wait (default 10s) in
// arrival order for one to come free. Errors are as Lock's: one wrapping
// ErrNotAcquired if no permit was the caller's in time. The limit stored
// with the semaphore rules over o.Limit; o.Limit 0 means the stored limit
// (ErrInvalid if none is stored). See "Semaphores" in the package doc.
func (e *Engine) AcquireSemaphore(ctx context.Context, name string, o SemaphoreOptions) (*Permit, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectSemaphore, name, "AcquireSemaphore"}, func(ctx context.Context) (*Permit, error) { return e.semaphore(ctx, name, o, true) })
	}
	return e.semaphore(ctx, name, o, true)
}

// TryAcquireSemaphore makes one attempt at a permit of the named semaphore
// and returns an error wrapping ErrNotAcquired if none is free or live
// waiters are queued. o.Wait is not used. Otherwise as AcquireSemaphore.
func (e *Engine) TryAcquireSemaphore(ctx context.Context, name string, o SemaphoreOptions) (*Permit, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectSemaphore, name, "TryAcquireSemaphore"}, func(ctx context.Context) (*Permit, error) { return e.semaphore(ctx, name, o, false) })
	}
	return e.semaphore(ctx, name, o, false)
}

func (e *Engine) semaphore(ctx context.Context, name string, o SemaphoreOptions, mayWait bool) (*Permit, error) {
	err := count("limit", o.Limit, 1, "the stored limit")
	if err == nil {
		err = count("weight", o.Weight, 1, "one")
	}
	if err != nil {
		obj, oerr := e.object(kindSem, name)
		if oerr != nil {
			return nil, oerr
		}
		return nil, obj.err(err)
	}
	p := &Permit{weight: max(o.Weight, 1)}
	err = e.take(ctx, &p.holding, name, request{ops: semOps, ttl: o.TTL, wait: o.Wait, mayWait: mayWait, watchdog: o.Watchdog,
		extra: []any{o.Limit}, limit: o.Limit, owner: o.Owner, weight: p.weight})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// SemaphoreHolders returns how many permits of the named semaphore are
// live now, each counted once whatever its Weight (SemaphoreInfo.Holders;
// SemaphoreInfo.Held sums their weights). It writes nothing, and counts
// them with one ZCOUNT, where SemaphoreInfo also reads the limit, every
// queued waiter and up to MaxInfoPermits permits with their fences, Owners
// and weights. Permits past their deadline are not counted (the next
// acquisition, release or extension purges them).
func (e *Engine) SemaphoreHolders(ctx context.Context, name string) (int, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectSemaphore, name, "SemaphoreHolders"}, func(ctx context.Context) (int, error) { return e.semaphoreHolders(ctx, name) })
	}
	return e.semaphoreHolders(ctx, name)
}

// semaphoreHolders is SemaphoreHolders.
func (e *Engine) semaphoreHolders(ctx context.Context, name string) (int, error) {
	obj, err := e.object(kindSem, name)
	if err != nil {
		return 0, err
	}
	return redis.Int(e.eval(ctx, obj, scriptSemHolders, obj.key(""), obj.key(":owner")))
}

// SemaphoreInfo is what SemaphoreInfo tells of a semaphore.
type SemaphoreInfo struct {
	Limit   int // the stored limit, in weight; 0 if none is stored
	Holders int // live permits, each counted once whatever its weight
	Held    int // the weight the live permits hold: Holders when every weight is 1; above Limit only after SetSemaphoreLimit lowered it (it takes no permit back)
	Waiting int // live waiters queued, each counted once whatever its weight
	// Permits are the live permits, those that time out first first: all
	// of them up to MaxInfoPermits, then the MaxInfoPermits that time out
	// first (Holders counts them all).
	Permits []PermitInfo
}

// PermitInfo is one live permit, as SemaphoreInfo lists it.
type PermitInfo struct {
	Token  string        // the permit's token (Permit.Token)
	Fence  int64         // its counter value (Permit.Fence)
	TTL    time.Duration // the time left before it times out
	Owner  string        // the Owner stored with it, "" if none
	Weight int           // how much of the limit it takes (SemaphoreOptions.Weight, 1 for 0)
}

// decodeSemaphoreInfo reads semaphore_info's reply: the stored limit, the
// live permits, the live waiters and the weight held, then five figures
// for each permit listed: its token, ms left, fence, Owner and weight.
func decodeSemaphoreInfo(reply any) (SemaphoreInfo, error) {
	var info SemaphoreInfo
	v, err := redis.Values(reply, nil)
	const head, each = 4, 5
	if err == nil && (len(v) < head || (len(v)-head)%each != 0) {
		err = errors.New("wrong length")
	}
	var counts []int
	if err == nil {
		counts, err = redis.Ints(v[:head], nil)
	}
	if err != nil {
		return info, fmt.Errorf("unexpected reply %v: %w", reply, err)
	}
	info.Limit, info.Holders, info.Waiting, info.Held = counts[0], counts[1], counts[2], counts[3]
	if n := (len(v) - head) / each; n > 0 {
		info.Permits = make([]PermitInfo, n)
	}
	for i := range info.Permits {
		p := v[head+each*i : head+each*(i+1)]
		token, err1 := redis.String(p[0], nil)
		ms, err2 := redis.Int64(p[1], nil)
		fence, err3 := redis.Int64(p[2], nil)
		owner, err4 := redis.String(p[3], nil)
		weight, err5 := redis.Int(p[4], nil)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return SemaphoreInfo{}, fmt.Errorf("unexpected reply %v: %w", p, err)
		}
		info.Permits[i] = PermitInfo{Token: token, Fence: fence, TTL: time.Duration(max(ms, 0)) * time.Millisecond, Owner: owner,
			Weight: weight}
	}
	return info, nil
}

// MaxInfoPermits is how many permits SemaphoreInfo lists at most, so that
// its script stays short on a semaphore with a large limit.
const MaxInfoPermits = 1000

// SemaphoreInfo returns the named semaphore's stored limit, live permits
// (each with its token, fence, remaining time, Owner and weight), the
// weight they hold and its live waiters, in one script that writes
// nothing.
func (e *Engine) SemaphoreInfo(ctx context.Context, name string) (SemaphoreInfo, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectSemaphore, name, "SemaphoreInfo"}, func(ctx context.Context) (SemaphoreInfo, error) { return e.semaphoreInfo(ctx, name) })
	}
	return e.semaphoreInfo(ctx, name)
}

// semaphoreInfo is SemaphoreInfo.
func (e *Engine) semaphoreInfo(ctx context.Context, name string) (SemaphoreInfo, error) {
	obj, err := e.object(kindSem, name)
	if err != nil {
		return SemaphoreInfo{}, err
	}
	reply, err := e.eval(ctx, obj, scriptSemInfo, obj.key(""), obj.key(":limit"), obj.key(":waiters"),
		obj.key(":owner"), obj.key(":owners"), MaxInfoPermits)
	if err != nil {
		return SemaphoreInfo{}, err
	}
	info, err := decodeSemaphoreInfo(reply)
	if err != nil {
		return SemaphoreInfo{}, obj.err(err)
	}
	return info, nil
}

// SetSemaphoreLimit is an administrator's call: it stores limit (1 to
// 2^53 - 1, else an error wrapping ErrInvalid) as the named semaphore's,
// also while permits are held. Raising it admits queued waiters at once;
// lowering it takes no permit back, admits nobody until the holders are
// under it, and makes every waiter whose Weight is above it return an error
// wrapping ErrInvalid. See "Semaphores" in the package doc.
func (e *Engine) SetSemaphoreLimit(ctx context.Context, name string, limit int) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectSemaphore, name, "SetSemaphoreLimit"}, func(ctx context.Context) error { return e.setSemaphoreLimit(ctx, name, limit) })
	}
	return e.setSemaphoreLimit(ctx, name, limit)
}

// setSemaphoreLimit is SetSemaphoreLimit.
func (e *Engine) setSemaphoreLimit(ctx context.Context, name string, limit int) error {
	obj, err := e.object(kindSem, name)
	if err != nil {
		return err
	}
	if err := count("limit", limit, 1, ""); err != nil {
		return obj.err(err)
	}
	keys := semOps.keys(obj)
	_, err = e.eval(ctx, obj, scriptSemLimit, append(keys, limit, e.retentionArg, e.wakeArg)...)
	return err
}

// Release gives the permit back, and its slot to the first live waiter.
// Like Unlock it stops the watchdog first and makes its attempt even when
// ctx is already done, bounded by ReleaseTimeout (or ctx's later
// deadline). It returns an error wrapping ErrNotHeld if the permit had
// already been released or timed out (its slot may be someone else's
// now).
func (p *Permit) Release(ctx context.Context) error {
	if p == nil {
		return errNilPermit
	}
	if p != nil && p.e.hooked() {
		return hookedRelease(&p.holding, ctx, Operation{p.obj.kind.noun, p.obj.name, "Release"}, func(ctx context.Context) error { return p.release(ctx) })
	}
	return p.release(ctx)
}

// Extend sets the permit's remaining time to ttl (0 = its current TTL:
// the one it was taken with, or the last Extend's), and the watchdog
// extends it by ttl from then on. A watchdog extension sent before Extend
// never undoes it, however late it reaches the server: a permit's
// extensions are numbered, as a lock's. It returns an error
// wrapping ErrNotHeld if the permit had already been released or timed
// out; it never brings such a permit back.
func (p *Permit) Extend(ctx context.Context, ttl time.Duration) error {
	if p == nil {
		return errNilPermit
	}
	if p != nil && p.e.hooked() {
		return hookedErr(p.e, ctx, Operation{p.obj.kind.noun, p.obj.name, "Extend"}, func(ctx context.Context) error { return p.extend(ctx, ttl) })
	}
	return p.extend(ctx, ttl)
}

// TTL returns the time left before the permit times out, as the server
// counts it, or an error wrapping ErrNotHeld if it was released or timed
// out.
func (p *Permit) TTL(ctx context.Context) (time.Duration, error) {
	if p == nil {
		return 0, errNilPermit
	}
	if p != nil && p.e.hooked() {
		return hooked(p.e, ctx, Operation{p.obj.kind.noun, p.obj.name, "TTL"}, func(ctx context.Context) (time.Duration, error) { return p.ttl(ctx) })
	}
	return p.ttl(ctx)
}

// Weight returns how much of the limit this permit takes:
// SemaphoreOptions.Weight, 1 for 0 (0 for a nil permit).
func (p *Permit) Weight() int {
	if p == nil {
		return 0
	}
	return p.weight
}

// Owner returns the Owner stored with this permit: SemaphoreOptions.Owner,
// or the last SetOwner's ("" for a nil permit).
func (p *Permit) Owner() string {
	if p == nil {
		return ""
	}
	return p.currentOwner()
}

// SetOwner stores owner (at most MaxOwner bytes; "" for none) with the
// permit in place of its Owner, in one script that changes nothing else
// (the permit's time runs on). It returns an error wrapping ErrNotHeld,
// and stores nothing, if the permit had been released or timed out.
func (p *Permit) SetOwner(ctx context.Context, owner string) error {
	if p == nil {
		return errNilPermit
	}
	if p != nil && p.e.hooked() {
		return hookedErr(p.e, ctx, Operation{p.obj.kind.noun, p.obj.name, "SetOwner"}, func(ctx context.Context) error { return p.setOwner(ctx, owner) })
	}
	return p.setOwner(ctx, owner)
}

// Held reports whether the permit is still live (false for a nil permit).
func (p *Permit) Held(ctx context.Context) (bool, error) {
	if p != nil && p.e.hooked() {
		return hooked(p.e, ctx, Operation{p.obj.kind.noun, p.obj.name, "Held"}, func(ctx context.Context) (bool, error) { return held(p.ttl(ctx)) })
	}
	return held(p.TTL(ctx))
}

// Token returns the random identifier (a UUID v4) of this permit, or "" for
// a nil permit.
func (p *Permit) Token() string {
	if p == nil {
		return ""
	}
	return p.token
}

// Fence returns the counter value that ranked this permit (0 for a nil
// permit): it grows strictly with every permit granted by the semaphore,
// as a lock's fence does (see Lock.Fence).
func (p *Permit) Fence() int64 {
	if p == nil {
		return 0
	}
	return p.fence
}

// Lost returns a channel that closes when the engine finds the permit gone
// while it keeps it (the watchdog, or the confirmation of a permit handed
// over to this waiter), as Lock.Lost.
func (p *Permit) Lost() <-chan struct{} {
	if p == nil {
		return closedChan
	}
	return p.lostChan()
}

// Context returns a context derived from parent that is done when parent
// is, when the permit is released, or when it is lost, as Lock.Context.
func (p *Permit) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if p == nil {
		return canceled(parent)
	}
	return p.context(parent)
}

var errNilPermit = &Error{Err: fmt.Errorf("nil permit: %w", ErrNotHeld)}
