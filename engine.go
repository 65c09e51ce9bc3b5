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
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// ErrNotReplicated: fewer replicas than WithReplicaAck asks for
	// acknowledged a write in time. An acquisition was undone; an Extend or
	// Refresh kept what it set.
	ErrNotReplicated = errors.New("atomicredis: not replicated")
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

	replicas   int           // WithReplicaAck: replicas to wait for; 0 = off
	ackTimeout time.Duration // WithReplicaAck: how long WAIT waits for them

	id       string        // names this engine's inboxes
	queueTTL time.Duration // a queue entry's lifetime unless renewed

	mu          sync.Mutex
	closed      bool
	stop        context.Context // ends with Close: cuts the listeners' pops short
	cancelStop  context.CancelFunc
	watchdogs   map[*Lock]struct{} // locks whose watchdog runs
	undos       sync.WaitGroup     // background undos; Add only under mu, before closed
	rooms       map[string]*room   // by inbox: this engine's waiters on one object
	blocking    int                // listeners running, each holding a connection
	maxBlocking int                // how many may: the engine's blocking budget
	listeners   sync.WaitGroup     // Add only under mu, before closed

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

// WithReplicaAck makes every acquisition, extend and refresh wait until
// replicas replicas have acknowledged it, for up to timeout: the script is
// followed by WAIT replicas timeout on the same connection, in the same
// round trip. With fewer acknowledgements an acquisition is undone and
// returns an error wrapping ErrNotReplicated; Extend and Refresh keep what
// they set and return such an error too. This keeps a failover from
// granting a lock a second time. replicas 0 turns it off (the default); a
// negative replicas, or a timeout under 1 ms with replicas > 0 (WAIT 0
// would block forever), is rejected: every call then returns ErrInvalid.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(e *Engine) {
		switch {
		case replicas < 0:
			e.reject(fmt.Errorf("atomicredis: replica ack: %d replicas: must be at least 0: %w", replicas, ErrInvalid))
		case replicas > 0 && timeout < time.Millisecond:
			e.reject(fmt.Errorf("atomicredis: replica ack: timeout %v: must be at least 1ms: %w", timeout, ErrInvalid))
		default:
			e.replicas, e.ackTimeout = replicas, timeout
		}
	}
}

// New returns an Engine that takes connections from pool. New never fails:
// a nil pool or a rejected option makes every call return an error
// wrapping ErrInvalid, before any I/O.
func New(pool Pool, opts ...Option) *Engine {
	e := &Engine{pool: pool, recentCap: DefaultRecentCapacity, id: uuid.NewString()[:13],
		queueTTL: defaultQueueTTL, maxBlocking: blockingBudget(pool)}
	e.stop, e.cancelStop = context.WithCancel(context.Background())
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

// blockingBudget is how many connections an engine's waiters may hold
// blocked at once: half of a *redis.Pool's MaxActive, so that holders can
// always reach the server to unlock (none with MaxActive 1: waiters then
// learn of a handoff when they renew, a third of the queue TTL late); 64
// for any other pool.
func blockingBudget(pool Pool) int {
	if p, ok := pool.(*redis.Pool); ok && p.MaxActive > 0 {
		return p.MaxActive / 2
	}
	return 64
}

// Close stops every watchdog the engine runs (those locks are no longer
// renewed, so their Lost channels close; their leases run out on the
// server unless unlocked) and waits, until ctx ends, for the background
// undos of acquisitions cut off mid-call and for the goroutines that wake
// waiters. Waits under way end by their own Wait or ctx. Afterwards the engine takes no
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
	e.cancelStop() // listeners stop blocking
	done := make(chan struct{})
	go func() { e.undos.Wait(); e.listeners.Wait(); close(done) }()
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

// maxRedirects bounds how often one call follows MOVED to another node.
const maxRedirects = 3

// binder is a connection that can be pinned to the node serving some keys
// before its first command, as a redisc cluster connection
// can. Such a connection would route EVALSHA by its first argument, the
// SHA, not by a key.
type binder interface {
	Bind(keys ...string) error
}

// ctxConn is a pooled connection whose Do and Receive honour ctx: through
// DoContext where the connection offers it, else with a read timeout up to
// ctx's deadline (redisc connections offer only that; a ctx that is only
// cancelled does not interrupt them), else plainly.
type ctxConn struct {
	redis.Conn
	ctx   context.Context
	bound bool // bound to a cluster node by key
}

func (c ctxConn) Do(cmd string, args ...any) (any, error) {
	if c.ctx.Done() == nil { // a ctx that never ends needs no machinery
		return c.Conn.Do(cmd, args...)
	}
	if cc, ok := c.Conn.(redis.ConnWithContext); ok {
		return cc.DoContext(c.ctx, cmd, args...)
	}
	if d, ok := c.timeout(); ok {
		if d <= 0 {
			return nil, context.DeadlineExceeded
		}
		return c.Conn.(redis.ConnWithTimeout).DoWithTimeout(d, cmd, args...)
	}
	return c.Conn.Do(cmd, args...)
}

func (c ctxConn) Receive() (any, error) {
	if c.ctx.Done() == nil {
		return c.Conn.Receive()
	}
	if cc, ok := c.Conn.(redis.ConnWithContext); ok {
		return cc.ReceiveContext(c.ctx)
	}
	if d, ok := c.timeout(); ok {
		if d <= 0 {
			return nil, context.DeadlineExceeded
		}
		return c.Conn.(redis.ConnWithTimeout).ReceiveWithTimeout(d)
	}
	return c.Conn.Receive()
}

// timeout is the time left until ctx's deadline, if ctx has one and the
// connection takes a read timeout. (redigo reads a timeout of 0 as none, so
// callers must not pass one.)
func (c ctxConn) timeout() (time.Duration, bool) {
	dl, ok := c.ctx.Deadline()
	if !ok {
		return 0, false
	}
	if _, ok := c.Conn.(redis.ConnWithTimeout); !ok {
		return 0, false
	}
	return time.Until(dl), true
}

// conn takes a connection from the pool for commands on key, bound to the
// node serving key when the connection can bind (a cluster connection; on
// any other it is a no-op). Its Do and Receive honour ctx. The caller
// closes it.
func (e *Engine) conn(ctx context.Context, key string) (redis.Conn, error) {
	c, err := e.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	b, bound := c.(binder)
	if bound && key != "" {
		if err := b.Bind(key); err != nil {
			c.Close()
			return nil, err
		}
	}
	return ctxConn{Conn: c, ctx: ctx, bound: bound}, nil
}

// routeKey is the key a script call is routed by: its first key. A script
// loaded with key count -1 takes the count first (redigo's convention), and
// the count is an int where every key is a string.
func routeKey(keysAndArgs []any) string {
	for _, v := range keysAndArgs[:min(2, len(keysAndArgs))] {
		if k, ok := v.(string); ok {
			return k
		}
	}
	return ""
}

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
	return e.call(ctx, s, kind, name, false, keysAndArgs)
}

// evalAck is evalSent followed, when WithReplicaAck is on, by WAIT on the
// same connection in the same round trip. If fewer replicas acknowledged
// (or WAIT failed), the error wraps ErrNotReplicated and reply is still
// the script's.
func (e *Engine) evalAck(ctx context.Context, s *redis.Script, kind, name string, keysAndArgs ...any) (reply any, sent bool, err error) {
	return e.call(ctx, s, kind, name, e.replicas > 0, keysAndArgs)
}

// evalAckReply is evalAck for calls that have nothing to undo.
func (e *Engine) evalAckReply(ctx context.Context, s *redis.Script, kind, name string, keysAndArgs ...any) (any, error) {
	reply, _, err := e.evalAck(ctx, s, kind, name, keysAndArgs...)
	return reply, err
}

// call runs s on a connection bound to its first key. A MOVED reply (the
// slot moved, or a replica was promoted) means the script did not run: the
// call follows it on a fresh connection, which binds by the cluster's
// updated map, up to maxRedirects times. ASK (the slot is mid-migration)
// is not followed: a bound connection cannot send ASKING, so the error is
// returned, and it is transient: a wait retries it until the slot settles.
func (e *Engine) call(ctx context.Context, s *redis.Script, kind, name string, ack bool, keysAndArgs []any) (reply any, sent bool, err error) {
	key := routeKey(keysAndArgs)
	for redirects := 0; ; redirects++ {
		// redigo sends a command even on a done context, so check first.
		if err := ctxErr(ctx); err != nil {
			return nil, sent, fmt.Errorf("atomicredis: %s %q: %w", kind, name, err)
		}
		c, err := e.conn(ctx, key)
		if err != nil {
			return nil, sent, fmt.Errorf("atomicredis: %s %q: %w", kind, name, err)
		}
		sent = true
		var acks int64
		var ackErr error
		if ack {
			reply, acks, ackErr, err = e.evalWait(c, s, keysAndArgs)
		} else {
			reply, err = s.Do(c, keysAndArgs...)
		}
		c.Close()
		if redirects < maxRedirects && c.(ctxConn).bound && replyIs(err, "MOVED") {
			continue
		}
		if err != nil {
			if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
				// redigo reports a deadline hit mid-command as an i/o timeout.
				return nil, true, fmt.Errorf("atomicredis: %s %q: %w (%w)", kind, name, cerr, err)
			}
			return nil, true, fmt.Errorf("atomicredis: %s %q: %w", kind, name, err)
		}
		switch {
		case !ack:
		case ackErr != nil:
			return reply, true, fmt.Errorf("atomicredis: %s %q: WAIT %d %v: %w (%w)", kind, name, e.replicas, e.ackTimeout, ErrNotReplicated, ackErr)
		case acks < int64(e.replicas):
			return reply, true, fmt.Errorf("atomicredis: %s %q: %d of %d replicas acknowledged within %v: %w", kind, name, acks, e.replicas, e.ackTimeout, ErrNotReplicated)
		}
		return reply, true, nil
	}
}

// evalWait sends EVALSHA and WAIT together and reads both replies; on
// NOSCRIPT it sends EVAL and WAIT again. err is the script's failure,
// ackErr WAIT's.
func (e *Engine) evalWait(c redis.Conn, s *redis.Script, keysAndArgs []any) (reply any, acks int64, ackErr, err error) {
	send := s.SendHash
	for first := true; ; first = false {
		if err := send(c, keysAndArgs...); err != nil {
			return nil, 0, nil, err
		}
		if err := c.Send("WAIT", e.replicas, e.ackTimeout.Milliseconds()); err != nil {
			return nil, 0, nil, err
		}
		if err := c.Flush(); err != nil {
			return nil, 0, nil, err
		}
		reply, err = c.Receive()
		acks, ackErr = redis.Int64(c.Receive())
		if first && replyIs(err, "NOSCRIPT") {
			send = s.Send
			continue
		}
		return reply, acks, ackErr, err
	}
}

// replyIs reports whether err is a Redis error reply whose first word is
// word.
func replyIs(err error, word string) bool {
	var reply redis.Error
	return errors.As(err, &reply) && strings.HasPrefix(string(reply), word+" ")
}

// transient reports whether err is one a server or cluster gives while it
// heals, so that a wait may try again: the node is down or restarting
// (connection refused, reset or closed; LOADING), the cluster has no
// primary for a slot (CLUSTERDOWN), or the slot is moving (TRYAGAIN, ASK,
// a MOVED that call stopped following). After a reset or closed
// connection the outcome of the call is unknown: the caller must undo it
// before trying again.
func transient(err error) bool {
	var reply redis.Error
	if errors.As(err, &reply) {
		word, _, _ := strings.Cut(string(reply), " ")
		switch word {
		case "CLUSTERDOWN", "TRYAGAIN", "LOADING", "ASK", "MOVED":
			return true
		}
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
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
// Waiting: a queue on the server, handed over inside the release script

// defaultQueueTTL is how long a waiter's queue entry lives unless renewed;
// a waiter renews it three times as often. A waiter that died costs the
// others at most this long.
const defaultQueueTTL = time.Second

// acquisition is one attempt to take an object: the acquire script and its
// abandon script, their keys (the inbox, where this engine is woken for
// this object, among them), and the arguments between token and mode.
//
// Acquire scripts share one shape: ARGV token, extra..., mode (0 one try,
// 1 wait), queue entry lifetime in ms, ttl in ms; reply {1, fence} (held,
// for the full ttl: also the pickup of a handoff), {0, hint ms, rank,
// arrival} (not held: hint is how long the holder has left, -1 if none;
// rank is the caller's place in the queue, -1 if not queued), {0, -2} (the
// token was abandoned), or {-1, n} (refused as invalid: the object's
// holders share limit n). Abandon scripts take the same keys and ARGV
// token, ms a late call of the token's could still act for; they leave the
// queue, pass on or give back what was handed over, and void the token.
type acquisition struct {
	kind, name      string
	token           string
	ttl             time.Duration
	script, abandon *redis.Script
	keys            []string
	inbox           string
	extra           []any
}

// acquire takes the object, in one attempt or, with wait > 0, queueing on
// the server until the object is handed over, wait runs out (an error
// wrapping ErrNotAcquired) or ctx ends (one wrapping ErrNotAcquired and
// ctx.Err()). It returns the fence and when the granting call was sent.
//
// A waiter blocks on nothing of its own: its engine's listener for the
// object blocks on the inbox and wakes it, and it renews its queue entry
// every third of the entry's lifetime (the same script: it also takes the
// object if it is at the head and the holder is gone). Whatever the wait's
// end, an attempt that may have reached the server is undone in the
// background unless it granted (abandon).
func (e *Engine) acquire(ctx context.Context, a acquisition, wait time.Duration) (g grant, err error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return g, fmt.Errorf("atomicredis: %s %q: %w", a.kind, a.name, ErrClosed)
	}
	mode := 0
	var r *room
	var woken <-chan struct{}
	if wait > 0 {
		mode = 1
		r, woken = e.join(a.inbox, a.token)
		defer r.leave(a.token)
	}
	args := make([]any, 0, len(a.keys)+len(a.extra)+4)
	for _, k := range a.keys {
		args = append(args, k)
	}
	args = append(append(append(args, a.token), a.extra...), mode, e.queueTTL.Milliseconds(), a.ttl.Milliseconds())
	undo := false // whether the server may hold something of the token's
	giveUp := func(err error) (grant, error) {
		if undo {
			undoArgs := make([]any, 0, len(a.keys)+2)
			for _, k := range a.keys {
				undoArgs = append(undoArgs, k)
			}
			e.undo(a.abandon, a.kind, a.name, append(undoArgs, a.token, max(a.ttl, e.queueTTL).Milliseconds())...)
		}
		return g, err
	}
	deadline := time.Now().Add(wait)
	var backoff time.Duration
	for {
		g.sent = time.Now()
		reply, reached, err := e.evalAck(ctx, a.script, a.kind, a.name, args...)
		v, verr := redis.Int64s(reply, nil)
		if errors.Is(err, ErrNotReplicated) {
			if verr == nil && len(v) == 2 && v[0] == 1 { // granted, but a failover could grant it again
				undo = true
				return giveUp(err)
			}
			err = nil // a queue entry's renewal: nothing to guard
		}
		queued := mode == 1 && err == nil && verr == nil && len(v) == 4 && v[0] == 0
		undo = undo || reached && unknownOutcome(err) || queued
		switch {
		case err != nil:
			if cerr := ctxErr(ctx); cerr != nil {
				return giveUp(fmt.Errorf("atomicredis: %s %q: %w: %w", a.kind, a.name, ErrNotAcquired, cerr))
			}
			if mode == 0 || !transient(err) || !time.Now().Before(deadline) {
				if mode == 1 && transient(err) {
					err = fmt.Errorf("atomicredis: %s %q: waited %v: %w; last error: %w", a.kind, a.name, wait, ErrNotAcquired, err)
				}
				return giveUp(err)
			}
			backoff = min(max(2*backoff, 10*time.Millisecond), 500*time.Millisecond)
			if err := sleep(ctx, min(backoff, time.Until(deadline))); err != nil {
				return giveUp(fmt.Errorf("atomicredis: %s %q: %w: %w", a.kind, a.name, ErrNotAcquired, err))
			}
			continue
		case verr != nil || len(v) < 2:
			return giveUp(fmt.Errorf("atomicredis: %s %q: unexpected reply %v", a.kind, a.name, reply))
		case v[0] == 1:
			g.fence = v[1]
			return g, nil
		case v[0] < 0:
			return giveUp(fmt.Errorf("atomicredis: %s %q: in use with limit %d: %w", a.kind, a.name, v[1], ErrInvalid))
		case v[1] == -2:
			return giveUp(fmt.Errorf("atomicredis: %s %q: attempt abandoned: %w", a.kind, a.name, ErrNotAcquired))
		case mode == 0:
			return giveUp(fmt.Errorf("atomicredis: %s %q: %s: %w", a.kind, a.name, taken(v[1]), ErrNotAcquired))
		}
		backoff = 0
		g.arrival = v[3]
		left := time.Until(deadline)
		if left <= 0 {
			return giveUp(fmt.Errorf("atomicredis: %s %q: waited %v, %d ahead in the queue: %w", a.kind, a.name, wait, v[2], ErrNotAcquired))
		}
		next := e.queueTTL / 3 // renew the entry
		if hint := time.Duration(v[1]) * time.Millisecond; v[2] == 0 && hint > 0 && hint < next {
			next = hint // the head takes over when the holder's time is up
		}
		r.listen()
		t := time.NewTimer(min(next, left))
		select {
		case <-woken: // handed over: the next call picks it up
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return giveUp(fmt.Errorf("atomicredis: %s %q: while waiting: %w: %w", a.kind, a.name, ErrNotAcquired, ctx.Err()))
		}
		t.Stop()
	}
}

// grant is what an acquisition got: the fence, when the granting call was
// sent (the watchdog's first base), and the arrival number the queue gave
// the caller (0 if it never queued; tests check the order by it).
type grant struct {
	fence, arrival int64
	sent           time.Time
}

// taken says why a one-try acquisition was refused.
func taken(hint int64) string {
	if hint == -1 {
		return "free, but waiters are queued ahead"
	}
	return fmt.Sprintf("taken (the holder has %v left)", time.Duration(hint)*time.Millisecond)
}

// sleep pauses for d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// room is one engine's waiters on one object, woken through one inbox: a
// list the release scripts push "token fence" to. One listener goroutine
// blocks on it (BLPOP, holding one pooled connection) while the room has
// waiters, so an engine holds at most one connection per object however
// many of its goroutines wait, and no more than its blocking budget in
// all (half a *redis.Pool's MaxActive): waiters beyond it are woken by
// their renewals instead, at most a third of the queue TTL late.
type room struct {
	e     *Engine
	inbox string

	mu        sync.Mutex
	waiters   map[string]chan struct{}
	listening bool
}

// join enters a waiter in the engine's room for an inbox, making the room
// if need be, and returns the channel its wake-ups come on.
func (e *Engine) join(inbox, token string) (*room, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.rooms[inbox]
	if r == nil {
		if e.rooms == nil {
			e.rooms = map[string]*room{}
		}
		r = &room{e: e, inbox: inbox, waiters: map[string]chan struct{}{}}
		e.rooms[inbox] = r
	}
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.waiters[token] = ch
	r.mu.Unlock()
	return r, ch
}

// leave removes a waiter; the last one out forgets the room (its listener,
// if any, ends after its current pop).
func (r *room) leave(token string) {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiters, token)
	if len(r.waiters) == 0 && !r.listening && r.e.rooms[r.inbox] == r {
		delete(r.e.rooms, r.inbox)
	}
}

// listen starts the room's listener unless it runs, the engine is closed,
// or the engine's blocking budget is spent.
func (r *room) listen() {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listening || e.closed || len(r.waiters) == 0 || e.blocking >= e.maxBlocking {
		return
	}
	r.listening = true
	e.blocking++
	e.listeners.Add(1)
	go r.run()
}

// run pops the inbox and wakes the waiter each message names, until the
// room is empty or the engine closes. A message for a waiter that has left
// is dropped: its abandon script passes on whatever it was handed.
func (r *room) run() {
	e := r.e
	defer e.listeners.Done()
	var backoff time.Duration
	for {
		e.mu.Lock()
		r.mu.Lock()
		if len(r.waiters) == 0 || e.closed {
			r.listening = false
			e.blocking--
			if len(r.waiters) == 0 && e.rooms[r.inbox] == r {
				delete(e.rooms, r.inbox)
			}
			r.mu.Unlock()
			e.mu.Unlock()
			return
		}
		r.mu.Unlock()
		e.mu.Unlock()

		msg, err := e.pop(r.inbox)
		if err != nil {
			backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
			sleep(e.stop, backoff)
			continue
		}
		backoff = 0
		token, _, _ := strings.Cut(msg, " ")
		r.mu.Lock()
		ch := r.waiters[token]
		r.mu.Unlock()
		if ch != nil {
			select {
			case ch <- struct{}{}:
			default: // already woken
			}
		}
	}
}

// pop waits up to a second (BLPOP's whole-second timeout works on every
// Redis since 2.0) for a message in inbox; "" if none came. Engine.Close
// cuts it short.
func (e *Engine) pop(inbox string) (string, error) {
	c, err := e.conn(e.stop, inbox)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var v []string
	if cc, ok := c.(redis.ConnWithContext); ok {
		v, err = redis.Strings(cc.DoContext(e.stop, "BLPOP", inbox, 1))
	} else {
		v, err = redis.Strings(c.Do("BLPOP", inbox, 1))
	}
	switch {
	case errors.Is(err, redis.ErrNil):
		return "", nil
	case err != nil:
		return "", err
	case len(v) != 2:
		return "", fmt.Errorf("atomicredis: BLPOP %s: unexpected reply %q", inbox, v)
	}
	return v[1], nil
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

// Lock is one holding of a named lock, or one hold (a reader's or the
// writer's) of a read-write lock. Its methods are safe for concurrent use,
// and on a nil *Lock (as a failed TryLock returns) none panics: they
// report ErrNotHeld.
type Lock struct {
	e       *Engine
	kind    *lockKind
	name    string
	keys    []any // kind.keys(name)
	token   string
	fence   int64
	arrival int64 // the number the queue gave it, 0 if it never queued
	lost    chan struct{}
	once    sync.Once
	stopWD  context.CancelFunc // nil without a watchdog
	wdDone  chan struct{}      // closed when the watchdog goroutine ends
	reset   chan struct{}      // tells the watchdog the lease changed

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
	return e.lock(ctx, plainLock, "", name, o, true)
}

// TryLock makes one attempt at the named lock and returns an error wrapping
// ErrNotAcquired if another holds it. o.Wait is ignored.
func (e *Engine) TryLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, plainLock, "", name, o, false)
}

// lockKind is what tells a plain lock from a read-write lock, so that
// taking a holding, Unlock, Extend, TTL and the watchdog are written once
// for both.
type lockKind struct {
	word     string   // names the object in errors
	typ      string   // <ns><typ>:{name}...
	suffixes []string // the keys of release, in order; acquire and abandon add the inbox and void mark

	extendKeys, pttlKeys                    int // how many of those keys extend and pttl take
	acquire, abandon, release, extend, pttl *redis.Script
}

// plainLock: the lock (hash: token, seq, fence), its fence counter, its
// queue and its waiters.
var plainLock = &lockKind{word: "lock", typ: "lock", suffixes: []string{"", ":fence", ":queue", ":waiters"},
	extendKeys: 1, pttlKeys: 1, acquire: scriptLockAcquire, abandon: scriptLockAbandon,
	release: scriptLockRelease, extend: scriptLockExtend, pttl: scriptLockPTTL}

// keys are the keys every script of the kind starts with, for one name.
func (k *lockKind) keys(e *Engine, name string) []string {
	keys := make([]string, len(k.suffixes))
	for i, s := range k.suffixes {
		keys[i] = e.key(k.typ, name, s)
	}
	return keys
}

// lock takes a holding of kind k: mode ("", or "r-"/"w-" for a read-write
// lock) starts its token, so the queue knows what each waiter wants.
func (e *Engine) lock(ctx context.Context, k *lockKind, mode, name string, o LockOptions, wait bool) (*Lock, error) {
	if err := e.check(k.word, name); err != nil {
		return nil, err
	}
	ttl, err := duration(k.word, name, "TTL", o.TTL, DefaultTTL)
	if err != nil {
		return nil, err
	}
	maxWait, err := duration(k.word, name, "Wait", o.Wait, DefaultWait)
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
	token = mode + token
	keys := k.keys(e, name)
	n := len(keys)
	inbox := e.key(k.typ, name, ":inbox:"+e.id)
	g, err := e.acquire(ctx, acquisition{kind: k.word, name: name, token: token, ttl: ttl,
		script: k.acquire, abandon: k.abandon, inbox: inbox,
		keys: append(keys[:n:n], inbox, e.key(k.typ, name, ":void:"+token))}, maxWait)
	if err != nil {
		return nil, err
	}
	args := make([]any, n)
	for i, key := range keys {
		args[i] = key
	}
	l := &Lock{e: e, kind: k, name: name, keys: args, token: token, fence: g.fence, arrival: g.arrival,
		lost: make(chan struct{}), lease: ttl, renewed: g.sent}
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

// Token returns the random identifier (a UUID v4; for a read-write lock's
// hold prefixed "r-" for a reader, "w-" for the writer) that marks this
// holding, or "" for a nil lock.
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
// (<ns>lock:{name}:fence) never expires: one small key per lock name. A
// read-write lock's holds share one counter (<ns>rw:{name}:fence) across
// readers and writers; several readers' fences are valid at once (see
// RLock).
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
	n, err := l.e.evalInt64(ctx, l.kind.release, l.kind.word, l.name, l.args(len(l.keys), l.token)...)
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
	ttl, err := duration(l.kind.word, l.name, "TTL", ttl, l.currentLease())
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
	if err != nil && !(ok && errors.Is(err, ErrNotReplicated)) {
		return err
	}
	if !ok {
		l.markLost()
		return l.notHeld()
	}
	// Extended (even if too few replicas acknowledged it: the server keeps
	// it, and err says so): the watchdog renews on the new rhythm.
	l.mu.Lock()
	if l.renewed.Before(sent) {
		l.renewed = sent
	}
	l.mu.Unlock()
	select {
	case l.reset <- struct{}{}:
	default: // nil channel (no watchdog) or a reset already pending
	}
	return err
}

// TTL returns the lock's remaining lease, as the server counts it, or an
// error wrapping ErrNotHeld if the lock is no longer this holder's.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, errNilLock
	}
	ms, err := l.e.evalInt64(ctx, l.kind.pttl, l.kind.word, l.name, l.args(l.kind.pttlKeys, l.token)...)
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
	return fmt.Errorf("atomicredis: %s %q: fence %d: %w", l.kind.word, l.name, l.fence, ErrNotHeld)
}

// args are a script's first n keys of the lock's, then extra.
func (l *Lock) args(n int, extra ...any) []any {
	return append(l.keys[:n:n], extra...)
}

// extend sends renewal number seq; a stale one (lock_extend's and
// rw_extend's 2) counts as held: a newer renewal of this holder's already
// stands.
func (l *Lock) extend(ctx context.Context, ttl time.Duration, seq int64) (bool, error) {
	args := l.args(l.kind.extendKeys, l.token, ttl.Milliseconds(), seq)
	reply, err := l.e.evalAckReply(ctx, l.kind.extend, l.kind.word, l.name, args...)
	n, _ := redis.Int64(reply, nil) // the script's answer, with ErrNotReplicated too
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
// Read-write locks: many readers or one writer, in arrival order, on the
// same queue as locks; every hold is a *Lock with a lease of its own

// rwLock: the holds' lease deadlines (zset token -> server ms), their
// fences and renewal numbers (hash token -> "fence seq"), the fence
// counter, the queue and its waiters.
var rwLock = &lockKind{word: "read-write lock", typ: "rw", suffixes: []string{"", ":holds", ":fence", ":queue", ":waiters"},
	extendKeys: 2, pttlKeys: 1, acquire: scriptRWAcquire, abandon: scriptRWAbandon,
	release: scriptRWRelease, extend: scriptRWExtend, pttl: scriptRWPTTL}

// RLock takes a shared (read) hold of the named read-write lock, waiting up
// to o.Wait (default 10s) while a writer holds it or is queued ahead of
// the caller: a reader that arrives while a writer waits queues behind it,
// so writers never starve. The hold is a *Lock with its own lease (o.TTL),
// watchdog, Extend, TTL and Unlock; other readers' holds are untouched by
// them. Errors are as Lock's.
//
// Readers share: several readers' fences are valid at once. A resource
// guarded by the lock admits a reader whose fence is above the last
// writer's it has seen, and a writer by the (fence, token) rule.
//
// A read-write lock "x" and a plain lock "x" are different objects.
func (e *Engine) RLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwLock, "r-", name, o, true)
}

// TryRLock makes one attempt at a read hold of the named read-write lock:
// it returns an error wrapping ErrNotAcquired if a writer holds it or any
// live waiter is queued. o.Wait is ignored.
func (e *Engine) TryRLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwLock, "r-", name, o, false)
}

// WLock takes the exclusive (write) hold of the named read-write lock,
// waiting up to o.Wait (default 10s) while anyone holds it or is queued
// ahead. When it is released, the whole run of readers at the head of the
// queue is let in at once. Otherwise as RLock.
func (e *Engine) WLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwLock, "w-", name, o, true)
}

// TryWLock makes one attempt at the write hold of the named read-write
// lock: it returns an error wrapping ErrNotAcquired if anyone holds it or
// any live waiter is queued. o.Wait is ignored.
func (e *Engine) TryWLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwLock, "w-", name, o, false)
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
	e       *Engine
	name    string
	keys    []any // semKeys
	token   string
	fence   int64
	arrival int64 // the number the queue gave it, 0 if it never queued
	ttl     time.Duration
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
	keys := e.semKeys(name)
	inbox := e.key("sem", name, ":inbox:"+e.id)
	g, err := e.acquire(ctx, acquisition{kind: "semaphore", name: name, token: token, ttl: ttl,
		script: scriptSemAcquire, abandon: scriptSemAbandon, inbox: inbox, extra: []any{o.Limit},
		keys: append(keys[:6:6], inbox, e.key("sem", name, ":void:"+token))}, wait)
	if err != nil {
		return nil, err
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	return &Permit{e: e, name: name, keys: args, token: token, fence: g.fence, arrival: g.arrival, ttl: ttl}, nil
}

// semKeys are the keys every semaphore script starts with: the permits'
// deadlines (timeouts), their counters (owner), the counter, the stored
// limit, the queue and its waiters.
func (e *Engine) semKeys(name string) []string {
	return []string{e.key("sem", name, ""), e.key("sem", name, ":owner"), e.key("sem", name, ":counter"),
		e.key("sem", name, ":limit"), e.key("sem", name, ":queue"), e.key("sem", name, ":waiters")}
}

// SemaphoreHolders returns how many permits of the named semaphore are
// live now, after dropping those past their deadline.
func (e *Engine) SemaphoreHolders(ctx context.Context, name string) (int, error) {
	if err := e.check("semaphore", name); err != nil {
		return 0, err
	}
	keys := e.semKeys(name)
	n, err := e.evalInt64(ctx, scriptSemHolders, "semaphore", name, keys[0], keys[1], keys[2], keys[3], keys[4], keys[5])
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
	return p.run(ctx, scriptSemRelease, false, p.token)
}

// Refresh restarts the permit's timeout (its TTL from now). It returns an
// error wrapping ErrNotHeld if the permit had already been released or
// timed out; it never brings such a permit back.
func (p *Permit) Refresh(ctx context.Context) error {
	if p == nil {
		return errNilPermit
	}
	return p.run(ctx, scriptSemRefresh, true, p.token, p.ttl.Milliseconds())
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
// With ack (Refresh) it waits for replicas as WithReplicaAck asks; too few
// acknowledgements leave the refresh in place and return ErrNotReplicated.
func (p *Permit) run(ctx context.Context, s *redis.Script, ack bool, args ...any) error {
	args = append(p.keys[:6:6], args...)
	eval := p.e.eval
	if ack {
		eval = p.e.evalAckReply
	}
	reply, err := eval(ctx, s, "semaphore", p.name, args...)
	n, _ := redis.Int64(reply, nil) // the script's answer, with ErrNotReplicated too
	switch {
	case n != 1 && (err == nil || errors.Is(err, ErrNotReplicated)):
		return p.notHeld()
	case err != nil:
		return err
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
