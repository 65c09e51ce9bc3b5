package goredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

var (
	errClosed  = errors.New("goredis: connection closed")
	errPubSub  = errors.New("goredis: pub/sub and MONITOR are not supported on a pool connection; use the go-redis client's Subscribe")
	errNoReply = errors.New("goredis: Receive with no reply pending (pub/sub is not supported)")
)

// conn is one connection handed out by a Pool. Like a redigo connection it
// is for one goroutine at a time.
type conn struct {
	pool        *Pool
	exec        processor            // a pinned *redis.Conn, or a client that routes each command
	pinned      *redis.Conn          // the connection Close gives back; nil when not pinned
	cluster     *redis.ClusterClient // set when pinned by Bind: told when a slot moves
	readTimeout time.Duration
	deadlines   deadlines // go-redis's own bounds on a command, once pinned

	mu      sync.Mutex
	err     error    // set once: Close, or a failure of the connection
	queued  []*call  // sent, not flushed
	batches []*batch // flushed, replies not all received
	busy    int      // goroutines still using exec (flushes, cut-off calls)
	closed  bool     // Close was called: release pinned once busy is 0
	multi   bool     // inside MULTI
	watch   bool     // a WATCH is active
	tx      []*call  // the commands queued inside MULTI, for EXEC's reply
}

// batch is one Flush: its commands run as one go-redis pipeline.
type batch struct {
	calls []*call
	done  chan struct{} // closed when every reply is in
	next  int           // the reply Receive returns next
}

// Close reads the replies still pending, ends a transaction or a WATCH
// left open (as redigo's pool does), and gives the connection back to
// go-redis's pool; a broken connection is given back once its last command
// is done.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	healthy := c.err == nil
	c.mu.Unlock()
	var err error
	if healthy {
		_, err = c.Do("")
		c.mu.Lock()
		multi, watch := c.multi, c.watch
		c.mu.Unlock()
		if err == nil && multi {
			_, err = c.Do("DISCARD")
		} else if err == nil && watch {
			_, err = c.Do("UNWATCH")
		}
	}
	c.mu.Lock()
	c.closed = true
	if c.err == nil {
		c.err = errClosed
	}
	release := c.busy == 0
	c.mu.Unlock()
	if release {
		c.release()
	}
	return err
}

// release gives the pinned connection back to go-redis's pool (which
// discards it if go-redis found it broken).
func (c *conn) release() {
	if c.pinned != nil {
		c.pinned.Close()
	}
}

// begin and end count goroutines that use exec, so that Close gives the
// connection back only when the last is done.
func (c *conn) begin() {
	c.mu.Lock()
	c.busy++
	c.mu.Unlock()
}

func (c *conn) end() {
	c.mu.Lock()
	c.busy--
	release := c.busy == 0 && c.closed
	c.mu.Unlock()
	if release {
		c.release()
	}
}

// fail marks the connection broken, as redigo does on any error that is
// not an error reply; every later call returns the first such error.
func (c *conn) fail(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	return err
}

// Err is non-nil once the connection is closed or broken.
func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Do runs the command with context.Background().
func (c *conn) Do(name string, args ...interface{}) (interface{}, error) {
	return c.do(context.Background(), name, args)
}

// DoContext runs the command with ctx. If ctx ends first it returns
// ctx.Err() at once and, as redigo does, the connection is broken from then
// on; the command finishes in the background before Close gives the
// connection back.
func (c *conn) DoContext(ctx context.Context, name string, args ...interface{}) (interface{}, error) {
	if ctx.Done() == nil {
		return c.do(ctx, name, args)
	}
	if err := ctx.Err(); err != nil {
		return nil, c.fail(err)
	}
	type result struct {
		reply interface{}
		err   error
	}
	ch := make(chan result, 1)
	c.begin()
	c.pool.workers.run(func() {
		r, err := c.do(ctx, name, args)
		c.end() // before the answer, so that a Close right after it releases at once
		ch <- result{r, err}
	})
	select {
	case r := <-ch:
		return r.reply, r.err
	case <-ctx.Done():
		select {
		case r := <-ch: // finished at the same moment: keep its answer
			return r.reply, r.err
		default:
		}
		return nil, c.fail(ctx.Err())
	}
}

// DoWithTimeout runs the command, waiting at most timeout (0: no limit of
// its own) for the reply; a timeout breaks the connection, as in redigo.
// go-redis's ReadTimeout still bounds commands it does not know to block.
func (c *conn) DoWithTimeout(timeout time.Duration, name string, args ...interface{}) (interface{}, error) {
	if timeout <= 0 {
		return c.Do(name, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := c.DoContext(ctx, name, args...)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, c.timeout(timeout)
	}
	return r, err
}

// DoContextTimeout runs the command with ctx, waiting at most timeout (0:
// no limit of its own) for the reply: the engine's way in. go-redis and its
// hooks see ctx (so redisotel's span of the command is a child of the
// caller's span), and ctx being cancelled does not cut the command short
// once it is sent, as in go-redis itself: the call returns when the reply
// arrives or the timeout passes, and a timeout breaks the connection.
//
// The command runs on the caller's goroutine, with no handoff, when
// go-redis's own deadlines end it within timeout: on a pinned connection,
// either the client has ContextTimeoutEnabled (the deadline goes to
// go-redis in ctx), or its ReadTimeout, with one retry's backoff, is no
// longer than timeout and the command is small enough (under 64 KiB) to go
// into the socket's buffers without waiting. With go-redis's defaults (a
// 3s ReadTimeout) and the engine's, that is every acquisition (a 5s call
// timeout) but not a release (bounded by its 1s ReleaseTimeout).
// Otherwise (a timeout shorter than that, a blocking command, a connection
// go-redis routes) a worker runs it, as DoWithTimeout does.
func (c *conn) DoContextTimeout(ctx context.Context, timeout time.Duration, name string, args ...interface{}) (interface{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.fail(err) // a done context sends nothing
	}
	if timeout <= 0 {
		return c.do(context.WithoutCancel(ctx), name, args)
	}
	if ctxDeadline, ok := c.direct(timeout, name, args); ok {
		// go-redis reads ctx for its deadline only with ContextTimeoutEnabled,
		// and never interrupts a command on cancel.
		if dl, has := ctx.Deadline(); ctxDeadline && (!has || time.Until(dl) > timeout) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return c.do(ctx, name, args)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	r, err := c.DoContext(ctx, name, args...)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, c.timeout(timeout)
	}
	return r, err
}

// ReceiveContextTimeout is ReceiveWithTimeout for the engine, with the
// caller's context: ctx being cancelled does not cut the wait short. The
// pipeline it waits for (flushed by Flush, which has no context) runs on a
// worker with context.Background().
func (c *conn) ReceiveContextTimeout(ctx context.Context, timeout time.Duration) (interface{}, error) {
	if timeout <= 0 {
		return c.receive(context.Background())
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	r, err := c.receive(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, c.timeout(timeout)
	}
	return r, err
}

// deadlines is what go-redis's own deadlines let one command on a pinned
// connection take.
type deadlines struct {
	bound time.Duration // the ReadTimeout and one retry's backoff; 0: no bound
	ctx   bool          // ContextTimeoutEnabled: a deadline in the context bounds it
}

// maxDirectBytes is the largest command that DoContextTimeout runs on the
// caller's goroutine without the client's ContextTimeoutEnabled: smaller
// than any socket's buffers, so that writing it does not wait on a server
// that has stopped reading, and only go-redis's ReadTimeout bounds it.
const maxDirectBytes = 64 << 10

// deadlinesOf is deadlines for a client with options o. After a read
// timeout go-redis retries once, after its first backoff (less than three
// MinRetryBackoff, at most MaxRetryBackoff), and finds the pinned
// connection broken.
func deadlinesOf(o *redis.Options) deadlines {
	d := deadlines{ctx: o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0}
	if o.ReadTimeout > 0 && o.WriteTimeout >= 0 {
		d.bound = o.ReadTimeout
		if o.MaxRetries > 0 {
			d.bound += min(3*o.MinRetryBackoff, o.MaxRetryBackoff)
		}
	}
	return d
}

// direct reports whether go-redis's own deadlines end the command within
// timeout, so that it can run on the caller's goroutine, and whether that
// takes the deadline in the context (ContextTimeoutEnabled).
func (c *conn) direct(timeout time.Duration, name string, args []interface{}) (ctxDeadline, ok bool) {
	c.mu.Lock()
	pinned, d, queued := c.pinned != nil, c.deadlines, len(c.queued) > 0 || len(c.batches) > 0
	c.mu.Unlock()
	switch {
	case !pinned || queued || isBlocking(name):
		return false, false
	case d.ctx:
		return true, true
	}
	if d.bound <= 0 || d.bound > timeout {
		return false, false
	}
	n := len(name)
	for _, a := range args {
		switch a := a.(type) {
		case string:
			n += len(a)
		case []byte:
			n += len(a)
		default:
			n += 24
		}
	}
	return false, n < maxDirectBytes
}

// isBlocking reports whether the server may hold back the reply of the
// command name (go-redis then waits longer than its ReadTimeout).
func isBlocking(name string) bool {
	switch strings.ToUpper(name) {
	case "WAIT", "WAITAOF", "BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BZPOPMIN", "BZPOPMAX",
		"BLMPOP", "BZMPOP", "XREAD", "XREADGROUP":
		return true
	}
	return false
}

// timeout is the error of a wait that ran out, as redigo's i/o timeout is:
// errors.Is(err, os.ErrDeadlineExceeded).
func (c *conn) timeout(d time.Duration) error {
	c.mu.Lock()
	c.err = fmt.Errorf("goredis: no reply within %v: %w", d, errDeadline)
	err := c.err
	c.mu.Unlock()
	return err
}

// do is Do: commands sent before and not yet received are flushed and read
// first; the reply is the command's, the error the first error reply among
// all of them (redigo's rule). With name "" it returns the pending replies.
func (c *conn) do(ctx context.Context, name string, args []interface{}) (interface{}, error) {
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		return nil, err
	}
	var cl *call
	if name != "" {
		var err error
		if cl, err = c.newCall(name, args, false); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	batches, queued := c.batches, c.queued
	c.batches, c.queued = nil, nil
	c.mu.Unlock()

	if cl != nil && len(batches) == 0 && len(queued) == 0 {
		c.run(ctx, []*call{cl})
		if cl.err != nil {
			return nil, c.fail(cl.err)
		}
		if e, ok := cl.reply.(redigo.Error); ok {
			return e, e
		}
		return cl.reply, nil
	}

	var pending []*call
	for _, b := range batches {
		<-b.done
		pending = append(pending, b.calls[b.next:]...)
	}
	run := queued
	if cl != nil {
		run = append(run, cl)
	}
	if len(run) > 0 {
		c.run(ctx, run)
	}
	pending = append(pending, queued...)
	if cl == nil {
		if len(pending) == 0 {
			return nil, nil
		}
		replies := make([]interface{}, len(pending))
		for i, p := range pending {
			if p.err != nil {
				return nil, c.fail(p.err)
			}
			replies[i] = p.reply
		}
		return replies, nil
	}
	var first error
	for _, p := range append(pending, cl) {
		if p.err != nil {
			return nil, c.fail(p.err)
		}
		if e, ok := p.reply.(redigo.Error); ok && first == nil {
			first = e
		}
	}
	return cl.reply, first
}

// Send queues a command; Flush sends what is queued.
func (c *conn) Send(name string, args ...interface{}) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	cl, err := c.newCall(name, args, true)
	if err != nil {
		return err
	}
	c.queued = append(c.queued, cl)
	return nil
}

// Flush sends the queued commands, as one go-redis pipeline on the
// connection, and returns without waiting for their replies: Receive
// returns them in order. A pipeline holding a WAIT or a blocking pop that
// may outlast the client's ReadTimeout runs its commands one by one.
func (c *conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.flushLocked()
	return nil
}

func (c *conn) flushLocked() {
	if len(c.queued) == 0 {
		return
	}
	b := &batch{calls: c.queued, done: make(chan struct{})}
	var prev chan struct{}
	if n := len(c.batches); n > 0 {
		prev = c.batches[n-1].done
	}
	c.batches = append(c.batches, b)
	c.queued = nil
	c.busy++
	c.pool.workers.run(func() {
		if prev != nil {
			<-prev // pipelines run in the order they were flushed
		}
		c.run(context.Background(), b.calls)
		c.end()
		close(b.done)
	})
}

// Receive returns the next reply of the flushed commands (flushing first
// if commands are queued). An error reply is returned as the error.
func (c *conn) Receive() (interface{}, error) {
	return c.receive(context.Background())
}

// ReceiveContext is Receive that gives up when ctx ends, breaking the
// connection as redigo does.
func (c *conn) ReceiveContext(ctx context.Context) (interface{}, error) {
	return c.receive(ctx)
}

// ReceiveWithTimeout is Receive that waits at most timeout (0: no limit of
// its own).
func (c *conn) ReceiveWithTimeout(timeout time.Duration) (interface{}, error) {
	if timeout <= 0 {
		return c.receive(context.Background())
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := c.receive(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, c.timeout(timeout)
	}
	return r, err
}

func (c *conn) receive(ctx context.Context) (interface{}, error) {
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.flushLocked()
	if len(c.batches) == 0 {
		c.mu.Unlock()
		return nil, errNoReply
	}
	b := c.batches[0]
	c.mu.Unlock()

	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, c.fail(ctx.Err())
	}

	c.mu.Lock()
	cl := b.calls[b.next]
	b.next++
	if b.next == len(b.calls) {
		c.batches = c.batches[1:]
	}
	c.mu.Unlock()
	if cl.err != nil {
		return nil, c.fail(cl.err)
	}
	if e, ok := cl.reply.(redigo.Error); ok {
		return nil, e
	}
	return cl.reply, nil
}

// newCall builds a call and follows the transaction state, with c.mu held.
func (c *conn) newCall(name string, args []interface{}, copyBytes bool) (*call, error) {
	cl := newCall(name, args, copyBytes)
	switch cl.name {
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR":
		return nil, errPubSub
	case "MULTI":
		c.multi, c.tx = true, nil
	case "EXEC":
		cl.tx, c.tx = c.tx, nil
		c.multi, c.watch = false, false
	case "DISCARD":
		c.multi, c.watch, c.tx = false, false, nil
	case "WATCH":
		c.watch = true
	case "UNWATCH":
		c.watch = false
	default:
		if c.multi {
			cl.queued = true
			c.tx = append(c.tx, cl)
		}
	}
	return cl, nil
}

// run runs calls on exec and fills in their replies: one command alone,
// several as one pipeline, or one by one when a pipeline could not wait
// long enough for one of them.
func (c *conn) run(ctx context.Context, calls []*call) {
	pl, ok := c.exec.(pipeliner)
	if len(calls) == 1 || !ok || c.anyLong(calls) {
		for i, cl := range calls {
			c.runOne(ctx, cl)
			if cl.err != nil {
				for _, rest := range calls[i+1:] {
					rest.err = cl.err
				}
				return
			}
		}
		return
	}
	pipe := pl.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, cl := range calls {
		cmds[i] = redis.NewCmd(ctx, cl.args...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	for i, cl := range calls {
		cl.finish(cmds[i].Val(), cmds[i].Err())
	}
	c.checkMoved(calls)
}

func (c *conn) anyLong(calls []*call) bool {
	for _, cl := range calls {
		if cl.long(c.readTimeout) {
			return true
		}
	}
	return false
}

// runOne runs one command. A blocking command whose block may outlast the
// client's ReadTimeout goes through go-redis's typed method, which waits
// for the block.
func (c *conn) runOne(ctx context.Context, cl *call) {
	switch {
	case !cl.long(c.readTimeout):
		cmd := redis.NewCmd(ctx, cl.args...)
		_ = c.exec.Process(ctx, cmd)
		cl.finish(cmd.Val(), cmd.Err())
	case !c.runTyped(ctx, cl):
		// A reply go-redis would give up on: refuse rather than break the
		// connection after ReadTimeout.
		cl.reply = redigo.Error(fmt.Sprintf("goredis: %s may block for %s, longer than the client's ReadTimeout (%v) allows: raise ReadTimeout", cl.name, cl.block, c.readTimeout))
		return
	}
	c.checkMoved([]*call{cl})
}

// runTyped runs the blocking commands go-redis has typed methods for that
// send the command as given and give the reply back whole; it reports
// false when this go-redis has no such method for the command.
func (c *conn) runTyped(ctx context.Context, cl *call) bool {
	b := cl.block
	if !b.typed {
		return false
	}
	keys := cl.stringArgs()
	switch cl.name {
	case "WAIT":
		x, ok := c.exec.(waiter)
		if !ok {
			return false
		}
		cmd := x.Wait(ctx, b.ints[0], b.d)
		cl.finish(cmd.Val(), cmd.Err())
	case "WAITAOF":
		x, ok := c.exec.(waitAOFer)
		if !ok {
			return false
		}
		cmd := x.WaitAOF(ctx, b.ints[0], b.ints[1], b.d)
		var v interface{}
		if s := cmd.Val(); s != nil {
			v = int64s(s)
		}
		cl.finish(v, cmd.Err())
	case "BLPOP", "BRPOP":
		var cmd *redis.StringSliceCmd
		if x, ok := c.exec.(blPopper); ok && cl.name == "BLPOP" {
			cmd = x.BLPop(ctx, b.d, keys[1:len(keys)-1]...)
		} else if x, ok := c.exec.(brPopper); ok && cl.name == "BRPOP" {
			cmd = x.BRPop(ctx, b.d, keys[1:len(keys)-1]...)
		} else {
			return false
		}
		var v interface{}
		if s := cmd.Val(); s != nil {
			v = toInterfaces(s)
		}
		cl.finish(v, cmd.Err())
	case "BRPOPLPUSH":
		x, ok := c.exec.(brPopLPusher)
		if !ok {
			return false
		}
		cmd := x.BRPopLPush(ctx, keys[1], keys[2], b.d)
		cl.finish(cmd.Val(), cmd.Err())
	case "BLMOVE":
		x, ok := c.exec.(blMover)
		if !ok {
			return false
		}
		cmd := x.BLMove(ctx, keys[1], keys[2], keys[3], keys[4], b.d)
		cl.finish(cmd.Val(), cmd.Err())
	default:
		return false
	}
	return true
}

func int64s(s []int64) []interface{} {
	out := make([]interface{}, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func toInterfaces(s []string) []interface{} {
	out := make([]interface{}, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// checkMoved notes the new owner of a slot when a connection pinned by
// Bind is told that the slot has moved, so that the next Bind finds it.
func (c *conn) checkMoved(calls []*call) {
	if c.cluster == nil {
		return
	}
	for _, cl := range calls {
		if e, ok := cl.reply.(redigo.Error); ok && strings.HasPrefix(string(e), "MOVED ") {
			if f := strings.Fields(string(e)); len(f) == 3 {
				if slot, err := strconv.Atoi(f[1]); err == nil {
					c.pool.noteMoved(slot, f[2])
				}
			}
		}
	}
}
