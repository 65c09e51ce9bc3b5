// Package atomicredis gives Go services the application components of
// Redis in Action chapter 6 — distributed locks, fair counting semaphores,
// autocomplete — plus a Redisson-style lock (lease, watchdog, held-by-me)
// and activity bitmaps. Every operation is one atomic Lua script, run with
// EVALSHA in one round trip: no WATCH retries, no race windows, and no
// client clock deciding who holds what.
//
// Every key of one object shares a cluster hash tag, <ns><kind>:{<name>},
// so each script touches a single slot.
package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

// Pool hands out connections; *redis.Pool satisfies it.
type Pool interface {
	GetContext(ctx context.Context) (redis.Conn, error)
}

// The errors callers test for with errors.Is.
var (
	// ErrNotAcquired: the lock or a permit could not be had in time. A wait
	// ended by its context wraps ctx.Err() as well.
	ErrNotAcquired = errors.New("atomicredis: not acquired")
	// ErrNotHeld: the caller's lock or permit has expired or passed to
	// another holder, or the holding is nil.
	ErrNotHeld = errors.New("atomicredis: not held")
	// ErrInvalid: an argument was rejected; nothing was written.
	ErrInvalid = errors.New("atomicredis: invalid argument")
	// ErrClosed: the engine was closed and takes no new locks or permits.
	ErrClosed = errors.New("atomicredis: engine closed")
)

// Defaults applied when an option or duration is zero, and the engine's own
// time bounds.
const (
	DefaultTTL            = 10 * time.Second
	DefaultWait           = 10 * time.Second
	DefaultRecentCapacity = 100

	// ReleaseTimeout bounds Unlock and Release when the caller's context
	// is done or ends sooner: they always make their attempt.
	ReleaseTimeout = time.Second
	// UndoTimeout bounds the background undo of an acquisition whose
	// outcome is unknown (its caller gave up mid-call).
	UndoTimeout = time.Second
)

// Engine runs the scripts against a pool. It is safe for concurrent use.
type Engine struct {
	pool      Pool
	ns        string
	recentCap int
	err       error // a rejected option or nil pool, returned by every call

	mu        sync.Mutex
	closed    bool
	watchdogs map[*Lock]struct{} // locks whose watchdog runs
	undos     sync.WaitGroup     // background undos; Add only under mu, before closed

	// plainSuggest is set once the server refused the allow-oom shebang
	// (Redis < 7, miniredis): from then on Suggest runs the plain script.
	plainSuggest atomic.Bool
}

// Option configures an Engine.
type Option func(*Engine)

// WithNamespace prefixes every key with prefix (default ""). A prefix
// containing '{' or '}' is rejected: every call then returns ErrInvalid.
func WithNamespace(prefix string) Option {
	return func(e *Engine) {
		if strings.ContainsAny(prefix, "{}") {
			e.reject(fmt.Errorf("atomicredis: namespace %q: contains a brace: %w", prefix, ErrInvalid))
			return
		}
		e.ns = prefix
	}
}

// WithRecentCapacity sets how many items a recent list keeps (default 100).
// n < 1 is rejected: every call then returns ErrInvalid.
func WithRecentCapacity(n int) Option {
	return func(e *Engine) {
		if n < 1 {
			e.reject(fmt.Errorf("atomicredis: recent capacity %d: must be at least 1: %w", n, ErrInvalid))
			return
		}
		e.recentCap = n
	}
}

// New returns an Engine that takes connections from pool. New never fails:
// a nil pool or a rejected option makes every call return an error
// wrapping ErrInvalid, before any I/O.
func New(pool Pool, opts ...Option) *Engine {
	e := &Engine{pool: pool, recentCap: DefaultRecentCapacity}
	if pool == nil {
		e.reject(fmt.Errorf("atomicredis: nil pool: %w", ErrInvalid))
	}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	return e
}

// Close stops every watchdog the engine runs (those locks are no longer
// renewed, so their Lost channels close; their leases run out on the
// server unless unlocked) and waits, until ctx ends, for the background
// undos of acquisitions cut off mid-call. Afterwards the engine takes no
// new locks or permits (ErrClosed); holdings can still be unlocked,
// released and queried. Close is safe to call more than once.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	guarded := make([]*Lock, 0, len(e.watchdogs))
	for l := range e.watchdogs {
		guarded = append(guarded, l)
	}
	e.mu.Unlock()
	for _, l := range guarded {
		l.stopWatchdog()
		l.markLost()
	}
	done := make(chan struct{})
	go func() { e.undos.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("atomicredis: close: waiting for undos: %w", ctx.Err())
	}
}

func (e *Engine) reject(err error) {
	if e.err == nil {
		e.err = err
	}
}

// check validates the engine and an object name: non-empty, no braces (the
// engine adds the hash tag itself).
func (e *Engine) check(kind, name string) error {
	if e.err != nil {
		return e.err
	}
	if name == "" || strings.ContainsAny(name, "{}") {
		return fmt.Errorf("atomicredis: %s %q: name must be non-empty and contain no braces: %w", kind, name, ErrInvalid)
	}
	return nil
}

// key builds <ns><kind>:{<name>}<suffix>, suffix being "" or ":..."; the
// braces make every key of one object hash to the same cluster slot.
func (e *Engine) key(kind, name, suffix string) string {
	return e.ns + kind + ":{" + name + "}" + suffix
}

// duration resolves an optional duration: 0 is def, anything else must be
// at least 1 ms (Redis counts in milliseconds).
func duration(kind, name, field string, d, def time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < time.Millisecond:
		return 0, fmt.Errorf("atomicredis: %s %q: %s %v: must be 0 (default) or at least 1ms: %w", kind, name, field, d, ErrInvalid)
	}
	return d, nil
}

// ---------------------------------------------------------------------------
// The call path: one script, one pooled connection, one round trip

// eval runs one script on one pooled connection: EVALSHA, falling back to
// EVAL when the server answers NOSCRIPT. Errors name the object.
func (e *Engine) eval(ctx context.Context, s *redis.Script, kind, name string, keysAndArgs ...any) (any, error) {
	reply, _, err := e.evalSent(ctx, s, kind, name, keysAndArgs...)
	return reply, err
}

// evalSent is eval, also reporting whether the command may have reached the
// server: false when ctx was done or no connection could be had, so there
// is nothing to undo.
func (e *Engine) evalSent(ctx context.Context, s *redis.Script, kind, name string, keysAndArgs ...any) (reply any, sent bool, err error) {
	// redigo sends a command even on a done context, so check first.
	if err := ctxErr(ctx); err != nil {
		return nil, false, fmt.Errorf("atomicredis: %s %q: %w", kind, name, err)
	}
	conn, err := e.pool.GetContext(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("atomicredis: %s %q: %w", kind, name, err)
	}
	defer conn.Close()
	if c, ok := conn.(redis.ConnWithContext); ok && ctx.Done() != nil {
		reply, err = s.DoContext(ctx, c, keysAndArgs...)
	} else {
		// A context that can never end needs none of DoContext's
		// goroutine-per-command machinery.
		reply, err = s.Do(conn, keysAndArgs...)
	}
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
			// redigo reports a deadline hit mid-command as an i/o timeout.
			return nil, true, fmt.Errorf("atomicredis: %s %q: %w (%w)", kind, name, cerr, err)
		}
		return nil, true, fmt.Errorf("atomicredis: %s %q: %w", kind, name, err)
	}
	return reply, true, nil
}

// ctxErr is ctx.Err(), or DeadlineExceeded once the deadline has passed
// even if ctx's own timer has not fired yet.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// releaseContext is the context Unlock and Release run on: ctx's values
// without its cancellation, ending at ctx's deadline or after
// ReleaseTimeout, whichever is later. A release must be attempted even when
// the caller's context is done (defer l.Unlock(ctx) on a finished request).
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(ReleaseTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.After(deadline) {
		deadline = dl
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// unknownOutcome reports whether a failed call that was sent may still have
// run on the server: anything but an error reply from Redis itself (a
// script that fails changes nothing).
func unknownOutcome(err error) bool {
	var reply redis.Error
	return err != nil && !errors.As(err, &reply)
}

// evalInt64 is eval for scripts that reply with one integer.
func (e *Engine) evalInt64(ctx context.Context, s *redis.Script, kind, name string, keysAndArgs ...any) (int64, error) {
	return redis.Int64(e.eval(ctx, s, kind, name, keysAndArgs...))
}

// undo runs an abandon script in the background, bounded by UndoTimeout,
// for an acquisition whose caller has already been told it failed. Close
// waits for it. Its error is dropped: if it fails, the lease still ends
// whatever the late acquire took.
func (e *Engine) undo(script *redis.Script, kind, name string, keysAndArgs ...any) {
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), UndoTimeout)
		defer cancel()
		e.eval(ctx, script, kind, name, keysAndArgs...)
	}
	e.mu.Lock()
	if e.closed { // Close may be waiting already: no new Add, run it here
		e.mu.Unlock()
		run()
		return
	}
	e.undos.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.undos.Done()
		run()
	}()
}

// ---------------------------------------------------------------------------
// Waiting: attempts in a loop, paced by the client, decided by the server

// retry calls try until it succeeds or fails, until wait runs out (an
// error wrapping ErrNotAcquired) or until ctx ends (one wrapping both
// ErrNotAcquired and ctx.Err()). try reports how long the current holder
// has left, if it knows; pauses are a few milliseconds and never longer
// than that hint, so a waiter sees a release or an expiry promptly.
func retry(ctx context.Context, kind, name string, wait time.Duration, try func() (ok bool, hint time.Duration, err error)) error {
	deadline := time.Now().Add(wait)
	for attempt := 1; ; attempt++ {
		ok, hint, err := try()
		if ok || err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("atomicredis: %s %q: taken; gave up after %s in %v: %w", kind, name, attempts(attempt), wait, ErrNotAcquired)
		}
		t := time.NewTimer(min(pauseFor(attempt-1, hint), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("atomicredis: %s %q: while waiting: %w: %w", kind, name, ErrNotAcquired, ctx.Err())
		case <-t.C:
		}
	}
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// pauseFor backs off 1, 2, 4 ms, each halved at random (so 0.5-1, 1-2,
// 2-4 ms: waiters do not march in step), and no longer than hint when the
// holder's expiry is nearer.
func pauseFor(attempt int, hint time.Duration) time.Duration {
	base := time.Millisecond << min(attempt, 2)
	p := base/2 + rand.N(base/2+1)
	if hint > 0 && hint < p {
		p = hint
	}
	return p
}

// acquire runs an acquire script until it grants (it returns the fence and
// when the granting attempt was sent), wait runs out, or ctx ends.
//
// Acquire scripts share one shape: KEYS are keys, the last being the
// token's void mark; ARGV are token, extra..., ttl in ms; the reply is
// {1, fence}, {0, ms until the holder's expiry}, or {-1, n}: refused as
// invalid, n being the limit the object's holders share. Their abandon
// scripts take the same keys, then ARGV token, ttl in ms. When an attempt
// that reached the server fails with its outcome unknown (a timeout, a
// reset connection: the script may have run, or may yet), abandon undoes
// it in the background, so no caller holds what it was told it did not
// get.
func (e *Engine) acquire(ctx context.Context, kind, name string, wait time.Duration, token string, ttl time.Duration,
	script, abandon *redis.Script, keys []string, extra ...any) (fence int64, sent time.Time, err error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return 0, sent, fmt.Errorf("atomicredis: %s %q: %w", kind, name, ErrClosed)
	}
	ms := ttl.Milliseconds()
	keyArgs := make([]any, 0, len(keys))
	for _, k := range keys {
		keyArgs = append(keyArgs, k)
	}
	args := append(append(append(keyArgs[:len(keyArgs):len(keyArgs)], token), extra...), ms)
	undo := append(keyArgs[:len(keyArgs):len(keyArgs)], token, ms)

	err = retry(ctx, kind, name, wait, func() (bool, time.Duration, error) {
		sent = time.Now()
		reply, reached, err := e.evalSent(ctx, script, kind, name, args...)
		v, err := redis.Int64s(reply, err)
		if err != nil {
			if reached && unknownOutcome(err) {
				e.undo(abandon, kind, name, undo...)
			}
			if cerr := ctxErr(ctx); cerr != nil && errors.Is(err, cerr) {
				return false, 0, fmt.Errorf("atomicredis: %s %q: %w: %w", kind, name, ErrNotAcquired, cerr)
			}
			return false, 0, err
		}
		switch {
		case len(v) != 2:
			return false, 0, fmt.Errorf("atomicredis: %s %q: unexpected reply %v", kind, name, v)
		case v[0] < 0:
			return false, 0, fmt.Errorf("atomicredis: %s %q: in use with limit %d: %w", kind, name, v[1], ErrInvalid)
		case v[0] == 0:
			return false, time.Duration(v[1]) * time.Millisecond, nil
		}
		fence = v[1]
		return true, 0, nil
	})
	return fence, sent, err
}

func newToken() (string, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("atomicredis: token: %w", err)
	}
	return id.String(), nil
}

// closedChan is what Lost returns for a nil lock.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// ---------------------------------------------------------------------------
// Locks (Redis in Action §6.2, with Redisson's lease, wait and watchdog)

// LockOptions tunes one acquisition. The zero value means the defaults.
type LockOptions struct {
	TTL      time.Duration // lease; 0 = 10s
	Wait     time.Duration // how long Lock waits; 0 = 10s (TryLock never waits)
	Watchdog bool          // renew the lease every TTL/3 until Unlock or loss
}

// Lock is one holding of a named lock. Its methods are safe for concurrent
// use, and on a nil *Lock (as a failed TryLock returns) none panics: they
// report ErrNotHeld.
type Lock struct {
	e      *Engine
	name   string
	key    string
	token  string
	fence  int64
	lost   chan struct{}
	once   sync.Once
	stopWD context.CancelFunc // nil without a watchdog
	wdDone chan struct{}      // closed when the watchdog goroutine ends
	reset  chan struct{}      // tells the watchdog the lease changed

	mu      sync.Mutex
	lease   time.Duration
	renewed time.Time // when the last successful acquire/extend was sent
	seq     int64     // the last renewal's sequence number (lock_extend)
}

// Lock acquires the named lock, waiting up to o.Wait (default 10s) while
// another holds it. It returns an error wrapping ErrNotAcquired when the
// wait runs out or ctx ends first; in the latter case it wraps ctx.Err()
// as well.
func (e *Engine) Lock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, name, o, true)
}

// TryLock makes one attempt at the named lock and returns an error wrapping
// ErrNotAcquired if another holds it. o.Wait is ignored.
func (e *Engine) TryLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, name, o, false)
}

func (e *Engine) lock(ctx context.Context, name string, o LockOptions, wait bool) (*Lock, error) {
	if err := e.check("lock", name); err != nil {
		return nil, err
	}
	ttl, err := duration("lock", name, "TTL", o.TTL, DefaultTTL)
	if err != nil {
		return nil, err
	}
	maxWait, err := duration("lock", name, "Wait", o.Wait, DefaultWait)
	if err != nil {
		return nil, err
	}
	if !wait {
		maxWait = 0
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	key := e.key("lock", name, "")
	fence, sent, err := e.acquire(ctx, "lock", name, maxWait, token, ttl,
		scriptLockAcquire, scriptLockAbandon, []string{key, e.key("lock", name, ":fence"), e.key("lock", name, ":void:"+token)})
	if err != nil {
		return nil, err
	}
	l := &Lock{e: e, name: name, key: key, token: token, fence: fence,
		lost: make(chan struct{}), lease: ttl, renewed: sent}
	if o.Watchdog {
		l.startWatchdog()
	}
	return l, nil
}

// IsLocked reports whether anyone holds the named lock.
func (e *Engine) IsLocked(ctx context.Context, name string) (bool, error) {
	if err := e.check("lock", name); err != nil {
		return false, err
	}
	n, err := e.evalInt64(ctx, scriptLockLocked, "lock", name, e.key("lock", name, ""))
	return n == 1, err
}

// Token returns the random identifier (a UUID v4) that marks this holding,
// or "" for a nil lock.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns this holding's fencing token (0 for a nil lock): it grows
// strictly with every acquisition of the lock's name, across engines and
// processes. Pass it to the resource the lock guards, which should refuse a
// fence lower than the highest it has seen. The counter behind it
// (<ns>lock:{name}:fence) never expires: one small key per lock name.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Lost returns a channel the watchdog closes when it finds the lock gone
// (expired, or taken after a lapse), cannot renew it before the lease runs
// out, or is stopped by Engine.Close. Without a watchdog the channel never
// closes; for a nil lock it is closed.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	return l.lost
}

// Unlock releases the lock. It stops the watchdog first, so no renewal is
// sent after Unlock returns. It makes its attempt even when ctx is already
// done, bounded by ReleaseTimeout (or ctx's later deadline), so that
// defer l.Unlock(ctx) on a finished request still frees the lock. It
// returns an error wrapping ErrNotHeld if the lock had already expired or
// passed to another holder, whom it never disturbs.
func (l *Lock) Unlock(ctx context.Context) error {
	if l == nil {
		return errNilLock
	}
	l.stopWatchdog()
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	n, err := l.e.evalInt64(ctx, scriptLockRelease, "lock", l.name, l.key, l.token)
	if err != nil {
		return err
	}
	if n == 0 {
		return l.notHeld()
	}
	return nil
}

// Extend sets the lock's remaining lease to ttl (0 = its current lease:
// the TTL it was taken with, or the last Extend's), and the watchdog renews
// with ttl from then on. A watchdog renewal sent before Extend never undoes
// it, however late it reaches the server: renewals are numbered, and the
// server applies none older than one it has applied. It returns an error
// wrapping ErrNotHeld if the lock is no longer this holder's.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return errNilLock
	}
	ttl, err := duration("lock", l.name, "TTL", ttl, l.currentLease())
	if err != nil {
		return err
	}
	// The new lease is the watchdog's from this instant: any renewal
	// numbered after this one carries it.
	l.mu.Lock()
	l.lease = ttl
	l.seq++
	seq := l.seq
	l.mu.Unlock()
	sent := time.Now()
	ok, err := l.extend(ctx, ttl, seq)
	if err != nil {
		return err
	}
	if !ok {
		l.markLost()
		return l.notHeld()
	}
	l.mu.Lock()
	if l.renewed.Before(sent) {
		l.renewed = sent
	}
	l.mu.Unlock()
	select {
	case l.reset <- struct{}{}:
	default: // nil channel (no watchdog) or a reset already pending
	}
	return nil
}

// TTL returns the lock's remaining lease, as the server counts it, or an
// error wrapping ErrNotHeld if the lock is no longer this holder's.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, errNilLock
	}
	ms, err := l.e.evalInt64(ctx, scriptLockPTTL, "lock", l.name, l.key, l.token)
	if err != nil {
		return 0, err
	}
	if ms == -3 {
		l.markLost()
		return 0, l.notHeld()
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Held reports whether this holder still holds the lock (false for a nil
// lock).
func (l *Lock) Held(ctx context.Context) (bool, error) {
	return held(l.TTL(ctx))
}

// held turns a TTL call's outcome into Held's.
func held(_ time.Duration, err error) (bool, error) {
	if errors.Is(err, ErrNotHeld) {
		return false, nil
	}
	return err == nil, err
}

var errNilLock = fmt.Errorf("atomicredis: nil lock: %w", ErrNotHeld)

func (l *Lock) notHeld() error {
	return fmt.Errorf("atomicredis: lock %q: fence %d: %w", l.name, l.fence, ErrNotHeld)
}

// extend sends renewal number seq; a stale one (lock_extend's 2) counts as
// held: a newer renewal of this holder's already stands.
func (l *Lock) extend(ctx context.Context, ttl time.Duration, seq int64) (bool, error) {
	n, err := l.e.evalInt64(ctx, scriptLockExtend, "lock", l.name, l.key, l.token, ttl.Milliseconds(), seq)
	return n >= 1, err
}

func (l *Lock) currentLease() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// markLost closes Lost, once, when a watchdog guards the lock.
func (l *Lock) markLost() {
	if l.stopWD != nil {
		l.once.Do(func() { close(l.lost) })
	}
}

// startWatchdog starts renewing, registered with the engine so Close can
// stop it. On a closed engine nothing would stop it, so none starts and
// Lost closes at once: nobody renews this lease.
func (l *Lock) startWatchdog() {
	ctx, cancel := context.WithCancel(context.Background())
	l.stopWD, l.wdDone, l.reset = cancel, make(chan struct{}), make(chan struct{}, 1)
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	if l.e.closed {
		close(l.wdDone)
		l.markLost()
		return
	}
	if l.e.watchdogs == nil {
		l.e.watchdogs = map[*Lock]struct{}{}
	}
	l.e.watchdogs[l] = struct{}{}
	go l.watch(ctx)
}

// stopWatchdog ends the watchdog and waits until it has, so no renewal is
// in flight afterwards. Safe to call more than once, and without one.
func (l *Lock) stopWatchdog() {
	if l.stopWD != nil {
		l.stopWD()
		<-l.wdDone
	}
}

// watch renews the lease every lease/3 (Redisson's rhythm). A reply saying
// the lock is gone closes Lost. A Redis error is retried every lease/10
// until the lease would have run out since the last renewal was sent; then
// the lock must be presumed lost. The client clock only paces renewals
// here; whether the lock is held is always the server's answer.
func (l *Lock) watch(ctx context.Context) {
	defer func() {
		l.e.mu.Lock()
		delete(l.e.watchdogs, l)
		l.e.mu.Unlock()
		close(l.wdDone)
	}()
	next := l.currentLease() / 3
	for {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.lost:
			t.Stop()
			return
		case <-l.reset:
			t.Stop()
			next = l.currentLease() / 3
			continue
		case <-t.C:
		}
		l.mu.Lock()
		l.seq++
		lease, renewed, seq := l.lease, l.renewed, l.seq
		l.mu.Unlock()
		callCtx, cancel := context.WithDeadline(ctx, renewed.Add(lease))
		sent := time.Now()
		ok, err := l.extend(callCtx, lease, seq)
		cancel()
		l.mu.Lock()
		if err == nil && ok && l.renewed.Before(sent) {
			l.renewed = sent
		}
		renewed = l.renewed // an Extend meanwhile counts too
		l.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && ok:
			next = lease / 3
		case err == nil, time.Since(renewed) >= lease:
			l.markLost()
			return
		default:
			next = max(lease/10, time.Millisecond)
		}
	}
}

// ---------------------------------------------------------------------------
// Counting semaphores (Redis in Action §6.3: the fair semaphore, in one
// script, on the server's clock)

// SemaphoreOptions tunes one acquisition. Limit is required.
type SemaphoreOptions struct {
	Limit int           // permits that may be held at once; >= 1
	TTL   time.Duration // permit timeout; 0 = 10s
	Wait  time.Duration // how long to wait for a permit; 0 = one attempt (the book's behaviour)
}

// Permit is one held permit of a counting semaphore. Its methods are safe
// for concurrent use, and on a nil *Permit none panics: they report
// ErrNotHeld.
type Permit struct {
	e     *Engine
	name  string
	keys  []any // timeouts, owner, limit
	token string
	fence int64
	ttl   time.Duration
}

// AcquireSemaphore takes one of o.Limit permits of the named semaphore,
// for o.TTL (default 10s) unless refreshed. With o.Wait 0 it makes one
// attempt; otherwise it waits up to o.Wait. It returns an error wrapping
// ErrNotAcquired if no permit came free in time or ctx ended first (then
// it wraps ctx.Err() as well). Permits time out by the server's clock; the
// caller's clock decides nothing.
//
// The limit is stored with the semaphore: the first acquisition sets it,
// and while permits granted under it are live, a call with another Limit
// returns an error wrapping ErrInvalid that names the stored limit, and
// writes nothing. The stored limit goes with the last permit, so an idle
// semaphore takes a new one.
func (e *Engine) AcquireSemaphore(ctx context.Context, name string, o SemaphoreOptions) (*Permit, error) {
	if err := e.check("semaphore", name); err != nil {
		return nil, err
	}
	if o.Limit < 1 {
		return nil, fmt.Errorf("atomicredis: semaphore %q: limit %d: must be at least 1: %w", name, o.Limit, ErrInvalid)
	}
	ttl, err := duration("semaphore", name, "TTL", o.TTL, DefaultTTL)
	if err != nil {
		return nil, err
	}
	wait, err := duration("semaphore", name, "Wait", o.Wait, 0)
	if err != nil {
		return nil, err
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	timeouts, owner, limit := e.key("sem", name, ""), e.key("sem", name, ":owner"), e.key("sem", name, ":limit")
	fence, _, err := e.acquire(ctx, "semaphore", name, wait, token, ttl, scriptSemAcquire, scriptSemAbandon,
		[]string{timeouts, owner, e.key("sem", name, ":counter"), limit, e.key("sem", name, ":void:"+token)}, o.Limit)
	if err != nil {
		return nil, err
	}
	return &Permit{e: e, name: name, keys: []any{timeouts, owner, limit}, token: token, fence: fence, ttl: ttl}, nil
}

// SemaphoreHolders returns how many permits of the named semaphore are
// live now, after dropping those past their deadline.
func (e *Engine) SemaphoreHolders(ctx context.Context, name string) (int, error) {
	if err := e.check("semaphore", name); err != nil {
		return 0, err
	}
	n, err := e.evalInt64(ctx, scriptSemHolders, "semaphore", name,
		e.key("sem", name, ""), e.key("sem", name, ":owner"), e.key("sem", name, ":limit"))
	return int(n), err
}

// Release gives the permit back. Like Unlock it makes its attempt even
// when ctx is already done, bounded by ReleaseTimeout (or ctx's later
// deadline). It returns an error wrapping ErrNotHeld if the permit had
// already been released or timed out (its slot may be someone else's now).
func (p *Permit) Release(ctx context.Context) error {
	if p == nil {
		return errNilPermit
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	return p.run(ctx, scriptSemRelease, p.token)
}

// Refresh restarts the permit's timeout (its TTL from now). It returns an
// error wrapping ErrNotHeld if the permit had already been released or
// timed out; it never brings such a permit back.
func (p *Permit) Refresh(ctx context.Context) error {
	if p == nil {
		return errNilPermit
	}
	return p.run(ctx, scriptSemRefresh, p.token, p.ttl.Milliseconds())
}

// TTL returns the time left before the permit times out, as the server
// counts it, or an error wrapping ErrNotHeld if it was released or timed
// out. It writes nothing.
func (p *Permit) TTL(ctx context.Context) (time.Duration, error) {
	if p == nil {
		return 0, errNilPermit
	}
	ms, err := p.e.evalInt64(ctx, scriptSemPTTL, "semaphore", p.name, p.keys[0], p.keys[1], p.token)
	if err != nil {
		return 0, err
	}
	if ms == -3 {
		return 0, p.notHeld()
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Held reports whether the permit is still live (false for a nil permit).
func (p *Permit) Held(ctx context.Context) (bool, error) {
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
// permit): it grows strictly with every permit granted by the semaphore.
func (p *Permit) Fence() int64 {
	if p == nil {
		return 0
	}
	return p.fence
}

var errNilPermit = fmt.Errorf("atomicredis: nil permit: %w", ErrNotHeld)

func (p *Permit) notHeld() error {
	return fmt.Errorf("atomicredis: semaphore %q: permit %d: released or timed out: %w", p.name, p.fence, ErrNotHeld)
}

// run runs a script on the permit's keys that replies 1 if it was held.
func (p *Permit) run(ctx context.Context, s *redis.Script, args ...any) error {
	n, err := p.e.evalInt64(ctx, s, "semaphore", p.name, append(p.keys[:3:3], args...)...)
	if err != nil {
		return err
	}
	if n != 1 {
		return p.notHeld()
	}
	return nil
}

// ---------------------------------------------------------------------------
// Autocomplete (Redis in Action §6.1): a recent list, and prefix search on
// a sorted set

// AddRecent puts item at the front of the named recent list, removing any
// other copy, and keeps the newest N items (WithRecentCapacity, default
// 100). The item must not be empty.
func (e *Engine) AddRecent(ctx context.Context, list, item string) error {
	if err := e.checkRecent(list, item); err != nil {
		return err
	}
	_, err := e.eval(ctx, scriptRecentAdd, "recent list", list, e.key("recent", list, ""), item, e.recentCap)
	return err
}

// RemoveRecent removes item from the named recent list; an absent item is
// not an error.
func (e *Engine) RemoveRecent(ctx context.Context, list, item string) error {
	if err := e.checkRecent(list, item); err != nil {
		return err
	}
	_, err := e.eval(ctx, scriptRecentRemove, "recent list", list, e.key("recent", list, ""), item)
	return err
}

// SuggestRecent returns up to limit items of the named recent list that
// start with prefix, ignoring ASCII case, most recent first. The filtering
// happens on the server.
func (e *Engine) SuggestRecent(ctx context.Context, list, prefix string, limit int) ([]string, error) {
	if err := e.checkLimit("recent list", list, limit); err != nil {
		return nil, err
	}
	return redis.Strings(e.eval(ctx, scriptRecentSuggest, "recent list", list, e.key("recent", list, ""), prefix, limit))
}

// AddMembers adds members (any bytes, the empty string too) to the named
// prefix-search set. With no members it does nothing.
func (e *Engine) AddMembers(ctx context.Context, set string, members ...string) error {
	return e.members(ctx, scriptMembersAdd, set, members)
}

// RemoveMembers removes members from the named prefix-search set; absent
// ones are ignored. With no members it does nothing.
func (e *Engine) RemoveMembers(ctx context.Context, set string, members ...string) error {
	return e.members(ctx, scriptMembersRemove, set, members)
}

// Suggest returns up to limit members of the named set that start with
// prefix, compared as bytes, in byte order. The empty prefix matches every
// member. A query never adds, removes or hides a member; it finds them with
// the book's start and end markers, inserted and removed within its one
// script, so it needs a writable server and a set whose members all have
// score 0 (as AddMembers gives them). On Redis 7 and later the script is
// flagged allow-oom, so a query answers even at maxmemory under noeviction;
// Redis before 7 (and miniredis) refuse the flag, and there a query at
// maxmemory fails with OOM like any write.
func (e *Engine) Suggest(ctx context.Context, set, prefix string, limit int) ([]string, error) {
	if err := e.checkLimit("member set", set, limit); err != nil {
		return nil, err
	}
	args := []any{e.key("members", set, ""), prefix, limit}
	if !e.plainSuggest.Load() {
		got, err := redis.Strings(e.eval(ctx, scriptSuggestOOM, "member set", set, args...))
		if !shebangRefused(err) {
			return got, err
		}
		// The refusal changed nothing; the engine remembers it, so only its
		// first query pays the extra round trip.
		e.plainSuggest.Store(true)
	}
	return redis.Strings(e.eval(ctx, scriptSuggest, "member set", set, args...))
}

// shebangRefused reports whether the server refused a script for its
// shebang line: before 7.0 Redis compiles "#!lua ..." as Lua and fails, as
// miniredis does; a server that knows shebangs but not a flag says so.
func shebangRefused(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) &&
		(strings.Contains(string(reply), "Error compiling script") || strings.Contains(string(reply), "shebang"))
}

func (e *Engine) members(ctx context.Context, s *redis.Script, set string, members []string) error {
	if err := e.check("member set", set); err != nil || len(members) == 0 {
		return err
	}
	args := make([]any, 0, len(members)+1)
	args = append(args, e.key("members", set, ""))
	for _, m := range members {
		args = append(args, m)
	}
	_, err := e.eval(ctx, s, "member set", set, args...)
	return err
}

func (e *Engine) checkRecent(list, item string) error {
	if err := e.check("recent list", list); err != nil {
		return err
	}
	if item == "" {
		return fmt.Errorf("atomicredis: recent list %q: empty item: %w", list, ErrInvalid)
	}
	return nil
}

func (e *Engine) checkLimit(kind, name string, limit int) error {
	if err := e.check(kind, name); err != nil {
		return err
	}
	if limit < 1 {
		return fmt.Errorf("atomicredis: %s %q: limit %d: must be at least 1: %w", kind, name, limit, ErrInvalid)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Activity bitmaps: one bit per id per period, SETBIT / GETBIT / BITOP OR

// MaxActiveID is the largest id a bitmap takes (Redis caps bit offsets at
// 2^32-1). A bitmap costs up to id/8 bytes: keep ids dense.
const MaxActiveID = 1<<32 - 1

// MarkActive marks id active in the group's bitmap for period (any bytes,
// such as "2026-11-21").
func (e *Engine) MarkActive(ctx context.Context, group, period string, id int64) error {
	if err := e.checkID(group, id); err != nil {
		return err
	}
	_, err := e.eval(ctx, scriptActiveMark, "activity group", group, e.key("active", group, ":"+period), id)
	return err
}

// IsActive reports whether id was marked active in the group for period.
func (e *Engine) IsActive(ctx context.Context, group, period string, id int64) (bool, error) {
	if err := e.checkID(group, id); err != nil {
		return false, err
	}
	n, err := e.evalInt64(ctx, scriptActiveIs, "activity group", group, e.key("active", group, ":"+period), id)
	return n == 1, err
}

// CountActive returns how many ids were active in at least one of the
// periods (a BITOP OR, counted on the server). At least one period is
// required.
func (e *Engine) CountActive(ctx context.Context, group string, periods ...string) (int64, error) {
	if err := e.check("activity group", group); err != nil {
		return 0, err
	}
	if len(periods) == 0 {
		return 0, fmt.Errorf("atomicredis: activity group %q: no periods: %w", group, ErrInvalid)
	}
	args := make([]any, 0, len(periods)+2)
	// The scratch key has no ":" after the tag, so no period's key is it.
	args = append(args, len(periods)+1, e.key("active", group, ""))
	for _, p := range periods {
		args = append(args, e.key("active", group, ":"+p))
	}
	return e.evalInt64(ctx, scriptActiveCount, "activity group", group, args...)
}

func (e *Engine) checkID(group string, id int64) error {
	if err := e.check("activity group", group); err != nil {
		return err
	}
	if id < 0 || id > MaxActiveID {
		return fmt.Errorf("atomicredis: activity group %q: id %d: must be in [0, 2^32): %w", group, id, ErrInvalid)
	}
	return nil
}
