package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	hook        Hook          // WithHook
	hookObserve func(Event)   // WithHook's Observe, when it has one
	logger      *slog.Logger  // WithLogger

	id           string                            // names this engine's wake channel
	idArg        any                               // id, as the scripts take it
	wakeArg      any                               // <ns>wake:, the channels' prefix, as the scripts take it
	retentionArg any                               // the fence retention in ms, as the scripts take it
	clustered    atomic.Bool                       // a script over several slots was refused (CROSSSLOT): LockAll goes one name at a time
	queueTTL     time.Duration                     // a queue entry's lifetime unless extended
	subIdle      time.Duration                     // how long the wake subscription outlives the last waiter
	queuedHook   func(token string, arrival int64) // tests: hears the arrival number the server gave each new queue entry
	clocked      map[*script]*script               // tests: scripts sent clocked instead (call.go's withClock)
	wake         waker

	mu         sync.Mutex
	closed     bool            // under mu, for goTracked
	shut       atomic.Bool     // closed, read without mu
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
// wrapping ErrClosed, and every lock and permit the engine still holds is
// released (its Lost closes; an Unlock or Release then returns nil, its
// other calls ErrClosed), within ctx's deadline or ReleaseTimeout; then it
// waits, until ctx ends, for its background work. An error names what did
// not finish. It is safe to call more than once. See "Closing" in the
// package doc.
func (e *Engine) Close(ctx context.Context) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{"", "", "Close"}, e.shutDown)
	}
	return e.shutDown(ctx)
}

// shutDown is Close.
func (e *Engine) shutDown(ctx context.Context) error {
	if e == nil || e.stop == nil {
		return e.usable()
	}
	if ctx == nil {
		return &Error{Err: errNilContext}
	}
	e.mu.Lock()
	e.closed = true
	e.shut.Store(true)
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

func (e *Engine) isClosed() bool { return e.shut.Load() }

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
