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
	"log/slog"
	"net"
	"slices"
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
	// acknowledged a write in time. An acquisition was undone; an Extend or
	// Refresh kept what it set.
	ErrNotReplicated = errors.New("not replicated")
)

// Error is what the engine's calls return: the object (its kind and
// name) and what happened to it, which wraps the sentinel errors or the
// Redis or network failure behind it. Object is "" for errors about the
// engine itself.
type Error struct {
	Object string // "lock", "read-write lock", "semaphore", "recent list", "member set", "activity group"
	Name   string
	Err    error
}

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
	// UndoTimeout bounds the background undo of an acquisition whose
	// outcome is unknown (its caller gave up mid-call).
	UndoTimeout = time.Second
)

// ---------------------------------------------------------------------------
// The engine and its options

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

	id       string        // names this engine's wake channel
	wakeArg  any           // <ns>wake:, the channels' prefix, as the scripts take it
	keepArg  any           // the fence retention in ms, as the scripts take it
	queueTTL time.Duration // a queue entry's lifetime unless renewed
	subIdle  time.Duration // how long the wake subscription outlives the last waiter
	wake     waker

	mu         sync.Mutex
	closed     bool
	stop       context.Context // ends with Close
	cancelStop context.CancelFunc
	kept       map[*holding]struct{} // holdings renewed in the background
	background sync.WaitGroup        // undos and the wake subscription; Add only under mu, before closed

	// plainSuggest is set once the server refused the allow-oom shebang
	// (Redis < 7, miniredis): from then on Suggest runs the plain script.
	plainSuggest atomic.Bool

	activityTTL time.Duration         // WithActivityTTL: a period's lifetime from its first mark; 0 = forever
	indexedMu   sync.Mutex            // guards indexed
	indexed     map[shardRef]struct{} // shards this engine put in their period's index (activeIndexMemory at most)
}

// Option configures an Engine.
type Option func(*Engine)

// WithNamespace prefixes every key with prefix (default ""). A prefix
// containing '{' or '}' is rejected: every call then returns ErrInvalid.
func WithNamespace(prefix string) Option {
	return func(e *Engine) {
		if strings.ContainsAny(prefix, "{}") {
			e.reject(fmt.Errorf("namespace %q: contains a brace: %w", prefix, ErrInvalid))
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
			e.reject(fmt.Errorf("recent capacity %d: must be at least 1: %w", n, ErrInvalid))
			return
		}
		e.recentCap = n
	}
}

// WithActivityTTL makes a group's bitmap for a period expire d after the
// period's first mark (0, the default: never). Every shard of the period
// and the period's index expire together at that deadline, which later
// marks do not move; the first mark decides it, whatever TTL engines that
// mark the period later have. A negative d, or one under 1 ms, is
// rejected: every call then returns ErrInvalid.
func WithActivityTTL(d time.Duration) Option {
	return func(e *Engine) {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			e.reject(fmt.Errorf("activity TTL %v: must be 0 (never) or at least 1ms: %w", d, ErrInvalid))
			return
		}
		e.activityTTL = d
	}
}

// WithReplicaAck makes every acquisition, extend and refresh wait until
// replicas replicas have acknowledged it, for up to timeout: the script is
// followed by WAIT replicas timeout on the same connection, in the same
// round trip. With fewer acknowledgements an acquisition is undone and
// returns an error wrapping ErrNotReplicated; Extend and Refresh keep what
// they set and return such an error too. This keeps a failover from
// granting a lock a second time. replicas 0 turns it off (the default). A
// negative replicas, a timeout under 1 ms with replicas > 0 (WAIT 0 would
// block forever), or one at least as long as the call timeout (a WAIT cut
// short leaves the outcome unknown) is rejected: every call then returns
// ErrInvalid.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(e *Engine) {
		switch {
		case replicas < 0:
			e.reject(fmt.Errorf("replica ack: %d replicas: must be at least 0: %w", replicas, ErrInvalid))
		case replicas > 0 && timeout < time.Millisecond:
			e.reject(fmt.Errorf("replica ack: timeout %v: must be at least 1ms: %w", timeout, ErrInvalid))
		default:
			e.replicas, e.ackTimeout = replicas, timeout
		}
	}
}

// WithCallTimeout bounds each round trip to Redis whose context has no
// earlier deadline (default 5s), so that no call hangs on a server that
// stopped answering; a wait also bounds each of its attempts by what is
// left of it. An attempt cut off this way is undone like any other. The
// wake subscription, which waits for messages, is exempt. d under 1 ms is
// rejected: every call then returns ErrInvalid.
func WithCallTimeout(d time.Duration) Option {
	return func(e *Engine) {
		if d < time.Millisecond {
			e.reject(fmt.Errorf("call timeout %v: must be at least 1ms: %w", d, ErrInvalid))
			return
		}
		e.callTimeout = d
	}
}

// WithFenceRetention sets how long a lock's, read-write lock's or
// semaphore's fence counter outlives its name's last grant (default 24h).
// While the counter lives, every fence is the last one plus one; once it
// is gone, or lost in a restart without persistence, fences start again
// from the server's clock in microseconds, above every fence handed out
// before as long as the server's clock has not stepped back by more than
// the retention. An idle name leaves no key behind once its retention has
// passed. d under 1 ms is rejected: every call then returns ErrInvalid.
func WithFenceRetention(d time.Duration) Option {
	return func(e *Engine) {
		if d < time.Millisecond {
			e.reject(fmt.Errorf("fence retention %v: must be at least 1ms: %w", d, ErrInvalid))
			return
		}
		e.retention = d
	}
}

// WithObserver calls f with every Event of the engine's locks, read-write
// locks and semaphores: acquisitions, refusals, releases, losses, failed
// renewals and background errors. f runs on the goroutine where the event
// happened (the caller's, a watchdog's, the wake subscription's), so it
// must be quick and must not block or call the engine.
func WithObserver(f func(Event)) Option {
	return func(e *Engine) { e.observer = f }
}

// WithLogger logs the engine's background failures (failed renewals, undos
// and wake-ups) at Warn and lost holdings at Error, with the object, its
// name, the fence and the error as attributes. The engine logs nothing
// without it.
func WithLogger(l *slog.Logger) Option {
	return func(e *Engine) { e.logger = l }
}

// New returns an Engine that takes connections from pool. New never fails:
// a nil pool or a rejected option makes every call return an error
// wrapping ErrInvalid, before any I/O.
func New(pool Pool, opts ...Option) *Engine {
	e := &Engine{pool: pool, recentCap: DefaultRecentCapacity, callTimeout: DefaultCallTimeout,
		retention: DefaultFenceRetention, id: uuid.NewString()[:13], queueTTL: defaultQueueTTL, subIdle: subscriptionIdle}
	e.stop, e.cancelStop = context.WithCancel(context.Background())
	if pool == nil {
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
	e.wakeArg, e.keepArg = e.ns+"wake:", e.retention.Milliseconds()
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

// Close stops every watchdog the engine runs, and the confirmations of
// locks and permits handed over to waiters (those holdings are no longer
// renewed, so their Lost channels close; their leases run out on the
// server unless unlocked), ends the wake subscription, and waits, until
// ctx ends, for it and for the background undos of acquisitions cut off
// mid-call. Waits under way end by their own Wait or ctx. Afterwards the
// engine takes no new locks or permits (ErrClosed); holdings can still be
// unlocked, released and queried. Close is safe to call more than once.
func (e *Engine) Close(ctx context.Context) error {
	if e == nil || e.stop == nil {
		return e.usable()
	}
	e.mu.Lock()
	e.closed = true
	kept := make([]*holding, 0, len(e.kept))
	for h := range e.kept {
		kept = append(kept, h)
	}
	e.mu.Unlock()
	for _, h := range kept {
		h.stopKeeping()
		h.lost(h.obj.errorf("fence %d: engine closed: no longer renewed: %w", h.fence, ErrNotHeld))
	}
	e.cancelStop()
	e.wake.end()
	done := make(chan struct{})
	go func() { e.background.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return &Error{Err: fmt.Errorf("close: waiting for undos and the wake subscription: %w", ctx.Err())}
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// goBackground runs f on a goroutine Close waits for; on a closed engine,
// whose Close may be waiting already, it runs f at once instead.
func (e *Engine) goBackground(f func()) {
	if !e.goTracked(f) {
		f()
	}
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

// EventType says what an Event reports.
type EventType int

const (
	EventAcquired        EventType = iota + 1 // taken; Wait: how long it took, Queued: whether it waited in the queue
	EventNotAcquired                          // not taken; Err: why, Wait: how long it tried
	EventReleased                             // given back; Held: how long it was held
	EventLost                                 // the holding is gone: its lease ran out, another took it, renewals failed (Err)
	EventRenewFailed                          // one renewal failed (Err); the lease may still hold
	EventBackgroundError                      // an undo or the wake-up machinery failed (Err)
)

var eventNames = [...]string{"", "acquired", "not acquired", "released", "lost", "renew failed", "background error"}

func (t EventType) String() string {
	if t > 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Event is one thing that happened to a lock, read-write lock hold or
// permit, as WithObserver sees it. Object is "lock", "read-write lock" or
// "semaphore"; Token and Fence are zero where there is no holding (a
// refusal; a background error of the wake-up machinery, which also has no
// Name).
type Event struct {
	Type       EventType
	Object     string
	Name       string
	Token      string
	Fence      int64
	Queued     bool // the acquisition waited in the queue
	Wait, Held time.Duration
	Err        error
}

// emit tells the observer and the logger.
func (e *Engine) emit(ev Event) {
	if e.observer != nil {
		e.observer(ev)
	}
	if e.logger == nil {
		return
	}
	level := slog.LevelWarn
	switch ev.Type {
	case EventLost:
		level = slog.LevelError
	case EventRenewFailed, EventBackgroundError:
	default:
		return
	}
	e.logger.LogAttrs(context.Background(), level, "atomicredis: "+ev.Type.String(),
		slog.String("object", ev.Object), slog.String("name", ev.Name), slog.Int64("fence", ev.Fence), slog.Any("error", ev.Err))
}

// kind is a type of object the engine keeps: the noun its errors and
// events name it by, and the word its keys start with (an activity group's
// keys are its shards' and indexes', "bits:" and "bitindex:", built by
// shardKey and indexKey; its word is unused).
type kind struct {
	noun, word string
}

var (
	kindLock     = &kind{"lock", "lock"}
	kindRW       = &kind{"read-write lock", "rw"}
	kindSem      = &kind{"semaphore", "sem"}
	kindRecent   = &kind{"recent list", "recent"}
	kindMembers  = &kind{"member set", "members"}
	kindActivity = &kind{"activity group", "active"}
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
			out.reply, err = s.Do(c, keysAndArgs...)
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

// ---------------------------------------------------------------------------
// Waiting: a queue on the server, handed over inside the release script,
// and one subscription per engine that carries the grant to the waiter

const (
	// defaultQueueTTL is how long a waiter's queue entry lives unless
	// renewed; a waiter renews it three times as often. A waiter that died
	// costs the others at most this long.
	defaultQueueTTL = time.Second
	// subscriptionTimeout is how long the wake subscription may stay
	// silent before it is taken for dead; it is pinged three times as
	// often.
	subscriptionTimeout = 3 * time.Second
	// subscriptionIdle is how long the wake subscription outlives the
	// engine's last waiter, so that a busy name does not subscribe anew for
	// every wait.
	subscriptionIdle = 2 * time.Second
)

// subscriptionBudget is how many connections an engine's waiting may hold
// blocked: half of a *redis.Pool's MaxActive (so that holders can always
// reach the server to unlock and renew), else 64. It needs one; with a
// pool of MaxActive 1 it has none, and waiters learn of a handoff when
// they renew, a third of the queue TTL late.
func subscriptionBudget(pool Pool) int {
	if p, ok := pool.(*redis.Pool); ok && p.MaxActive > 0 {
		return p.MaxActive / 2
	}
	return 64
}

// transient reports whether err is one a server or cluster gives while it
// heals, so that a wait may try again: the node is down or restarting
// (connection refused, reset or closed; LOADING), the cluster has no
// primary for a slot (CLUSTERDOWN), or the slot is moving (TRYAGAIN, ASK,
// a MOVED that call stopped following). After a reset or closed
// connection the outcome of the call is unknown: whatever it took is
// undone when the wait gives up.
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

// exhaustedPause is the pause before looking at a pool again that had no
// connection to give (ErrPoolExhausted): nothing was sent, and another
// goroutine gives one back in a round trip.
const exhaustedPause = 2 * time.Millisecond

// backoff is the pause before the next try after a failure: 10 ms, then
// twice the last, up to most.
func backoff(last, most time.Duration) time.Duration {
	return min(max(2*last, 10*time.Millisecond), most)
}

// waker is an engine's subscription to its wake channel, <ns>wake:<engine
// id>, on which a release script that hands one of the engine's waiters a
// lock or a permit publishes "token fence arrival" (the arrival number of
// the queue entry it was handed to, so that a grant to an entry that has
// since lapsed is never taken for a later one's). It runs while the engine has
// waiters, and a little longer, on one connection whatever the number of
// names they wait on (on a cluster, a publish reaches every node, so one
// subscription anywhere hears all). Messages can be lost (pub/sub is at
// most once): a waiter also renews its queue entry, which picks up what it
// was handed, and after every (re)subscription every waiter looks at once.
type waker struct {
	e       *Engine
	channel string
	budget  int // subscriptionBudget

	mu      sync.Mutex
	waiting map[string]*waiter // by token
	running bool               // the subscription's goroutine runs
	quit    bool               // it is to end: nobody waits, or the engine closed
	sub     Subscription       // the current subscription, nil between two
	idle    *time.Timer        // ends the subscription once nobody has waited for subscriptionIdle
	stopped chan struct{}      // closed (and replaced) to cut the goroutine's pause after a failure short
}

// waiter is one goroutine waiting for a grant.
type waiter struct {
	signal chan struct{} // buffered: a wake-up, or a call to look again

	mu      sync.Mutex
	fence   int64 // the fence a wake-up handed over; 0: none yet
	arrival int64 // the arrival number of the queue entry it was handed to
}

// wake hands w fence for its entry of arrival number arrival (fence 0: no
// grant, look again) and signals it.
func (w *waiter) wake(fence, arrival int64) {
	if fence != 0 {
		w.mu.Lock()
		w.fence, w.arrival = fence, arrival
		w.mu.Unlock()
	}
	select {
	case w.signal <- struct{}{}:
	default: // signalled already
	}
}

// handed returns the last grant a wake-up brought, and forgets it.
func (w *waiter) handed() (fence, arrival int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fence, arrival = w.fence, w.arrival
	w.fence, w.arrival = 0, 0
	return fence, arrival
}

// join registers a waiter for token and makes sure the subscription runs.
func (k *waker) join(token string) *waiter {
	w := &waiter{signal: make(chan struct{}, 1)}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.waiting == nil {
		k.waiting = map[string]*waiter{}
	}
	k.waiting[token] = w
	if k.idle != nil {
		k.idle.Stop()
		k.idle = nil
	}
	k.quit = false
	// Never goBackground here: on an engine closed meanwhile it would run
	// k.run on this goroutine, which holds k.mu that run takes.
	if !k.running && k.budget > 0 && k.e.goTracked(k.run) {
		k.running = true // run takes k.mu first, so it sees this
	}
	return w
}

// leave forgets token's waiter; the last one out starts the idle timer.
func (k *waker) leave(token string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.waiting, token)
	if len(k.waiting) == 0 && k.running && k.idle == nil {
		k.idle = time.AfterFunc(k.e.subIdle, k.idleEnd)
	}
}

// idleEnd ends the subscription if nobody has waited since the timer was
// set.
func (k *waker) idleEnd() {
	k.mu.Lock()
	if len(k.waiting) > 0 || k.idle == nil {
		k.mu.Unlock()
		return
	}
	k.idle = nil
	k.stop()
}

// end ends the subscription for good (Engine.Close).
func (k *waker) end() {
	k.mu.Lock()
	if k.idle != nil {
		k.idle.Stop()
		k.idle = nil
	}
	k.stop()
}

// stop tells the goroutine to end, and ends the subscription. Called with
// mu held; it unlocks it.
func (k *waker) stop() {
	k.quit = true
	sub := k.sub
	if k.stopped != nil {
		close(k.stopped)
		k.stopped = nil
	}
	k.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}

// run subscribes and listens until told to quit, subscribing again after
// a failure.
func (k *waker) run() {
	var pause time.Duration
	for {
		k.mu.Lock()
		if k.quit || k.e.isClosed() {
			k.running = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		sub, err := k.subscribe()
		heard := false
		if err == nil {
			heard, err = k.listen(sub)
		}
		if err == nil {
			pause = 0
			continue
		}
		k.e.emit(Event{Type: EventBackgroundError, Err: &Error{Err: fmt.Errorf("wake subscription %s: %w", k.channel, err)}})
		if heard { // it was up, and was cut: subscribe again after the shortest pause
			pause = 0
		}
		pause = backoff(pause, time.Second)
		k.mu.Lock()
		if len(k.waiting) == 0 { // nobody to wake: the next waiter subscribes anew
			k.running = false
			k.mu.Unlock()
			return
		}
		if k.stopped == nil {
			k.stopped = make(chan struct{})
		}
		stopped := k.stopped
		k.mu.Unlock()
		t := time.NewTimer(pause)
		select { // the pause; idleEnd and end cut it short
		case <-t.C:
		case <-stopped:
		case <-k.e.stop.Done():
		}
		t.Stop()
	}
}

// subscribe subscribes to the wake channel: through the pool if it is a
// Subscriber, else on one of its connections.
func (k *waker) subscribe() (Subscription, error) {
	ctx, cancel := context.WithTimeout(k.e.stop, k.e.callTimeout)
	defer cancel()
	if s, ok := k.e.pool.(Subscriber); ok {
		return s.Subscribe(ctx, k.channel)
	}
	c, err := k.e.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	if b, ok := c.(binder); ok {
		if err := b.Bind(k.channel); err != nil { // any node: a publish reaches them all
			c.Close()
			return nil, err
		}
	}
	if err := c.Send("SUBSCRIBE", k.channel); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	return &connSubscription{c: c}, nil
}

// listen delivers the subscription's messages until it ends; nil if it
// ended because it was told to. heard: the server confirmed the
// subscription.
func (k *waker) listen(sub Subscription) (heard bool, err error) {
	k.mu.Lock()
	if k.quit {
		k.mu.Unlock()
		sub.Close()
		return false, nil
	}
	k.sub = sub
	k.mu.Unlock()
	stopPing, pinged := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pinged)
		t := time.NewTicker(subscriptionTimeout / 3)
		defer t.Stop()
		for {
			select {
			case <-stopPing:
				return
			case <-t.C:
				sub.Ping() // a failed ping shows as a failed Receive
			}
		}
	}()
	defer func() {
		close(stopPing)
		<-pinged
		k.mu.Lock()
		k.sub = nil
		k.mu.Unlock()
		sub.Close()
	}()
	for {
		payload, subscribed, err := sub.Receive(subscriptionTimeout)
		switch {
		case err != nil:
			k.mu.Lock()
			quit := k.quit
			k.mu.Unlock()
			if quit {
				return heard, nil
			}
			return heard, err
		case subscribed:
			heard = true
			k.lookAgain()
		case payload != "":
			k.deliver(payload)
		}
	}
}

// deliver hands a wake-up ("token fence arrival") to its waiter; one for a
// waiter that has left is dropped (its abandon script passes on what it
// was handed).
func (k *waker) deliver(payload string) {
	token, rest, _ := strings.Cut(payload, " ")
	f, a, _ := strings.Cut(rest, " ")
	fence, err := strconv.ParseInt(f, 10, 64)
	arrival, err2 := strconv.ParseInt(a, 10, 64)
	if err != nil || err2 != nil || fence == 0 {
		return
	}
	k.mu.Lock()
	w := k.waiting[token]
	k.mu.Unlock()
	if w != nil {
		w.wake(fence, arrival)
	}
}

// lookAgain has every waiter call the server at once: wake-ups published
// while the subscription was down are lost.
func (k *waker) lookAgain() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.waiting {
		w.wake(0, 0)
	}
}

// connSubscription is a Subscription on a connection in subscribe mode.
// redigo lets one goroutine send while another receives; mu keeps the
// senders (Ping, Close) to one at a time.
type connSubscription struct {
	c redis.Conn

	mu        sync.Mutex
	receiving bool
	closed    bool
	released  bool
}

var errSubscriptionClosed = errors.New("subscription closed")

func (s *connSubscription) Receive(timeout time.Duration) (payload string, subscribed bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", false, errSubscriptionClosed
	}
	s.receiving = true
	s.mu.Unlock()
	var v any
	if cc, ok := s.c.(redis.ConnWithTimeout); ok {
		v, err = cc.ReceiveWithTimeout(timeout)
	} else {
		v, err = s.c.Receive()
	}
	s.mu.Lock()
	s.receiving = false
	if s.closed {
		s.release()
		err = errSubscriptionClosed
	}
	s.mu.Unlock()
	if err != nil {
		return "", false, err
	}
	parts, _ := v.([]any)
	if len(parts) < 2 {
		return "", false, fmt.Errorf("unexpected reply %v", v)
	}
	what, _ := redis.String(parts[0], nil)
	switch what {
	case "message":
		if len(parts) == 3 {
			payload, err = redis.String(parts[2], nil)
		}
		return payload, false, err
	case "subscribe":
		return "", true, nil
	case "unsubscribe":
		return "", false, errSubscriptionClosed
	}
	return "", false, nil // a PING's reply
}

func (s *connSubscription) Ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSubscriptionClosed
	}
	if err := s.c.Send("PING"); err != nil {
		return err
	}
	return s.c.Flush()
}

// Close unsubscribes if a Receive is waiting (which then gives the
// connection back), else gives the connection back at once.
func (s *connSubscription) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.receiving {
		if err := s.c.Send("UNSUBSCRIBE"); err != nil {
			return err
		}
		return s.c.Flush()
	}
	s.release()
	return nil
}

// release gives the connection up. A connection that was subscribed never
// goes back to a pool, since a message may still be on its way to it
// (miniredis delivers them from a goroutine of its own): a read that times
// out breaks it, and the pool drops a broken connection.
func (s *connSubscription) release() {
	if s.released {
		return
	}
	s.released = true
	if cc, ok := s.c.(redis.ConnWithTimeout); ok {
		for i := 0; i < 100; i++ {
			if _, err := cc.ReceiveWithTimeout(time.Nanosecond); err != nil {
				break
			}
		}
	}
	s.c.Close()
}

// acquisition is one attempt to take an object, waiting or not: the
// acquire script and its abandon script, their keys, and the arguments
// after the standard ones.
//
// Acquire scripts share one shape: ARGV token, mode (0 one try, 1 wait, 2
// wait and believed queued), queue entry lifetime in ms, lease in ms, fence
// retention in ms, inbox name, wake channel prefix, extra...; reply {1,
// fence} (held, for the full lease: also the pickup of a handoff), {0, hint
// ms, rank, arrival, ...} (not held: hint is how long the holder has left,
// -1 if none; rank the caller's place in the queue), {2} (the token was
// abandoned) or {3} (a semaphore has no limit stored and none was given).
// Abandon scripts take the same keys and ARGV token, ms a late call of the
// token's could still act for, fence retention in ms, wake channel prefix.
type acquisition struct {
	obj              object
	acquire, abandon *redis.Script
	keys             []any // the object's keys and the token's void mark
	token            string
	tokenArg         any // token, as the scripts take it
	lease            time.Duration
	wait             time.Duration // 0: one attempt
	extra            []any
}

// attempt is an acquire script's reply.
type attempt struct {
	granted bool
	fence   int64
	voided  bool          // the token was abandoned
	noLimit bool          // a semaphore with no stored limit, and none given
	hint    time.Duration // how long the holder has left, -1 if none
	rank    int64         // the caller's place in the queue (one try: how many are queued)
	arrival int64         // the arrival number the queue gave it, if it just queued
	limit   int64         // semaphores: the limit in force
	held    int64         // semaphores: the permits held
}

func decodeAttempt(reply any) (a attempt, err error) {
	v, err := redis.Int64s(reply, nil)
	if err != nil || len(v) == 0 {
		return a, fmt.Errorf("unexpected reply %v", reply)
	}
	switch {
	case v[0] == 1 && len(v) == 2:
		a.granted, a.fence = true, v[1]
	case v[0] == 2:
		a.voided = true
	case v[0] == 3:
		a.noLimit = true
	case v[0] == 0 && len(v) >= 4:
		a.hint, a.rank, a.arrival = time.Duration(v[1])*time.Millisecond, v[2], v[3]
		if v[1] < 0 {
			a.hint = -1
		}
		if len(v) == 6 {
			a.limit, a.held = v[4], v[5]
		}
	default:
		return a, fmt.Errorf("unexpected reply %v", reply)
	}
	return a, nil
}

// refusal says why a one-try acquisition was refused.
func (a attempt) refusal(o object) string {
	switch {
	case o.kind == kindSem && a.held >= a.limit:
		return fmt.Sprintf("all %d permits are held; the first times out in %v", a.limit, a.hint)
	case a.hint < 0:
		return "free, but waiters are queued ahead"
	}
	return fmt.Sprintf("held by another; its lease ends in %v", a.hint)
}

// grant is what an acquisition got.
type grant struct {
	fence   int64
	arrival int64 // the number the queue gave the caller, 0 if it never queued (tests check the order by it)
	queued  bool  // it waited in the queue
	// handed: a release handed it over and woke the caller, which has not
	// confirmed it: its lease runs only to the end of the caller's queue
	// entry, set by the last renewal sent at sent.
	handed bool
	sent   time.Time // when the granting call, or the last renewal, was sent
	took   time.Duration
}

// acquire takes the object, in one attempt or, with a.wait > 0, queueing
// on the server until the object is handed over, the wait runs out or ctx
// ends. A waiter blocks on nothing of its own: the engine's wake
// subscription wakes it with the grant, and it renews its queue entry
// every third of the entry's lifetime (the same script: it also picks up
// what was handed to it, and takes the object if it is at the head and the
// holder is gone). Whatever the wait's end, an attempt that may have
// reached the server is undone in the background unless it granted.
func (e *Engine) acquire(ctx context.Context, a *acquisition) (grant, error) {
	start := time.Now()
	g, err := e.wait(ctx, a, start)
	g.took = time.Since(start)
	if err != nil {
		e.emit(Event{Type: EventNotAcquired, Object: a.obj.kind.noun, Name: a.obj.name, Queued: g.queued, Wait: g.took, Err: err})
		return g, err
	}
	e.emit(Event{Type: EventAcquired, Object: a.obj.kind.noun, Name: a.obj.name, Token: a.token, Fence: g.fence, Queued: g.queued, Wait: g.took})
	return g, nil
}

func (e *Engine) wait(ctx context.Context, a *acquisition, start time.Time) (g grant, err error) {
	if e.isClosed() {
		return g, a.obj.err(ErrClosed)
	}
	mode := 0
	var w *waiter
	if a.wait > 0 {
		mode = 1
		w = e.wake.join(a.token)
		defer e.wake.leave(a.token)
	}
	args := make([]any, 0, len(a.keys)+7+len(a.extra))
	args = append(append(args, a.keys...), a.tokenArg, mode, e.queueTTL.Milliseconds(), a.lease.Milliseconds(),
		e.keepArg, a.obj.ns+a.obj.kind.word+":{"+a.obj.name+"}:inbox:"+e.id, e.wakeArg)
	args = append(args, a.extra...)
	deadline := start.Add(a.wait)
	var (
		undo    bool  // the server may hold something of the token's
		failure error // the last attempt's, if it got no answer
		pause   time.Duration
		rank    int64
	)
	giveUp := func(err error) (grant, error) {
		if undo {
			e.undo(a)
		}
		return g, err
	}
	for {
		timeout := e.callTimeout
		if mode == 1 {
			timeout = min(timeout, time.Until(deadline))
		}
		if timeout <= 0 { // the wait ran out between attempts
			if failure != nil {
				return giveUp(a.obj.errorf("waited %v; last attempt: %w", a.wait, failure))
			}
			return giveUp(a.obj.errorf("waited %v, %d ahead in the queue: %w", a.wait, rank, ErrNotAcquired))
		}
		var at attempt
		sent := time.Now()
		out, err := e.call(ctx, a.acquire, args, e.replicas > 0, timeout)
		if err == nil {
			at, err = decodeAttempt(out.reply)
		}
		undo = undo || out.reached && unknownOutcome(err)
		if err == nil && at.granted && out.shortfall != nil { // a failover could grant it again
			undo = true
			return giveUp(a.obj.err(out.shortfall))
		}
		switch {
		case err != nil && ctxErr(ctx) != nil:
			took := time.Since(start).Round(time.Millisecond)
			switch {
			case failure != nil: // the last answer was no answer
				return giveUp(a.obj.errorf("gave up after %v: %w (last attempt: %w)", took, ctxErr(ctx), failure))
			case g.queued: // the server had queued the caller
				return giveUp(a.obj.errorf("gave up after %v, %d ahead in the queue: %w: %w", took, rank, ErrNotAcquired, ctxErr(ctx)))
			}
			return giveUp(a.obj.errorf("gave up after %v: %w", took, err))
		case err != nil && (mode == 0 || !retryable(err)):
			return giveUp(a.obj.err(err))
		case err != nil:
			if !time.Now().Before(deadline) {
				return giveUp(a.obj.errorf("waited %v; last attempt: %w", a.wait, err))
			}
			failure = err
			pause = backoff(pause, 500*time.Millisecond)
			if errors.Is(err, redis.ErrPoolExhausted) {
				pause = exhaustedPause // nothing was sent: look at the pool again soon
			}
			if err := sleep(ctx, min(pause, time.Until(deadline))); err != nil {
				return giveUp(a.obj.errorf("gave up after %v: %w (last attempt: %w)", time.Since(start).Round(time.Millisecond), err, failure))
			}
			continue
		case at.granted:
			g.fence, g.sent = at.fence, sent
			return g, nil
		case at.voided:
			return giveUp(a.obj.errorf("attempt abandoned: %w", ErrNotAcquired))
		case at.noLimit:
			return giveUp(a.obj.errorf("no limit is stored: give Limit: %w", ErrInvalid))
		case mode == 0:
			return giveUp(a.obj.errorf("%s: %w", at.refusal(a.obj), ErrNotAcquired))
		}

		args[len(a.keys)+1] = 2 // the next call renews the entry
		// Queued: wait for the wake-up, the time to renew, or the end. A
		// grant handed to this entry came after this call ran (else the
		// call would have picked it up), so its lease runs at least a queue
		// TTL from when the call was sent.
		undo, failure, pause = true, nil, 0
		g.queued, g.sent, rank = true, sent, at.rank
		if at.arrival > 0 { // a new entry: a grant to an earlier one has lapsed
			g.arrival = at.arrival
		}
		left := time.Until(deadline)
		if left <= 0 {
			return giveUp(a.obj.errorf("waited %v, %d ahead in the queue: %w", a.wait, rank, ErrNotAcquired))
		}
		next := e.queueTTL / 3
		if rank == 0 && at.hint > 0 && at.hint < next {
			next = at.hint // the head takes over when the holder's time is up
		}
		t := time.NewTimer(min(next, left))
		select {
		case <-w.signal:
			if f, arrival := w.handed(); f != 0 && arrival == g.arrival && e.replicas == 0 {
				t.Stop()
				g.fence, g.handed = f, true
				return g, nil
			}
			// A call to look again; a grant to an entry of ours that lapsed
			// before this call re-queued us; or a grant that must be
			// acknowledged by replicas before the caller runs: the next
			// attempt picks up whatever is ours.
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return giveUp(a.obj.errorf("gave up after %v, %d ahead in the queue: %w: %w", time.Since(start).Round(time.Millisecond), rank, ErrNotAcquired, ctx.Err()))
		}
		t.Stop()
	}
}

// undo runs the abandon script in the background, bounded by UndoTimeout,
// for an acquisition whose caller has already been told it failed. Close
// waits for it. If it fails, the lease still ends whatever the late acquire
// took; the failure is reported as a background error.
func (e *Engine) undo(a *acquisition) {
	args := append(a.keys[:len(a.keys):len(a.keys)], a.tokenArg, max(a.lease, e.queueTTL).Milliseconds(), e.keepArg, e.wakeArg)
	obj, token, abandon := a.obj, a.token, a.abandon
	e.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), UndoTimeout)
		defer cancel()
		if _, err := e.call(ctx, abandon, args, false, UndoTimeout); err != nil {
			e.emit(Event{Type: EventBackgroundError, Object: obj.kind.noun, Name: obj.name, Token: token,
				Err: obj.errorf("undoing an acquisition: %w", err)})
		}
	})
}

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
type Lock struct{ holding }

// holdOps are the scripts one kind of holding (a lock, a read-write lock's
// hold, a permit) is taken and kept with, and the object's keys they
// take, in order: the release script takes them all, the extend and pttl
// scripts the first extendKeys and pttlKeys; the acquire and abandon
// scripts add the token's void mark.
type holdOps struct {
	kind                                    *kind
	suffixes                                []string
	extendKeys, pttlKeys                    int
	acquire, abandon, release, extend, pttl *redis.Script
}

// lockOps: the lock (hash: token, seq, fence), its fence counter, its
// queue and its waiters.
var lockOps = &holdOps{kind: kindLock, suffixes: []string{"", ":fence", ":queue", ":waiters"},
	extendKeys: 1, pttlKeys: 1, acquire: scriptLockAcquire, abandon: scriptLockAbandon,
	release: scriptLockRelease, extend: scriptLockExtend, pttl: scriptLockPTTL}

// keys are the object's keys in the scripts' order.
func (ops *holdOps) keys(o object) []any {
	keys := make([]any, len(ops.suffixes), len(ops.suffixes)+1)
	for i, s := range ops.suffixes {
		keys[i] = o.key(s)
	}
	return keys
}

// take makes one acquisition of a holding of ops' kind into h.
func (e *Engine) take(ctx context.Context, h *holding, o object, ops *holdOps, token string, lease, wait time.Duration, watchdog bool, extra ...any) error {
	keys := ops.keys(o)
	tokenArg := any(token)
	g, err := e.acquire(ctx, &acquisition{obj: o, acquire: ops.acquire, abandon: ops.abandon,
		keys: append(keys, o.key(":void:"+token)), token: token, tokenArg: tokenArg, lease: lease, wait: wait, extra: extra})
	if err != nil {
		return err
	}
	h.e, h.obj, h.ops, h.keys, h.token, h.tokenArg = e, o, ops, keys, token, tokenArg
	h.fence, h.arrival, h.queued = g.fence, g.arrival, g.queued
	h.since, h.watchdog, h.lease, h.renewed, h.confirmed = time.Now(), watchdog, lease, g.sent, !g.handed
	if watchdog || g.handed {
		h.keepUp()
	}
	return nil
}

// holding is what a Lock and a Permit share: one grant of an object, its
// lease, what keeps it in the background (a watchdog; or, for a holding a
// release handed over to a waiter, its confirmation), and how its end is
// told (Lost, Context, events).
//
// A handed-over holding's lease runs only to the end of its waiter's
// queue entry, which the waiter's last renewal set: at the latest
// renewed + queueTTL by the client's clock. Until it is confirmed (a
// renewal with its own lease: the watchdog's first, TTL, Held, Extend, or
// a confirmation sent by itself a third into that time), a failed or late
// confirmation is a loss.
type holding struct {
	e        *Engine
	obj      object
	ops      *holdOps
	keys     []any // ops.keys(obj)
	token    string
	tokenArg any // token, as the scripts take it
	fence    int64
	arrival  int64 // the number the queue gave it, 0 if it never queued
	queued   bool
	since    time.Time // when it was granted, for EventReleased
	watchdog bool

	stopKeep context.CancelFunc // nil if nothing keeps it
	keepDone chan struct{}      // closed when the keeper ends
	reset    chan struct{}      // tells the keeper the lease changed

	mu         sync.Mutex
	lease      time.Duration                    // what renewals ask for
	renewed    time.Time                        // when the last renewal the server applied (or the grant) was sent
	confirmed  bool                             // false: handed over, its lease runs to renewed + queueTTL
	seq        int64                            // the last renewal's number (lock_extend, rw_extend)
	ended      bool                             // released, or found lost
	lostCh     chan struct{}                    // made when Lost is first called
	lostClosed bool                             // Lost is closed
	contexts   map[*context.CancelFunc]struct{} // of Context's contexts: cancelled when it ends
}

// keepUp starts renewing in the background, registered with the engine so
// Close can stop it. On a closed engine nothing would stop it, so none
// starts and the holding is lost at once: nobody renews its lease.
func (h *holding) keepUp() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stopKeep, h.keepDone, h.reset = cancel, make(chan struct{}), make(chan struct{}, 1)
	e := h.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		close(h.keepDone)
		h.lost(h.obj.errorf("fence %d: engine closed: not renewed: %w", h.fence, ErrNotHeld))
		return
	}
	if e.kept == nil {
		e.kept = map[*holding]struct{}{}
	}
	e.kept[h] = struct{}{}
	e.mu.Unlock()
	go h.keep(ctx)
}

// stopKeeping ends the keeper and waits until it has, so no renewal is in
// flight afterwards. Safe to call more than once, and without one.
func (h *holding) stopKeeping() {
	if h.stopKeep != nil {
		h.stopKeep()
		<-h.keepDone
	}
}

// keep renews the lease: every lease/3 (Redisson's rhythm) with a watchdog;
// once, a third into its provisional lease (most short holds are over by
// then), for a handed-over holding without one. A reply saying the holding
// is gone is a loss. A failed renewal is retried every tenth of the lease
// until the lease would have run out since the last renewal was sent; then
// the holding must be presumed lost. The client clock decides only when
// the holder stops trusting its lease (and paces renewals); who holds it
// is always the server's answer.
func (h *holding) keep(ctx context.Context) {
	defer func() {
		h.e.mu.Lock()
		delete(h.e.kept, h)
		h.e.mu.Unlock()
		close(h.keepDone)
	}()
	var retry time.Duration
	for {
		h.mu.Lock()
		lease, renewed, confirmed := h.lease, h.renewed, h.confirmed
		h.mu.Unlock()
		if confirmed && !h.watchdog {
			return // confirmed by TTL, Held or Extend
		}
		next := retry
		switch {
		case next > 0:
		case confirmed: // a third into the lease, counted from when it was granted or renewed
			next = time.Until(renewed.Add(lease / 3))
		default: // by then it has had its queue entry a third as long
			next = time.Until(renewed.Add(h.e.queueTTL / 3))
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
		lease, renewed, seq, span := h.lease, h.renewed, h.seq, h.span()
		h.mu.Unlock()
		callCtx, cancel := context.WithDeadline(ctx, renewed.Add(span))
		sent := time.Now()
		held, err := h.renew(callCtx, lease, seq)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && held:
			h.renewedAt(sent)
			retry = 0
		case err == nil:
			h.lost(h.obj.errorf("fence %d: the lease ran out or another took it: %w", h.fence, ErrNotHeld))
			return
		default:
			h.e.emit(Event{Type: EventRenewFailed, Object: h.obj.kind.noun, Name: h.obj.name, Token: h.token, Fence: h.fence, Err: err})
			h.mu.Lock()
			renewed, span = h.renewed, h.span() // an Extend meanwhile counts too
			h.mu.Unlock()
			if time.Since(renewed) >= span {
				h.lost(h.obj.errorf("fence %d: renewals failed until the lease ran out: %w (%w)", h.fence, ErrNotHeld, err))
				return
			}
			retry = max(span/9, time.Millisecond)
			if errors.Is(err, redis.ErrPoolExhausted) {
				retry = exhaustedPause
			}
		}
	}
}

// span is how long the holder may count on the lease after renewed: its
// own, or, until confirmed, the queue entry's lifetime, less a tenth. The
// server's lease runs at least the whole of it from when the renewal was
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

// renewedAt records a renewal the server applied, sent at sent.
func (h *holding) renewedAt(sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.renewed.Before(sent) {
		h.renewed = sent
	}
	h.confirmed = true
}

// renew sends renewal number seq with lease (a lock's Extend, a permit's
// Refresh). held reports the script's answer: a stale renewal (2: a newer
// one of this holder's already stands) counts as held. Too few replica
// acknowledgements are an error wrapping ErrNotReplicated, with held as
// the script said.
func (h *holding) renew(ctx context.Context, lease time.Duration, seq int64) (held bool, err error) {
	n := h.ops.extendKeys
	args := append(h.keys[:n:n], h.tokenArg, lease.Milliseconds())
	if h.ops.kind == kindSem {
		args = append(args, h.e.keepArg, h.e.wakeArg)
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

// extend is Lock.Extend and Permit.Refresh: a renewal with ttl (0: the
// current lease) that becomes the keeper's lease from now on.
func (h *holding) extend(ctx context.Context, ttl time.Duration) error {
	ttl, err := h.obj.duration("TTL", ttl, h.currentLease())
	if err != nil {
		return err
	}
	// The new lease is the keeper's from this instant: any renewal
	// numbered after this one carries it.
	h.mu.Lock()
	h.lease = ttl
	h.seq++
	seq := h.seq
	h.mu.Unlock()
	sent := time.Now()
	held, err := h.renew(ctx, ttl, seq)
	if err != nil && !(held && errors.Is(err, ErrNotReplicated)) {
		return err
	}
	if !held {
		return h.notHeld()
	}
	// Extended (even if too few replicas acknowledged it: the server keeps
	// it, and err says so): the keeper renews on the new rhythm.
	h.renewedAt(sent)
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
// confirmed is confirmed in the same script (a renewal): its lease is then
// its own in full.
func (h *holding) ttl(ctx context.Context) (time.Duration, error) {
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

// release is Unlock and Release: it stops the keeper, then makes its
// attempt even when ctx is already done, bounded by ReleaseTimeout (or
// ctx's later deadline), retrying a pool that is momentarily exhausted and
// a connection that broke (releasing is idempotent: a retry of a release
// that did run finds the holding gone). A holding nobody releases blocks
// its name until its lease ends, which for one just handed over is its
// queue entry's (up to a second), so a cut connection is worth a retry.
func (h *holding) release(ctx context.Context) error {
	h.stopKeeping()
	deadline := time.Now().Add(ReleaseTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.After(deadline) {
		deadline = dl
	}
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	n := len(h.keys)
	args := append(h.keys[:n:n], h.tokenArg, h.e.keepArg, h.e.wakeArg)
	var (
		unanswered error // an earlier attempt's, sent and not answered: it may have released
		pause      time.Duration
	)
	for {
		out, err := h.e.call(ctx, h.ops.release, args, false, time.Until(deadline))
		if err != nil && time.Now().Before(deadline) {
			switch {
			case errors.Is(err, redis.ErrPoolExhausted):
				pause = exhaustedPause
			case transient(err):
				pause = backoff(pause, 100*time.Millisecond)
				if out.reached && unknownOutcome(err) {
					unanswered = err
				}
			default:
				pause = 0
			}
			if pause > 0 {
				time.Sleep(min(pause, time.Until(deadline)))
				continue
			}
		}
		if err != nil {
			return h.obj.err(err)
		}
		if v, _ := redis.Int64(out.reply, nil); v == 0 {
			if unanswered != nil {
				h.end()
				return h.obj.errorf("fence %d: no longer held after a release went unanswered (%w): that release or the lease's end freed it", h.fence, unanswered)
			}
			return h.notHeld()
		}
		h.end()
		h.e.emit(Event{Type: EventReleased, Object: h.obj.kind.noun, Name: h.obj.name, Token: h.token, Fence: h.fence,
			Queued: h.queued, Held: time.Since(h.since)})
		return nil
	}
}

// notHeld is the error for a holding found gone, which it records as lost.
func (h *holding) notHeld() error {
	var err error
	if h.ops.kind == kindSem {
		err = h.obj.errorf("permit %d: released or timed out: %w", h.fence, ErrNotHeld)
	} else {
		err = h.obj.errorf("fence %d: released, expired or taken by another: %w", h.fence, ErrNotHeld)
	}
	h.lost(err)
	return err
}

// end marks the holding over: its contexts end. It reports whether it was
// the first to.
func (h *holding) end() bool {
	h.mu.Lock()
	first := !h.ended
	h.ended = true
	contexts := h.contexts
	h.contexts = nil
	h.mu.Unlock()
	for cancel := range contexts {
		(*cancel)()
	}
	return first
}

// lost records that the holding is gone. The first time, its contexts end
// and EventLost is reported. Lost closes if the engine was keeping it (a
// watchdog; the confirmation of a handed-over holding).
func (h *holding) lost(cause error) {
	h.mu.Lock()
	if (h.watchdog || !h.confirmed) && !h.lostClosed {
		h.lostClosed = true
		if h.lostCh != nil {
			close(h.lostCh)
		}
	}
	h.mu.Unlock()
	if h.end() {
		h.e.emit(Event{Type: EventLost, Object: h.obj.kind.noun, Name: h.obj.name, Token: h.token, Fence: h.fence, Queued: h.queued, Err: cause})
	}
}

func (h *holding) lostChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lostCh == nil {
		h.lostCh = make(chan struct{})
		if h.lostClosed {
			close(h.lostCh)
		}
	}
	return h.lostCh
}

// context is Lock.Context and Permit.Context.
func (h *holding) context(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var ctx context.Context
	var cancel context.CancelFunc
	if h.watchdog {
		ctx, cancel = context.WithCancel(parent)
	} else {
		ctx, cancel = context.WithDeadline(parent, h.renewed.Add(h.lease-h.lease/10))
	}
	if h.ended {
		cancel()
		return ctx, cancel
	}
	if h.contexts == nil {
		h.contexts = map[*context.CancelFunc]struct{}{}
	}
	key := &cancel
	h.contexts[key] = struct{}{}
	return ctx, func() {
		h.mu.Lock()
		delete(h.contexts, key)
		h.mu.Unlock()
		cancel()
	}
}

// closedChan is what Lost returns for a nil holding.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// canceled is what Context returns for a nil holding.
func canceled(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx, cancel
}

var errNilLock = &Error{Err: fmt.Errorf("nil lock: %w", ErrNotHeld)}

// Lock acquires the named lock, waiting up to o.Wait (default 10s) while
// another holds it. Waiters queue on the server in arrival order; a
// release hands the lock to the first live waiter inside its own script
// and publishes the grant on the waiter's engine's wake channel, so the
// waiter returns as soon as the message arrives, with no further round
// trip (see holding for how such a lock is confirmed).
//
// It returns an error wrapping ErrNotAcquired when the server kept the
// caller queued until the wait ran out or ctx ended (then wrapping
// ctx.Err() as well), and an error wrapping the failure, not
// ErrNotAcquired, when the last attempt could not reach Redis (connection
// refused, a timeout, CLUSTERDOWN...): a wait retries those until it runs
// out.
func (e *Engine) Lock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, lockOps, "", name, o, true)
}

// TryLock makes one attempt at the named lock and returns an error wrapping
// ErrNotAcquired if another holds it or live waiters are queued. o.Wait is
// not used (a negative or sub-millisecond one is still ErrInvalid).
func (e *Engine) TryLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, lockOps, "", name, o, false)
}

// newToken is a holding's random identifier.
func newToken() (string, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return id.String(), nil
}

// lock takes a holding of ops' kind; prefix ("", or "r-"/"w-" for a
// read-write lock's reader or writer) starts its token, so the queue knows
// what each waiter wants.
func (e *Engine) lock(ctx context.Context, ops *holdOps, prefix, name string, o LockOptions, mayWait bool) (*Lock, error) {
	obj, err := e.object(ops.kind, name)
	if err != nil {
		return nil, err
	}
	ttl, err := obj.duration("TTL", o.TTL, DefaultTTL)
	if err != nil {
		return nil, err
	}
	wait, err := obj.duration("Wait", o.Wait, DefaultWait)
	if err != nil {
		return nil, err
	}
	if !mayWait {
		wait = 0
	}
	token, err := newToken()
	if err != nil {
		return nil, obj.err(err)
	}
	l := &Lock{}
	if err := e.take(ctx, &l.holding, obj, ops, prefix+token, ttl, wait, o.Watchdog); err != nil {
		return nil, err
	}
	return l, nil
}

// IsLocked reports whether anyone holds the named lock.
func (e *Engine) IsLocked(ctx context.Context, name string) (bool, error) {
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
// strictly with every acquisition of the lock's name, across engines and
// processes: it is the last fence plus one while the name's counter lives
// (WithFenceRetention after its last grant, 24h by default), and the
// server's clock in microseconds when the counter is gone (after the
// retention, or a restart without persistence), so fences are numbers of
// 16 digits: keep them in a 64-bit column. Pass Fence and Token to the
// resource the lock guards, which should admit a holder only if its fence
// is higher than the highest it has seen, or equal with the same token. A
// read-write lock's holds share one counter across readers and writers;
// several readers' fences are valid at once (see RLock).
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Lost returns a channel that closes when the engine finds the lock gone
// while it keeps it: the watchdog found it expired or taken, could not
// renew it before the lease ran out, or was stopped by Engine.Close; or a
// lock handed over to this waiter could not be confirmed. Without a
// watchdog, a confirmed lock's channel never closes (Context then ends
// with the lease); for a nil lock it is closed.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	return l.lostChan()
}

// Context returns a context derived from parent that is done when parent
// is, when the lock is released, or when it is lost: for a watchdog
// holder when a renewal finds it gone or the lease runs out unrenewed; for
// a holder without a watchdog also at the lease's end as the lock knows it
// now, less a tenth for the client's clock (its deadline; a later Extend
// does not move it: call Context again).
// Run the guarded work under it. For a nil lock it is done at once; a nil
// parent is taken as context.Background().
func (l *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if l == nil {
		return canceled(parent)
	}
	return l.context(parent)
}

// Unlock releases the lock and hands it to the first live waiter. It stops
// the watchdog first, so no renewal is sent after Unlock returns. It makes
// its attempt even when ctx is already done, bounded by ReleaseTimeout (or
// ctx's later deadline), so that defer l.Unlock(ctx) on a finished request
// still frees the lock. It returns an error wrapping ErrNotHeld if the
// lock had already expired or passed to another holder, whom it never
// disturbs.
func (l *Lock) Unlock(ctx context.Context) error {
	if l == nil {
		return errNilLock
	}
	return l.release(ctx)
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
	return l.extend(ctx, ttl)
}

// TTL returns the lock's remaining lease, as the server counts it, or an
// error wrapping ErrNotHeld if the lock is no longer this holder's.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, errNilLock
	}
	return l.ttl(ctx)
}

// Held reports whether this holder still holds the lock (false for a nil
// lock).
func (l *Lock) Held(ctx context.Context) (bool, error) {
	return held(l.TTL(ctx))
}

// LockInfo is what LockInfo tells of a lock.
type LockInfo struct {
	Held    bool
	Token   string        // the holder's token, "" when free
	Fence   int64         // the holder's fence
	TTL     time.Duration // the holder's remaining lease
	Waiting int           // live waiters queued
}

// LockInfo returns who holds the named lock, for how long, and how many
// live waiters are queued, in one script that writes nothing. (Read-write
// locks and single permits have no such call yet.)
func (e *Engine) LockInfo(ctx context.Context, name string) (LockInfo, error) {
	var info LockInfo
	obj, err := e.object(kindLock, name)
	if err != nil {
		return info, err
	}
	v, err := redis.Values(e.eval(ctx, obj, scriptLockInfo, obj.key(""), obj.key(":waiters")))
	if err == nil && len(v) != 4 {
		err = obj.errorf("unexpected reply %v", v)
	}
	if err != nil {
		return info, err
	}
	info.Token, _ = redis.String(v[0], nil)
	info.Held = info.Token != ""
	info.Fence, _ = redis.Int64(v[1], nil)
	ms, _ := redis.Int64(v[2], nil)
	info.TTL = time.Duration(max(ms, 0)) * time.Millisecond
	waiting, _ := redis.Int(v[3], nil)
	info.Waiting = waiting
	return info, nil
}

// ForceUnlock is an administrator's call: it frees the named lock whoever
// holds it, in one script, and hands it to the first live waiter (whose
// fence is higher). It reports false if the lock was free. The old
// holder's Unlock then returns ErrNotHeld, and its watchdog finds the lock
// gone at its next renewal (Lost closes, its Context ends). Whatever the
// old holder was doing is no longer guarded: use it for a holder that is
// known to be stuck, and let the guarded resource check fences.
func (e *Engine) ForceUnlock(ctx context.Context, name string) (bool, error) {
	obj, err := e.object(kindLock, name)
	if err != nil {
		return false, err
	}
	keys := lockOps.keys(obj)
	n, err := redis.Int64(e.eval(ctx, obj, scriptLockForce, append(keys, e.keepArg, e.wakeArg)...))
	return n == 1, err
}

// ---------------------------------------------------------------------------
// Read-write locks: many readers or one writer, in arrival order, on the
// same queue as locks; every hold is a *Lock with a lease of its own

// rwOps: the holds' lease deadlines (zset token -> server ms), their
// fences and renewal numbers (hash token -> "fence seq"), the fence
// counter, the queue and its waiters.
var rwOps = &holdOps{kind: kindRW, suffixes: []string{"", ":holds", ":fence", ":queue", ":waiters"},
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
	return e.lock(ctx, rwOps, "r-", name, o, true)
}

// TryRLock makes one attempt at a read hold of the named read-write lock:
// it returns an error wrapping ErrNotAcquired if a writer holds it or any
// live waiter is queued. o.Wait is not used.
func (e *Engine) TryRLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwOps, "r-", name, o, false)
}

// WLock takes the exclusive (write) hold of the named read-write lock,
// waiting up to o.Wait (default 10s) while anyone holds it or is queued
// ahead. When it is released, the whole run of readers at the head of the
// queue is let in at once. Otherwise as RLock.
func (e *Engine) WLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwOps, "w-", name, o, true)
}

// TryWLock makes one attempt at the write hold of the named read-write
// lock: it returns an error wrapping ErrNotAcquired if anyone holds it or
// any live waiter is queued. o.Wait is not used.
func (e *Engine) TryWLock(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	return e.lock(ctx, rwOps, "w-", name, o, false)
}

// ---------------------------------------------------------------------------
// Counting semaphores (Redis in Action §6.3: the fair semaphore, in one
// script, on the server's clock)

// SemaphoreOptions tunes one acquisition. The zero value means the
// defaults, Limit included once a limit is stored.
type SemaphoreOptions struct {
	Limit    int           // permits that may be held at once; 0 = the stored limit
	TTL      time.Duration // permit timeout; 0 = 10s
	Wait     time.Duration // how long AcquireSemaphore waits; 0 = 10s (TryAcquireSemaphore never waits)
	Watchdog bool          // refresh the permit every TTL/3 until Release or loss
}

// Permit is one held permit of a counting semaphore. Its methods are safe
// for concurrent use, and on a nil *Permit none panics: they report
// ErrNotHeld.
type Permit struct{ holding }

// semOps: the permits' deadlines (timeouts), their counters (owner), the
// counter, the stored limit, the queue and its waiters.
var semOps = &holdOps{kind: kindSem, suffixes: []string{"", ":owner", ":counter", ":limit", ":queue", ":waiters"},
	extendKeys: 6, pttlKeys: 2, acquire: scriptSemAcquire, abandon: scriptSemAbandon,
	release: scriptSemRelease, extend: scriptSemRefresh, pttl: scriptSemPTTL}

// AcquireSemaphore takes one permit of the named semaphore, for o.TTL
// (default 10s) unless refreshed, waiting up to o.Wait (default 10s) for
// one to come free. Waiters queue in arrival order and are handed permits
// as Lock's waiters are handed the lock. Errors are as Lock's: one
// wrapping ErrNotAcquired if no permit was the caller's in time. Permits
// time out by the server's clock; the caller's clock decides only when
// the holder stops trusting its permit (Lost), never who holds one.
//
// The limit is stored with the semaphore and rules: the first acquisition
// stores its Limit, and while it is stored an acquisition with another
// Limit follows the stored one; Limit 0 means "the stored limit" (an error
// wrapping ErrInvalid if none is stored). A limit stored by an acquisition
// goes with the last permit, so an idle semaphore takes a new one; one set
// by SetSemaphoreLimit stays while the semaphore is idle, until the fence
// retention.
func (e *Engine) AcquireSemaphore(ctx context.Context, name string, o SemaphoreOptions) (*Permit, error) {
	return e.semaphore(ctx, name, o, true)
}

// TryAcquireSemaphore makes one attempt at a permit of the named semaphore
// and returns an error wrapping ErrNotAcquired if none is free or live
// waiters are queued. o.Wait is not used. Otherwise as AcquireSemaphore.
func (e *Engine) TryAcquireSemaphore(ctx context.Context, name string, o SemaphoreOptions) (*Permit, error) {
	return e.semaphore(ctx, name, o, false)
}

func (e *Engine) semaphore(ctx context.Context, name string, o SemaphoreOptions, mayWait bool) (*Permit, error) {
	obj, err := e.object(kindSem, name)
	if err != nil {
		return nil, err
	}
	if o.Limit < 0 {
		return nil, obj.errorf("limit %d: must be 0 (the stored limit) or more: %w", o.Limit, ErrInvalid)
	}
	ttl, err := obj.duration("TTL", o.TTL, DefaultTTL)
	if err != nil {
		return nil, err
	}
	wait, err := obj.duration("Wait", o.Wait, DefaultWait)
	if err != nil {
		return nil, err
	}
	if !mayWait {
		wait = 0
	}
	token, err := newToken()
	if err != nil {
		return nil, obj.err(err)
	}
	p := &Permit{}
	if err := e.take(ctx, &p.holding, obj, semOps, token, ttl, wait, o.Watchdog, o.Limit); err != nil {
		return nil, err
	}
	return p, nil
}

// SemaphoreHolders returns how many permits of the named semaphore are
// live now, after dropping those past their deadline (their slots go to
// waiters).
func (e *Engine) SemaphoreHolders(ctx context.Context, name string) (int, error) {
	obj, err := e.object(kindSem, name)
	if err != nil {
		return 0, err
	}
	keys := semOps.keys(obj)
	n, err := redis.Int(e.eval(ctx, obj, scriptSemHolders, append(keys, e.keepArg, e.wakeArg)...))
	return n, err
}

// SemaphoreInfo is what SemaphoreInfo tells of a semaphore.
type SemaphoreInfo struct {
	Limit   int // the stored limit; 0 if none is stored
	Holders int // live permits
	Waiting int // live waiters queued
}

// SemaphoreInfo returns the named semaphore's stored limit, live permits
// and live waiters, in one script that writes nothing.
func (e *Engine) SemaphoreInfo(ctx context.Context, name string) (SemaphoreInfo, error) {
	var info SemaphoreInfo
	obj, err := e.object(kindSem, name)
	if err != nil {
		return info, err
	}
	v, err := redis.Ints(e.eval(ctx, obj, scriptSemInfo, obj.key(""), obj.key(":limit"), obj.key(":waiters")))
	if err == nil && len(v) != 3 {
		err = obj.errorf("unexpected reply %v", v)
	}
	if err != nil {
		return info, err
	}
	return SemaphoreInfo{Limit: v[0], Holders: v[1], Waiting: v[2]}, nil
}

// SetSemaphoreLimit is an administrator's call: it stores limit (>= 1) as
// the named semaphore's, also while permits are held (a rolling deploy
// that changes the limit). Raising it hands the new slots to queued
// waiters at once; lowering it admits nobody until the holders are under
// it (none is taken back). The limit stays while the semaphore is idle,
// until the fence retention has passed since this call or the last
// permit granted.
func (e *Engine) SetSemaphoreLimit(ctx context.Context, name string, limit int) error {
	obj, err := e.object(kindSem, name)
	if err != nil {
		return err
	}
	if limit < 1 {
		return obj.errorf("limit %d: must be at least 1: %w", limit, ErrInvalid)
	}
	keys := semOps.keys(obj)
	_, err = e.eval(ctx, obj, scriptSemLimit, append(keys, limit, e.keepArg, e.wakeArg)...)
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
	return p.release(ctx)
}

// Refresh restarts the permit's timeout (its TTL from now). It returns an
// error wrapping ErrNotHeld if the permit had already been released or
// timed out; it never brings such a permit back.
func (p *Permit) Refresh(ctx context.Context) error {
	if p == nil {
		return errNilPermit
	}
	return p.extend(ctx, 0)
}

// TTL returns the time left before the permit times out, as the server
// counts it, or an error wrapping ErrNotHeld if it was released or timed
// out.
func (p *Permit) TTL(ctx context.Context) (time.Duration, error) {
	if p == nil {
		return 0, errNilPermit
	}
	return p.ttl(ctx)
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

// ---------------------------------------------------------------------------
// Autocomplete (Redis in Action §6.1): a recent list, and prefix search on
// a sorted set

// AddRecent puts item at the front of the named recent list, removing any
// other copy, and keeps the newest N items (WithRecentCapacity, default
// 100). The item must not be empty.
func (e *Engine) AddRecent(ctx context.Context, list, item string) error {
	obj, err := e.recentItem(list, item)
	if err != nil {
		return err
	}
	_, err = e.eval(ctx, obj, scriptRecentAdd, obj.key(""), item, e.recentCap)
	return err
}

// RemoveRecent removes item from the named recent list; an absent item is
// not an error.
func (e *Engine) RemoveRecent(ctx context.Context, list, item string) error {
	obj, err := e.recentItem(list, item)
	if err != nil {
		return err
	}
	_, err = e.eval(ctx, obj, scriptRecentRemove, obj.key(""), item)
	return err
}

func (e *Engine) recentItem(list, item string) (object, error) {
	obj, err := e.object(kindRecent, list)
	if err == nil && item == "" {
		err = obj.errorf("empty item: %w", ErrInvalid)
	}
	return obj, err
}

// SuggestRecent returns up to limit items of the named recent list that
// match query, ignoring ASCII case, in three tiers: items equal to query,
// then items that start with it, then items that contain it elsewhere;
// each tier most recent first. The empty query matches every item, most
// recent first. The filtering happens on the server, in one script.
func (e *Engine) SuggestRecent(ctx context.Context, list, query string, limit int) ([]string, error) {
	obj, err := e.limited(kindRecent, list, limit)
	if err != nil {
		return nil, err
	}
	return redis.Strings(e.eval(ctx, obj, scriptRecentSuggest, obj.key(""), query, limit))
}

// limited checks an object's name and a result limit.
func (e *Engine) limited(k *kind, name string, limit int) (object, error) {
	obj, err := e.object(k, name)
	if err == nil && limit < 1 {
		err = obj.errorf("limit %d: must be at least 1: %w", limit, ErrInvalid)
	}
	return obj, err
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

func (e *Engine) members(ctx context.Context, s *redis.Script, set string, members []string) error {
	obj, err := e.object(kindMembers, set)
	if err != nil || len(members) == 0 {
		return err
	}
	args := make([]any, 0, len(members)+1)
	args = append(args, obj.key(""))
	for _, m := range members {
		args = append(args, m)
	}
	_, err = e.eval(ctx, obj, s, args...)
	return err
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
	obj, err := e.limited(kindMembers, set, limit)
	if err != nil {
		return nil, err
	}
	args := []any{obj.key(""), prefix, limit}
	if !e.plainSuggest.Load() {
		got, err := redis.Strings(e.eval(ctx, obj, scriptSuggestOOM, args...))
		if !shebangRefused(err) {
			return got, err
		}
		// The refusal changed nothing; the engine remembers it, so only its
		// first query pays the extra round trip.
		e.plainSuggest.Store(true)
	}
	return redis.Strings(e.eval(ctx, obj, scriptSuggest, args...))
}

// shebangRefused reports whether the server refused a script for its
// shebang line: before 7.0 Redis compiles "#!lua ..." as Lua and fails, as
// miniredis does; a server that knows shebangs but not a flag says so.
func shebangRefused(err error) bool {
	reply, ok := errorReply(err)
	return ok && (strings.Contains(string(reply), "Error compiling script") || strings.Contains(string(reply), "shebang"))
}

// ---------------------------------------------------------------------------
// Activity bitmaps: one bit per id per period, in shards of 1 MiB
// spread over a cluster; SETBIT, GETBIT, and BITOP OR or AND per shard

// MaxActiveID is the largest id a bitmap takes: any int64 >= 0 will do. Ids
// fall in shards of 8,388,096 consecutive ids, each a key of its own of 1
// MiB a period, so keep ids dense: each far-off id makes a shard of its
// own.
const MaxActiveID = 1<<63 - 1

// activeShardIDs is how many ids a shard holds: 2^23 - 512, so that a
// shard's 1,048,512 bytes and Redis's string header fill jemalloc's 1 MiB
// size class (2^23 ids would take the 1.25 MiB class). A shard is made
// whole at its first mark (a string that grows gets room for up to twice
// its length). A count's script per shard (BITOP over its periods,
// BITCOUNT) is short enough not to stall the server for others, and the
// seed's hundred million ids make 12 shards: enough to spread over a
// cluster's primaries, few enough that a count's round trips cost little
// beside its work. Shard and offset are computed here, not in Lua, whose
// numbers lose precision past 2^53.
const activeShardIDs = 1<<23 - 512

// activeIndexMemory bounds how many (group, period, shard) an engine
// remembers having put in their period's index; past it, each new one
// makes the engine forget another, whose next mark costs a round trip more.
const activeIndexMemory = 1 << 14

// activeParallel bounds how many shard scripts one count or MarkActiveMany
// runs at once.
const activeParallel = 8

// shardRef names one shard of a group's bitmap for one period.
type shardRef struct {
	group, period string
	shard         int64
}

// MarkActive marks id active in the group's bitmap for period (any bytes,
// such as "2026-11-21"): one round trip once the engine has indexed id's
// shard for the period. The first mark of a shard for a period puts the
// shard in the period's index first (one round trip more, to the group's
// slot).
func (e *Engine) MarkActive(ctx context.Context, group, period string, id int64) error {
	obj, err := e.activity(group, id)
	if err != nil {
		return err
	}
	return e.markShard(ctx, obj, period, id/activeShardIDs, []int64{id % activeShardIDs}, -1)
}

// MarkActiveMany marks every id active in the group's bitmap for period:
// one script per shard the ids fall in (at most 8 at once), after one that
// indexes the shards the engine has not indexed yet. A shard's ids go as a
// SETBIT each or, when there are many, as one run of bytes OR-ed in. Each
// shard's marks are atomic; if one shard's script fails the others' marks
// may stand (marking twice changes nothing: call again). A negative id
// fails the whole call before any I/O; with no ids it does nothing.
func (e *Engine) MarkActiveMany(ctx context.Context, group, period string, ids ...int64) error {
	obj, err := e.object(kindActivity, group)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := e.activity(group, id); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	offsets := map[int64][]int64{}
	isFresh := map[int64]bool{}
	var shards, fresh []int64
	for _, id := range ids {
		s := id / activeShardIDs
		if _, ok := offsets[s]; !ok {
			shards = append(shards, s)
			if !e.isIndexed(shardRef{group, period, s}) {
				fresh = append(fresh, s)
				isFresh[s] = true
			}
		}
		offsets[s] = append(offsets[s], id%activeShardIDs)
	}
	deadline := int64(-1)
	if len(fresh) > 0 {
		d, err := e.indexShards(ctx, obj, period, fresh...)
		if err != nil {
			return err
		}
		deadline = d
	}
	return e.eachShard(ctx, obj, shards, func(ctx context.Context, s int64) error {
		d := int64(-1)
		if isFresh[s] {
			d = deadline
		}
		return e.markShard(ctx, obj, period, s, offsets[s], d)
	})
}

// markShard sets bits at offsets in one shard of the group's bitmap for
// period. deadline is the period's as the index just gave it for this shard
// (0: none), or -1 if the caller did not index the shard: then the engine
// indexes it unless it remembers having done so. A remembered shard is
// marked but not created, so that one that is gone (its period ended, its
// index was lost) is indexed again before it is made anew.
func (e *Engine) markShard(ctx context.Context, obj object, period string, shard int64, offsets []int64, deadline int64) error {
	if deadline < 0 && !e.isIndexed(shardRef{obj.name, period, shard}) {
		d, err := e.indexShards(ctx, obj, period, shard)
		if err != nil {
			return err
		}
		deadline = d
	}
	script, args, at := shardMarks(obj, period, shard, offsets)
	args[at] = deadline
	n, err := redis.Int64(e.eval(ctx, obj, script, args...))
	if err != nil || n >= 0 {
		return err
	}
	if args[at], err = e.indexShards(ctx, obj, period, shard); err != nil {
		return err
	}
	_, err = e.eval(ctx, obj, script, args...)
	return err
}

// shardMarks is the script that sets offsets in one shard and its keys and
// arguments, the deadline's place among them left for the caller (at).
// Many offsets (64 or more, at least one in 8,192 bits of their span) go
// as one run of bytes OR-ed in with BITOP (bits_merge): a SETBIT costs the
// server about as much as a KiB of bytes to carry and OR. Others go as a
// SETBIT each (bits_mark).
func shardMarks(obj object, period string, shard int64, offsets []int64) (s *redis.Script, args []any, at int) {
	key := obj.shardKey(shard, ":"+period)
	lo, hi := slices.Min(offsets)/8, slices.Max(offsets)/8
	if len(offsets) >= 64 && hi-lo+1 <= 1024*int64(len(offsets)) {
		run := make([]byte, hi-lo+1)
		for _, o := range offsets {
			run[o/8-lo] |= 0x80 >> (o % 8) // SETBIT's order: bit 0 is the first byte's highest
		}
		return scriptBitsMerge, []any{key, obj.shardKey(shard, ""), nil, lo, run}, 2
	}
	args = make([]any, 0, 2+len(offsets))
	args = append(args, key, nil)
	for _, o := range offsets {
		args = append(args, o)
	}
	return scriptBitsMark, args, 1
}

// indexShards puts shards in the group's index for period and returns the
// period's deadline (ms since the epoch by the server's clock, 0 for none),
// which the period's first mark fixed.
func (e *Engine) indexShards(ctx context.Context, obj object, period string, shards ...int64) (int64, error) {
	args := make([]any, 0, 2+len(shards))
	args = append(args, obj.indexKey(period), e.activityTTL.Milliseconds())
	for _, s := range shards {
		args = append(args, s)
	}
	deadline, err := redis.Int64(e.eval(ctx, obj, scriptBitsIndex, args...))
	if err != nil {
		return 0, err
	}
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	if e.indexed == nil {
		e.indexed = map[shardRef]struct{}{}
	}
	for _, s := range shards {
		if len(e.indexed) >= activeIndexMemory {
			for old := range e.indexed { // an arbitrary one: map order is random
				delete(e.indexed, old)
				break
			}
		}
		e.indexed[shardRef{obj.name, period, s}] = struct{}{}
	}
	return deadline, nil
}

func (e *Engine) isIndexed(r shardRef) bool {
	e.indexedMu.Lock()
	defer e.indexedMu.Unlock()
	_, ok := e.indexed[r]
	return ok
}

// shardKey builds <ns>bits:{<group>:<shard>}<suffix> for an activity
// group. The shard number after the tag's last colon keeps the tag
// unambiguous whatever colons the group holds, and the key word keeps it
// apart from v2's <ns>active:{<group>}:<period> and from the period's
// index.
func (o object) shardKey(shard int64, suffix string) string {
	return o.ns + "bits:{" + o.name + ":" + strconv.FormatInt(shard, 10) + "}" + suffix
}

// indexKey builds <ns>bitindex:{<group>}:<period>, the shards an activity
// group's period has used.
func (o object) indexKey(period string) string {
	return o.ns + "bitindex:{" + o.name + "}:" + period
}

// IsActive reports whether id was marked active in the group for period:
// one round trip (GETBIT on id's shard).
func (e *Engine) IsActive(ctx context.Context, group, period string, id int64) (bool, error) {
	obj, err := e.activity(group, id)
	if err != nil {
		return false, err
	}
	n, err := redis.Int64(e.eval(ctx, obj, scriptBitsIs, obj.shardKey(id/activeShardIDs, ":"+period), id%activeShardIDs))
	return n == 1, err
}

// CountActive returns how many ids were active in at least one of the
// periods. It reads the periods' indexes (one round trip), then counts each
// shard used in any of them with BITOP OR and BITCOUNT on the server (one
// script a shard, at most 8 at once, in parallel across a cluster's nodes)
// and adds up. Each shard is counted atomically; marks made during the
// count may or may not be in it. At least one period is required.
func (e *Engine) CountActive(ctx context.Context, group string, periods ...string) (int64, error) {
	return e.countActive(ctx, group, "OR", periods)
}

// CountActiveAll returns how many ids were active in every one of the
// periods (BITOP AND: retention). As CountActive, but it counts only the
// shards that every period used.
func (e *Engine) CountActiveAll(ctx context.Context, group string, periods ...string) (int64, error) {
	return e.countActive(ctx, group, "AND", periods)
}

func (e *Engine) countActive(ctx context.Context, group, op string, periods []string) (int64, error) {
	obj, err := e.object(kindActivity, group)
	if err != nil {
		return 0, err
	}
	if len(periods) == 0 {
		return 0, obj.errorf("no periods: %w", ErrInvalid)
	}
	var distinct []string // a period named twice changes neither OR nor AND
	seen := make(map[string]bool, len(periods))
	for _, p := range periods {
		if !seen[p] {
			seen[p] = true
			distinct = append(distinct, p)
		}
	}
	args := make([]any, 0, len(distinct)+2)
	args = append(args, len(distinct))
	for _, p := range distinct {
		args = append(args, obj.indexKey(p))
	}
	shards, err := redis.Int64s(e.eval(ctx, obj, scriptBitsShards, append(args, op)...))
	if err != nil {
		return 0, err
	}
	var total atomic.Int64
	err = e.eachShard(ctx, obj, shards, func(ctx context.Context, s int64) error {
		args := make([]any, 0, len(distinct)+3)
		args = append(args, len(distinct)+1, obj.shardKey(s, "")) // the scratch key: no ':' after the tag
		for _, p := range distinct {
			args = append(args, obj.shardKey(s, ":"+p))
		}
		n, err := redis.Int64(e.eval(ctx, obj, scriptBitsCount, append(args, op)...))
		total.Add(n)
		return err
	})
	if err != nil {
		return 0, err
	}
	return total.Load(), nil
}

// eachShard runs f for every shard, up to activeParallel at once (fewer on
// a *redis.Pool whose MaxActive is small, so that one call cannot exhaust
// it), and returns the first error, which ends the other calls' contexts.
func (e *Engine) eachShard(ctx context.Context, obj object, shards []int64, f func(context.Context, int64) error) error {
	if len(shards) == 1 {
		return f(ctx, shards[0])
	}
	limit := activeParallel
	if p, ok := e.pool.(*redis.Pool); ok && p.MaxActive > 0 {
		limit = max(1, min(limit, p.MaxActive/2))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	slots := make(chan struct{}, limit)
	for i, s := range shards {
		slots <- struct{}{}
		if err := ctx.Err(); err != nil {
			once.Do(func() {
				first = obj.errorf("%d of %d shards not run: %w", len(shards)-i, len(shards), err)
			})
			break
		}
		wg.Add(1)
		go func(s int64) {
			defer func() { <-slots; wg.Done() }()
			if err := f(ctx, s); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(s)
	}
	wg.Wait()
	return first
}

// activity checks a group's name and an id.
func (e *Engine) activity(group string, id int64) (object, error) {
	obj, err := e.object(kindActivity, group)
	if err == nil && id < 0 {
		err = obj.errorf("id %d: must be at least 0: %w", id, ErrInvalid)
	}
	return obj, err
}
