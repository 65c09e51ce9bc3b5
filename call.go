package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"
)

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

// conn is a pooled connection for one call. Its Do and Receive end when
// the reply arrives or after timeout, the call's deadline (the caller's, or
// the call timeout), as a read timeout: never a goroutine per command, as
// redigo's DoContext would start, so a call under a cancellable ctx costs
// what one under a Background ctx does. A ctx cancelled mid-command does
// not interrupt it (go-redis does the same); every wait ends at once. A
// connection that takes the caller's context with the timeout
// (contextTimeoutConn: the goredis adapter's) gets ctx, for its client's
// hooks.
type conn struct {
	redis.Conn
	ctx     context.Context
	timeout time.Duration
	bound   bool // bound to a cluster node by key
}

// contextTimeoutConn is a connection that runs a command with the caller's
// context, bounded by a timeout and not cut short by the context's
// cancellation: the goredis adapter's connections, which hand the context
// to go-redis (its hooks, redisotel's spans) with no worker per command.
type contextTimeoutConn interface {
	DoContextTimeout(ctx context.Context, timeout time.Duration, cmd string, args ...any) (any, error)
	ReceiveContextTimeout(ctx context.Context, timeout time.Duration) (any, error)
}

func (c *conn) Do(cmd string, args ...any) (any, error) {
	switch cc := c.Conn.(type) {
	case contextTimeoutConn:
		return cc.DoContextTimeout(c.ctx, c.timeout, cmd, args...)
	case redis.ConnWithTimeout:
		return cc.DoWithTimeout(c.timeout, cmd, args...)
	}
	return c.Conn.Do(cmd, args...)
}

func (c *conn) Receive() (any, error) {
	switch cc := c.Conn.(type) {
	case contextTimeoutConn:
		return cc.ReceiveContextTimeout(c.ctx, c.timeout)
	case redis.ConnWithTimeout:
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
// any other it is a no-op). Getting it (the pool's wait, and a dial with
// its AUTH, SELECT or CLIENT SETNAME), and its round trips, end when ctx
// does or after timeout. The caller closes it (close).
func (e *Engine) conn(ctx context.Context, key string, timeout time.Duration) (*conn, error) {
	dl, bounded := ctx.Deadline()
	if bounded {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		return nil, errSpent
	}
	get := ctx
	if e.getMayWait() && (!bounded || time.Until(dl) > timeout) {
		var cancel context.CancelFunc
		get, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	pc, err := e.pool.GetContext(get)
	if err != nil {
		if get != ctx && ctxErr(ctx) == nil && errors.Is(err, context.DeadlineExceeded) {
			// our bound, not the caller's: no context.DeadlineExceeded
			cause := os.ErrDeadlineExceeded
			if err != context.DeadlineExceeded { // a dial's, say: its text kept
				cause = fmt.Errorf("%w (%v)", os.ErrDeadlineExceeded, err)
			}
			return nil, e.boundErr(timeout, timeout, "no connection from the pool", cause)
		}
		return nil, err
	}
	b, bound := pc.(binder)
	if bound && key != "" {
		if err := b.Bind(key); err != nil {
			pc.Close()
			return nil, err
		}
	}
	c := conns.Get().(*conn)
	*c = conn{Conn: pc, ctx: ctx, timeout: timeout, bound: bound}
	return c, nil
}

// getMayWait reports whether getting a connection from the pool may wait
// on something only a context bounds: a *redis.Pool's dial through
// DialContext (its AUTH, SELECT or CLIENT SETNAME included), its Wait for
// a connection to come back once MaxActive are out, or a pool of any other
// type (which may do anything). A *redis.Pool's plain Dial is bounded by
// its own dial timeouts.
func (e *Engine) getMayWait() bool {
	p, ok := e.pool.(*redis.Pool)
	return !ok || p.DialContext != nil || p.Wait && p.MaxActive > 0 && p.ActiveCount() >= p.MaxActive
}

// errSpent is a call's error when the engine's bound for it (a release's
// deadline, an abandon's) ran out before it could be sent, the caller's
// ctx still live.
var errSpent = fmt.Errorf("no time left of the call's bound to send it: %w", os.ErrDeadlineExceeded)

// boundErr is the error of a call that a bound of the engine's ended,
// the caller's ctx still live (else the error wraps ctx.Err()): it says
// which bound (the call timeout, WithCallTimeout; a release's or an
// abandon's own; or the client's read timeout, when that came first) and
// wraps err, an i/o timeout (os.ErrDeadlineExceeded), never
// context.DeadlineExceeded, which means the caller's ctx ended.
func (e *Engine) boundErr(timeout, took time.Duration, what string, err error) error {
	switch {
	case took > 0 && took < timeout*9/10:
		return fmt.Errorf("%s after %v, within the call's bound of %v: the client's own read timeout: %w", what, took.Round(time.Millisecond), timeout, err)
	case timeout == e.callTimeout:
		return fmt.Errorf("%s within the engine's call timeout (%v, WithCallTimeout): %w", what, timeout, err)
	}
	return fmt.Errorf("%s within the call's bound (%v): %w", what, timeout, err)
}

// timedOut reports whether err is a network timeout (an i/o timeout).
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
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

// call runs s on a connection bound to its first key: EVALSHA, loading
// the script with SCRIPT LOAD when the server answers NOSCRIPT; with ack (WithReplicaAck
// on) followed by WAIT in the same round trip. timeout bounds each round
// trip (0: the call timeout). A MOVED reply (the slot moved, or a replica
// was promoted) means the script did not run: the call follows it on a
// fresh connection, which binds by the cluster's updated map, up to
// maxRedirects times. ASK (the slot is mid-migration) is not followed: a
// bound connection cannot send ASKING, so the error is returned, and it is
// transient: a wait retries it until the slot settles.
func (e *Engine) call(ctx context.Context, s *script, keysAndArgs []any, ack bool, timeout time.Duration) (out outcome, err error) {
	if ctx == nil {
		return out, errNilContext
	}
	if timeout == 0 {
		timeout = e.callTimeout
	}
	key := routeKey(keysAndArgs)
	var clock *int64 // a history test's call: the script clocked
	if c := e.clocked[s]; c != nil {
		if clock = clockOf(ctx); clock != nil {
			s = c
		}
	}
	for redirects := 0; ; redirects++ {
		// redigo sends a command even on a done context, so check first.
		if err := ctxErr(ctx); err != nil {
			return out, err
		}
		sent := time.Now()
		c, err := e.conn(ctx, key, timeout)
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
		if redirects < maxRedirects && bound && replyIs(err, "MOVED") {
			continue
		}
		if err != nil {
			out.reply = nil
			if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
				// redigo reports a deadline hit mid-command as an i/o timeout.
				return out, fmt.Errorf("%w (%w)", cerr, err)
			}
			if ctxErr(ctx) == nil && timedOut(err) {
				return out, e.boundErr(timeout, time.Since(sent), "no reply", err)
			}
			return out, err
		}
		if clock != nil {
			if out.reply, err = unclock(out.reply, clock); err != nil {
				return out, err
			}
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
// NOSCRIPT it sends SCRIPT LOAD, EVALSHA and WAIT together, and then, as
// evalsha, EVAL. err is the script's failure,
// ackErr WAIT's.
func (e *Engine) evalWait(c *conn, s *script, keysAndArgs []any) (reply any, acks int64, ackErr, err error) {
	h, err := s.sha(c)
	if err != nil {
		return nil, 0, nil, err
	}
	args := s.args(h, keysAndArgs)
	for try := 0; ; try++ {
		cmd := "EVALSHA"
		switch try {
		case 1: // NOSCRIPT: SCRIPT LOAD in the same write, as evalsha
			if err := c.Send("SCRIPT", "LOAD", s.src); err != nil {
				return nil, 0, nil, err
			}
		case 2: // and if a SCRIPT FLUSH came between them, the body
			cmd, args[0] = "EVAL", s.src
		}
		if err := c.Send(cmd, args...); err != nil {
			return nil, 0, nil, err
		}
		if err := c.Send("WAIT", e.replicas, e.ackTimeout.Milliseconds()); err != nil {
			return nil, 0, nil, err
		}
		if err := c.Flush(); err != nil {
			return nil, 0, nil, err
		}
		var loadErr error
		if try == 1 {
			if _, loadErr = c.Receive(); loadErr != nil {
				if _, isReply := errorReply(loadErr); !isReply {
					return nil, 0, nil, loadErr
				}
			}
		}
		reply, err = c.Receive()
		acks, ackErr = redis.Int64(c.Receive())
		if loadErr != nil {
			err = loadErr
		}
		if try == 2 || !replyIs(err, "NOSCRIPT") {
			return reply, acks, ackErr, err
		}
	}
}

// eval is call for a script whose reply is all there is to it, its errors
// naming the object.
func (e *Engine) eval(ctx context.Context, o object, s *script, keysAndArgs ...any) (any, error) {
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
	return transient(err) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, context.DeadlineExceeded) || timedOut(err)
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

// clockKey is the context key of withClock's slot.
type clockKey struct{}

// withClock is ctx carrying a slot where a call of an engine whose scripts
// are clocked (Engine.clocked, for the history tests) stores the server's
// clock in ms when its script began.
func withClock(ctx context.Context, at *int64) context.Context {
	return context.WithValue(ctx, clockKey{}, at)
}

func clockOf(ctx context.Context) *int64 {
	at, _ := ctx.Value(clockKey{}).(*int64)
	return at
}

// unclock takes a clocked script's reply apart: {clock, reply}. An error
// the script replied comes back as the error the script alone would have
// given.
func unclock(reply any, at *int64) (any, error) {
	v, _ := reply.([]any)
	if len(v) == 0 || len(v) > 2 {
		return nil, fmt.Errorf("unexpected clocked reply %v", reply)
	}
	ms, ok := v[0].(int64)
	if !ok {
		return nil, fmt.Errorf("unexpected clocked reply %v", reply)
	}
	*at = ms
	if len(v) == 1 {
		return nil, nil
	}
	if err, ok := v[1].(redis.Error); ok {
		return nil, err
	}
	return v[1], nil
}
