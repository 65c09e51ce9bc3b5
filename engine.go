// Package atomicredis gives Go services the application components of
// Redis in Action chapter 6 — distributed locks, fair counting semaphores,
// autocomplete — plus a Redisson-style lock (lease, watchdog, held-by-me),
// leader elections (Engine.Election), locks over many names at once
// (Engine.LockAll), writes guarded by a lock (Lock.Eval) and activity
// bitmaps. Every operation is one atomic Lua script, run with EVALSHA in
// one round trip: no WATCH retries, no race windows, and no client clock
// deciding who holds what.
//
// Every key of one object shares a cluster hash tag, <ns><kind>:{<name>},
// so each script touches a single slot (activity bitmaps excepted: each
// shard of a group has a tag of its own, to spread over a cluster).
package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
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

// Subscriber is a Pool that subscribes to a channel itself. An engine wakes
// its waiters through one subscription to its own wake channel (see
// Engine.Lock). With a Pool that is not a Subscriber it takes one of the
// pool's connections and puts it in subscribe mode, as redigo's and
// redisc's connections allow; the goredis module's Pool is a Subscriber,
// since a go-redis connection cannot be.
type Subscriber interface {
	Subscribe(ctx context.Context, channel string) (Subscription, error)
}

// Subscription is one channel subscription made by a Subscriber.
type Subscription interface {
	// Receive waits up to timeout for the next event and returns a
	// message's payload, or subscribed true each time the subscription is
	// established or re-established (messages published while it was down
	// are lost: the engine then has every waiter look for itself). An event
	// with neither (a PING's reply) is ignored. An error ends the
	// subscription: the engine closes it and subscribes again.
	Receive(timeout time.Duration) (payload string, subscribed bool, err error)
	// Ping sends a PING on the subscription while another goroutine waits
	// in Receive, so that a quiet subscription is not taken for a dead one.
	Ping() error
	// Close ends the subscription, from any goroutine and any number of
	// times; a Receive waiting on another goroutine returns.
	Close() error
}

// The errors callers test for with errors.Is. Every call's error is an
// *Error that names the object and what happened, wrapping one of these
// or the failure that caused it.
var (
	// ErrNotAcquired: the server answered, and the lock or permit was not
	// the caller's: another held it, or the caller was still queued when
	// its wait or ctx ended (a ctx end wraps ctx.Err() as well). When
	// Redis could not be reached, the error wraps that failure instead.
	ErrNotAcquired = errors.New("not acquired")
	// ErrNotHeld: the caller's lock or permit has expired or passed to
	// another holder, or the holding is nil.
	ErrNotHeld = errors.New("not held")
	// ErrInvalid: an argument, an option or the engine itself (nil or
	// zero) was rejected; nothing was written.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the engine was closed and takes no new locks or permits.
	ErrClosed = errors.New("engine closed")
	// ErrNotReplicated: fewer replicas than WithReplicaAck asks for
	// acknowledged a write in time. An acquisition was abandoned; a
	// Lock.Extend or Permit.Extend kept what it set.
	ErrNotReplicated = errors.New("not replicated")
)

// Error is what the engine's calls return: the object (its kind and
// name) and what happened to it, which wraps the sentinel errors or the
// Redis or network failure behind it. Object is "" for errors about the
// engine itself.
type Error struct {
	Object string // one of the Object constants
	Name   string
	Err    error
}

// The objects an Error or an Event names in its Object field.
const (
	ObjectLock          = "lock"
	ObjectReadWriteLock = "read-write lock"
	ObjectSemaphore     = "semaphore"
	ObjectRecentList    = "recent list"
	ObjectMemberSet     = "member set"
	ObjectActivityGroup = "activity group"
	ObjectElection      = "election"
)

func (e *Error) Error() string {
	if e.Object == "" {
		return "atomicredis: " + e.Err.Error()
	}
	return "atomicredis: " + e.Object + " " + strconv.Quote(e.Name) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Defaults applied when an option or duration is zero, and the engine's own
// time bounds.
const (
	DefaultTTL            = 10 * time.Second
	DefaultWait           = 10 * time.Second
	DefaultRecentCapacity = 100
	DefaultCallTimeout    = 5 * time.Second
	DefaultFenceRetention = 24 * time.Hour

	// ReleaseTimeout bounds Unlock and Release when the caller's context
	// is done or ends sooner: they always make their attempt.
	ReleaseTimeout = time.Second
	// AbandonTimeout bounds the background abandon of an acquisition whose
	// outcome is unknown (its caller gave up mid-call).
	AbandonTimeout = time.Second
)

// Engine runs the scripts against a pool. It is safe for concurrent use.
// Make one with New; a nil or zero Engine returns ErrInvalid from every
// call.
type Engine struct {
	pool      Pool
	ns        string
	recentCap int
	err       error // a rejected option or nil pool, returned by every call

	replicas    int           // WithReplicaAck: replicas to wait for; 0 = off
	ackTimeout  time.Duration // WithReplicaAck: how long WAIT waits for them
	callTimeout time.Duration // WithCallTimeout
	retention   time.Duration // WithFenceRetention
	observer    func(Event)   // WithObserver
	logger      *slog.Logger  // WithLogger

	id           string        // names this engine's wake channel
	idArg        any           // id, as the scripts take it
	wakeArg      any           // <ns>wake:, the channels' prefix, as the scripts take it
	retentionArg any           // the fence retention in ms, as the scripts take it
	clustered    atomic.Bool   // a script over several slots was refused (CROSSSLOT): LockAll goes one name at a time
	queueTTL     time.Duration // a queue entry's lifetime unless extended
	subIdle      time.Duration // how long the wake subscription outlives the last waiter
	wake         waker

	mu         sync.Mutex
	closed     bool
	stop       context.Context // ends with Close
	cancelStop context.CancelFunc
	held       map[*holding]struct{} // every holding not yet released or lost, for Close (adopt, prune)
	pruneAt    int                   // the registry's size at which adopt next prunes it
	background sync.WaitGroup        // abandons, the wake subscription and the renewer; Add only under mu, before closed
	renew      renewer               // extends the watchdog holdings (renew.go)

	// plainSuggest is set once the server refused the allow-oom shebang
	// (Redis < 7, miniredis): from then on Suggest runs the plain script.
	plainSuggest atomic.Bool

	activityTTL time.Duration         // WithActivityTTL: a period's lifetime from its first mark; 0 = forever
	indexedMu   sync.Mutex            // guards indexed
	indexed     map[shardRef]struct{} // shards this engine put in their period's index (activeIndexMemory at most)

	limitsMu sync.Mutex               // guards limits
	limits   map[storedLimit]struct{} // stored semaphore limits reported as differing (limitsRemembered at most)
}

// New returns an Engine that takes connections from pool. New never fails:
// a nil pool or a rejected option makes every call return an error
// wrapping ErrInvalid, before any I/O.
func New(pool Pool, opts ...Option) *Engine {
	e := &Engine{pool: pool, recentCap: DefaultRecentCapacity, callTimeout: DefaultCallTimeout,
		retention: DefaultFenceRetention, id: uuid.NewString()[:13], queueTTL: defaultQueueTTL, subIdle: subscriptionIdle}
	e.stop, e.cancelStop = context.WithCancel(context.Background())
	e.renew.init()
	if p, ok := pool.(*redis.Pool); pool == nil || ok && p == nil {
		e.reject(fmt.Errorf("nil pool: %w", ErrInvalid))
	}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	if e.replicas > 0 && e.ackTimeout >= e.callTimeout {
		e.reject(fmt.Errorf("replica ack timeout %v: must be shorter than the call timeout %v: %w", e.ackTimeout, e.callTimeout, ErrInvalid))
	}
	e.wake = waker{e: e, channel: e.ns + "wake:" + e.id, budget: subscriptionBudget(pool)}
	e.wakeArg, e.retentionArg, e.idArg = e.ns+"wake:", e.retention.Milliseconds(), e.id
	return e
}

func (e *Engine) reject(err error) {
	if e.err == nil {
		e.err = &Error{Err: err}
	}
}

var (
	errNilEngine  = &Error{Err: fmt.Errorf("nil engine: %w", ErrInvalid)}
	errZeroEngine = &Error{Err: fmt.Errorf("engine not made by New: %w", ErrInvalid)}
	errNilContext = fmt.Errorf("nil context: %w", ErrInvalid)
)

// usable reports why the engine cannot run calls: nil, zero, or given a
// rejected option.
func (e *Engine) usable() error {
	switch {
	case e == nil:
		return errNilEngine
	case e.stop == nil:
		return errZeroEngine
	}
	return e.err
}

// Close ends the engine's work. Waits under way end at once with an error
// wrapping ErrClosed (a grant that reaches one later is passed on). Every
// lock and permit the engine still holds is released, its watchdog
// stopped first: its Lost closes, its contexts end with a cause wrapping
// ErrClosed, the observer gets EventReleased; an Unlock or Release then
// returns nil, its other calls ErrClosed. The releases are bounded by
// ctx's deadline, or ReleaseTimeout if it has none; Close then waits,
// until ctx ends, for the wake subscription and the background abandons.
// An error names what did not finish. It is safe to call more than once.
func (e *Engine) Close(ctx context.Context) error {
	if e == nil || e.stop == nil {
		return e.usable()
	}
	if ctx == nil {
		return &Error{Err: errNilContext}
	}
	e.mu.Lock()
	e.closed = true
	held := make([]*holding, 0, len(e.held))
	for h := range e.held {
		held = append(held, h)
	}
	e.mu.Unlock()
	e.cancelStop()
	for _, h := range held {
		h.stopWatchdog()
	}
	deadline := time.Now().Add(ReleaseTimeout)
	if dl, ok := ctx.Deadline(); ok {
		deadline = dl
	}
	var errs []error
	for _, h := range held {
		if err := h.closeRelease(ctx, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	e.wake.end()
	done := make(chan struct{})
	go func() { e.background.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, &Error{Err: fmt.Errorf("close: waiting for abandons and the wake subscription: %w", ctx.Err())})
	}
	return errors.Join(errs...)
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// goTracked starts f on a goroutine Close waits for and returns true,
// unless the engine is closed: then it returns false and f does not run.
// One check under e.mu, so Close cannot slip in between a check and the
// start.
func (e *Engine) goTracked(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		f()
	}()
	return true
}

// kind is a type of object the engine keeps: the noun its errors and
// events name it by, and the word its keys start with (none for an
// activity group, whose keys are its shards' and indexes', built by
// shardKey and indexKey).
type kind struct {
	noun, word string
}

var (
	kindLock     = &kind{ObjectLock, "lock"}
	kindRW       = &kind{ObjectReadWriteLock, "rw"}
	kindSem      = &kind{ObjectSemaphore, "sem"}
	kindRecent   = &kind{ObjectRecentList, "recent"}
	kindMembers  = &kind{ObjectMemberSet, "members"}
	kindActivity = &kind{ObjectActivityGroup, ""}
	kindElection = &kind{ObjectElection, "election"}
)

// object is one named object of an engine: it builds its keys and its
// errors.
type object struct {
	kind *kind
	name string
	ns   string
}

// object checks the engine and a name (non-empty, no braces: the engine
// adds the hash tag itself) and returns the object.
func (e *Engine) object(k *kind, name string) (object, error) {
	if err := e.usable(); err != nil {
		return object{}, err
	}
	o := object{kind: k, name: name, ns: e.ns}
	if name == "" || strings.ContainsAny(name, "{}") {
		return o, o.errorf("name must be non-empty and contain no braces: %w", ErrInvalid)
	}
	return o, nil
}

// key builds <ns><word>:{<name>}<suffix>, suffix being "" or ":..."; the
// braces make every key of one object hash to the same cluster slot.
func (o object) key(suffix string) string {
	return o.ns + o.kind.word + ":{" + o.name + "}" + suffix
}

func (o object) err(err error) error {
	return &Error{Object: o.kind.noun, Name: o.name, Err: err}
}

func (o object) errorf(format string, args ...any) error {
	return o.err(fmt.Errorf(format, args...))
}

// duration resolves an optional duration: 0 is def, anything else must be
// at least 1 ms (Redis counts in milliseconds).
func (o object) duration(field string, d, def time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < time.Millisecond:
		return 0, o.errorf("%s %v: must be 0 (default) or at least 1ms: %w", field, d, ErrInvalid)
	}
	return d, nil
}

// ---------------------------------------------------------------------------
// The call path: one script, one pooled connection, one round trip

// maxRedirects bounds how often one call follows MOVED to another node.
const maxRedirects = 3

// binder is a connection that can be pinned to the node serving some keys
// before its first command, as a redisc cluster connection can. Such a
// connection would route EVALSHA by its first argument, the SHA, not by a
// key.
type binder interface {
	Bind(keys ...string) error
}

// conn is a pooled connection for one call. Its Do and Receive end when ctx
// does (through DoContext, where the connection offers it and ctx can be
// cancelled) or after timeout (a read timeout; redisc connections offer
// only that, so there a ctx that is only cancelled does not interrupt a
// command in flight).
type conn struct {
	redis.Conn
	ctx     context.Context
	timeout time.Duration
	bound   bool // bound to a cluster node by key
}

func (c *conn) Do(cmd string, args ...any) (any, error) {
	if c.ctx.Done() != nil {
		if cc, ok := c.Conn.(redis.ConnWithContext); ok {
			return cc.DoContext(c.ctx, cmd, args...)
		}
	}
	if cc, ok := c.Conn.(redis.ConnWithTimeout); ok {
		return cc.DoWithTimeout(c.timeout, cmd, args...)
	}
	return c.Conn.Do(cmd, args...)
}

func (c *conn) Receive() (any, error) {
	if c.ctx.Done() != nil {
		if cc, ok := c.Conn.(redis.ConnWithContext); ok {
			return cc.ReceiveContext(c.ctx)
		}
	}
	if cc, ok := c.Conn.(redis.ConnWithTimeout); ok {
		return cc.ReceiveWithTimeout(c.timeout)
	}
	return c.Conn.Receive()
}

// conns keeps conn wrappers for reuse: a call needs one for a round trip.
var conns = sync.Pool{New: func() any { return new(conn) }}

// close gives the connection back to its pool, and the wrapper to conns.
func (c *conn) close() {
	c.Conn.Close()
	*c = conn{}
	conns.Put(c)
}

// conn takes a connection from the pool for a call on key, bound to the
// node serving key when the connection can bind (a cluster connection; on
// any other it is a no-op). Its round trips, and the wait for it, end when
// ctx does or after timeout. The caller closes it (close), then calls done.
func (e *Engine) conn(ctx context.Context, key string, timeout time.Duration) (c *conn, done func(), err error) {
	dl, bounded := ctx.Deadline()
	if bounded {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, nil, context.DeadlineExceeded
	}
	done = func() {}
	if (ctx.Done() != nil || e.poolMayBlock()) && (!bounded || time.Until(dl) > timeout) {
		// The timeout must bound the pool's wait, and DoContext, too.
		ctx, done = context.WithTimeout(ctx, timeout)
	}
	pc, err := e.pool.GetContext(ctx)
	if err != nil {
		done()
		return nil, nil, err
	}
	b, bound := pc.(binder)
	if bound && key != "" {
		if err := b.Bind(key); err != nil {
			pc.Close()
			done()
			return nil, nil, err
		}
	}
	c = conns.Get().(*conn)
	*c = conn{Conn: pc, ctx: ctx, timeout: timeout, bound: bound}
	return c, done, nil
}

// poolMayBlock reports whether taking a connection from the pool may wait
// for another to come back: a *redis.Pool with Wait set that has handed
// out MaxActive, or a pool of any other type (which may do anything).
func (e *Engine) poolMayBlock() bool {
	p, ok := e.pool.(*redis.Pool)
	return !ok || p.Wait && p.MaxActive > 0 && p.ActiveCount() >= p.MaxActive
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

// outcome is what one script call did.
type outcome struct {
	reply any // the script's reply; nil if the call failed
	// reached: the call may have reached the server, so a failed
	// acquisition may still have taken something (false when ctx was done
	// or no connection could be had).
	reached bool
	// shortfall: WithReplicaAck asked for more acknowledgements than came
	// (it wraps ErrNotReplicated); the reply stands.
	shortfall error
}

// call runs s on a connection bound to its first key: EVALSHA, falling
// back to EVAL when the server answers NOSCRIPT; with ack (WithReplicaAck
// on) followed by WAIT in the same round trip. timeout bounds each round
// trip (0: the call timeout). A MOVED reply (the slot moved, or a replica
// was promoted) means the script did not run: the call follows it on a
// fresh connection, which binds by the cluster's updated map, up to
// maxRedirects times. ASK (the slot is mid-migration) is not followed: a
// bound connection cannot send ASKING, so the error is returned, and it is
// transient: a wait retries it until the slot settles.
func (e *Engine) call(ctx context.Context, s *redis.Script, keysAndArgs []any, ack bool, timeout time.Duration) (out outcome, err error) {
	if ctx == nil {
		return out, errNilContext
	}
	if timeout == 0 {
		timeout = e.callTimeout
	}
	key := routeKey(keysAndArgs)
	for redirects := 0; ; redirects++ {
		// redigo sends a command even on a done context, so check first.
		if err := ctxErr(ctx); err != nil {
			return out, err
		}
		c, done, err := e.conn(ctx, key, timeout)
		if err != nil {
			return out, err
		}
		out.reached = true
		var acks int64
		var ackErr error
		if ack {
			out.reply, acks, ackErr, err = e.evalWait(c, s, keysAndArgs)
		} else {
			out.reply, err = evalsha(c, s, keysAndArgs)
		}
		bound := c.bound
		c.close()
		done()
		if redirects < maxRedirects && bound && replyIs(err, "MOVED") {
			continue
		}
		if err != nil {
			out.reply = nil
			if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
				// redigo reports a deadline hit mid-command as an i/o timeout.
				return out, fmt.Errorf("%w (%w)", cerr, err)
			}
			return out, err
		}
		switch {
		case !ack:
		case ackErr != nil:
			out.shortfall = fmt.Errorf("WAIT %d %v: %w (%w)", e.replicas, e.ackTimeout, ErrNotReplicated, ackErr)
		case acks < int64(e.replicas):
			out.shortfall = fmt.Errorf("%d of %d replicas acknowledged within %v: %w", acks, e.replicas, e.ackTimeout, ErrNotReplicated)
		}
		return out, nil
	}
}

// evalWait sends EVALSHA and WAIT together and reads both replies; on
// NOSCRIPT it sends EVAL and WAIT again. err is the script's failure,
// ackErr WAIT's.
func (e *Engine) evalWait(c *conn, s *redis.Script, keysAndArgs []any) (reply any, acks int64, ackErr, err error) {
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

// eval is call for a script whose reply is all there is to it, its errors
// naming the object.
func (e *Engine) eval(ctx context.Context, o object, s *redis.Script, keysAndArgs ...any) (any, error) {
	out, err := e.call(ctx, s, keysAndArgs, false, 0)
	if err != nil {
		return nil, o.err(err)
	}
	return out.reply, nil
}

// replyIs reports whether err is a Redis error reply whose first word is
// word.
func replyIs(err error, word string) bool {
	reply, ok := errorReply(err)
	return ok && strings.HasPrefix(string(reply), word+" ")
}

// errorReply returns the Redis error reply that err is or wraps.
func errorReply(err error) (redis.Error, bool) {
	if err == nil {
		return "", false
	}
	var reply redis.Error
	ok := errors.As(err, &reply)
	return reply, ok
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

// transient reports whether err is one a server or cluster gives while it
// heals, so that a wait may try again: the node is down or restarting
// (connection refused, reset or closed; LOADING), the cluster has no
// primary for a slot (CLUSTERDOWN), or the slot is moving (TRYAGAIN, ASK,
// a MOVED that call stopped following). After a reset or closed
// connection the outcome of the call is unknown: whatever it took is
// abandoned when the wait gives up.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if reply, ok := errorReply(err); ok {
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

// retryable reports whether a wait may try again after err, its own ctx
// still running: a transient error, a pool momentarily exhausted, or a
// round trip cut off by the call timeout.
func retryable(err error) bool {
	var ne net.Error
	return transient(err) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// unknownOutcome reports whether a failed call that was sent may still have
// run on the server: anything but an error reply from Redis itself (a
// script that fails changes nothing).
func unknownOutcome(err error) bool {
	_, reply := errorReply(err)
	return err != nil && !reply
}

// sleep pauses for d unless ctx ends, or the engine closes, first.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-e.stop.Done():
		return ErrClosed
	case <-t.C:
		return nil
	}
}

// exhaustedPause is the pause before looking at a pool again that had no
// connection to give (ErrPoolExhausted): nothing was sent, and another
// goroutine gives one back in a round trip.
const exhaustedPause = 2 * time.Millisecond

// backoff is the pause before the next try after a failure: 10 ms, then
// twice the last, up to most.
func backoff(last, most time.Duration) time.Duration {
	return min(max(2*last, 10*time.Millisecond), most)
}
