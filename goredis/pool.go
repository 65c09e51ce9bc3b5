// Package goredis runs atomicredis on a go-redis v9 client: NewPool wraps
// the client a service already has, and the Engine takes connections from
// it as it would from a redigo pool.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	e := atomicredis.New(goredis.NewPool(rdb))
//	l, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{})
//
// A connection it hands out behaves as a redigo connection does: replies
// come as redigo gives them over RESP2 (bulk strings as []byte, integers as
// int64, arrays as []interface{}, a nil reply as nil with a nil error, an
// error reply as redigo's redis.Error), and only a failure of the
// connection itself is any other error. On a single-node or failover
// client it is one go-redis connection, pinned from the first command to
// Close, which gives it back to the client's pool; on a cluster client,
// Bind pins it (see NewPool).
//
// The client may speak RESP3 (go-redis's default) or RESP2 (Protocol: 2).
// RESP3 replies are mapped to their exact RESP2 form: a boolean as 1 or 0,
// a set as an array, a big number or a verbatim string as a bulk string. A
// map or a double has no exact RESP2 form (go-redis drops a map's order and
// a double's text), so such a reply is an error that names Protocol: 2 and
// ends the connection; the engine's scripts never send one.
//
// go-redis gives simple-status and bulk replies alike as Go strings. A
// connection returns a string (as redigo does) for the reply of a command
// that answers with a status (SET, PING, TYPE, MULTI, "QUEUED" in a
// transaction, the statuses in EXEC's reply, ...), and []byte for
// everything else. A script that returns a status (redis.status_reply) is
// the one case it cannot tell: that reply comes as []byte. redigo's
// helpers (String, Bytes, Strings, ...) accept either.
//
// go-redis gives up on a reply after its ReadTimeout (3s by default) unless
// it knows the command blocks. WAIT, WAITAOF (go-redis v9.22 and later),
// and BLPOP, BRPOP, BRPOPLPUSH and BLMOVE with a whole-second timeout go
// through go-redis's typed methods, which wait for the block; any other
// command that may block longer than ReadTimeout allows is refused, with a
// redis.Error, before it is sent. Pub/sub and MONITOR are refused too: the
// engine subscribes through Pool.Subscribe.
package goredis

import (
	"context"
	"errors"
	"sync"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// Pool hands out connections of a go-redis client; it satisfies
// atomicredis.Pool. Make one with NewPool.
type Pool struct {
	client      redis.UniversalClient
	single      *redis.Client        // a single-node or failover client
	cluster     *redis.ClusterClient // a cluster (or failover cluster) client
	readTimeout time.Duration        // the client's ReadTimeout; <= 0: none
	deadlines   deadlines            // a single-node client's, for its pinned connections

	workers workers // run DoContext's commands

	mu    sync.Mutex
	moved map[int]string // slot -> the address a MOVED reply named, until a Bind heeds it
}

// NewPool returns a Pool over c, which it shares and never closes. Close
// the Pool when done with it: it stops the Pool's background workers.
//
// With a *redis.Client (redis.NewClient, redis.NewFailoverClient) each
// connection is one pooled connection of the client (Client.Conn), so a
// WAIT or a blocking pop runs on the connection that ran the script.
//
// With a *redis.ClusterClient each connection first routes every command
// by go-redis's own cluster routing (EVALSHA and EVAL by their first key,
// following MOVED and ASK). Its Bind(keys ...string) error pins it to one
// pooled connection of the primary that owns the keys' slot, so that what
// follows (a WAIT, a blocking pop) runs where the script ran. On a bound
// connection a MOVED or ASK reply is returned, as a redis.Error, like any
// other error reply; the next Bind to that slot pins the node the MOVED
// reply named.
//
// Any other UniversalClient (a Ring) routes every command itself; its
// connections are not pinned.
func NewPool(c redis.UniversalClient) *Pool {
	p := &Pool{client: c, readTimeout: 3 * time.Second}
	switch c := c.(type) {
	case nil:
		return p
	case *redis.Client:
		if c == nil {
			p.client = nil
			return p
		}
		p.single, p.readTimeout, p.deadlines = c, c.Options().ReadTimeout, deadlinesOf(c.Options())
	case *redis.ClusterClient:
		if c == nil {
			p.client = nil
			return p
		}
		p.cluster, p.readTimeout = c, c.Options().ReadTimeout
	case *redis.Ring:
		if c == nil {
			p.client = nil
			return p
		}
		p.readTimeout = c.Options().ReadTimeout
	}
	return p
}

var (
	errNilClient  = errors.New("goredis: NewPool was given a nil client")
	errPoolClosed = errors.New("goredis: get on a closed Pool")
)

// Close stops the Pool's background workers, which run the commands of
// DoContext and Flush, and makes GetContext fail from then on. It returns
// once the idle workers have exited; a worker still running a command
// exits when the command is done. Close the Engine first (Engine.Close
// waits for its background work), and the go-redis client, which the Pool
// shares and never closes, after. Close always returns nil.
func (p *Pool) Close() error {
	if p == nil {
		return nil
	}
	p.workers.close()
	return nil
}

// GetContext returns a connection: a redigo redis.Conn that also satisfies
// redis.ConnWithContext and redis.ConnWithTimeout, has the engine's way in
// (DoContextTimeout and ReceiveContextTimeout: the caller's context for
// go-redis, a timeout for the reply), and, on a cluster client, has
// Bind(keys ...string) error. It returns ctx.Err() if ctx is
// done, and an error once the Pool is closed. The caller must Close the
// connection.
func (p *Pool) GetContext(ctx context.Context) (redigo.Conn, error) {
	if p == nil || p.client == nil {
		return nil, errNilClient
	}
	if p.workers.isClosed() {
		return nil, errPoolClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case p.single != nil:
		pc := p.single.Conn()
		return &conn{pool: p, exec: pc, pinned: pc, readTimeout: p.readTimeout, deadlines: p.deadlines}, nil
	case p.cluster != nil:
		return &clusterConn{conn: conn{pool: p, exec: p.cluster, readTimeout: p.readTimeout}, client: p.cluster, ctx: ctx}, nil
	}
	return &conn{pool: p, exec: p.client, readTimeout: p.readTimeout}, nil
}

// The go-redis methods a connection calls, each an interface of its own
// that a pinned *redis.Conn or a client is asked for when the command
// comes: a method whose signature a go-redis release changes (WaitAOF's
// reply became an *IntSliceCmd in v9.22) costs the command that uses it
// its typed path, never the build. TestTypedMethods says which the
// go-redis in use offers.
type (
	// processor runs any command: every connection has it.
	processor interface {
		Process(ctx context.Context, cmd redis.Cmder) error
	}
	pipeliner interface {
		Pipeline() redis.Pipeliner
	}
	waiter interface {
		Wait(ctx context.Context, numSlaves int, timeout time.Duration) *redis.IntCmd
	}
	// waitAOFer is go-redis v9.22 and later; before, WaitAOF parsed the
	// reply as one integer, which WAITAOF's array is not.
	waitAOFer interface {
		WaitAOF(ctx context.Context, numLocal, numSlaves int, timeout time.Duration) *redis.IntSliceCmd
	}
	blPopper interface {
		BLPop(ctx context.Context, timeout time.Duration, keys ...string) *redis.StringSliceCmd
	}
	brPopper interface {
		BRPop(ctx context.Context, timeout time.Duration, keys ...string) *redis.StringSliceCmd
	}
	brPopLPusher interface {
		BRPopLPush(ctx context.Context, source, destination string, timeout time.Duration) *redis.StringCmd
	}
	blMover interface {
		BLMove(ctx context.Context, source, destination, srcpos, destpos string, timeout time.Duration) *redis.StringCmd
	}
)

// workers run commands in the background: for DoContext (and the engine's
// DoContextTimeout where go-redis cannot bound a command), whose caller
// must be free to give up when its context ends, and for Flush, which
// returns before the replies are in. A worker waits a while for the next
// command before it exits, so its stack, grown by go-redis's deep call
// path, serves many commands. Once closed, an idle worker exits at once
// and a busy one after its command; a command still sent then (on a
// connection taken before Close) runs on a goroutine of its own.
type workers struct {
	mu       sync.Mutex
	idle     []chan func()
	closed   bool
	stopping sync.WaitGroup // idle workers told to exit by close
}

const (
	maxIdleWorkers = 64
	workerIdle     = 10 * time.Second
)

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- f // buffered: never blocks
		return
	}
	closed := w.closed
	w.mu.Unlock()
	if closed {
		go f()
		return
	}
	ch := make(chan func(), 1)
	ch <- f
	go w.loop(ch)
}

func (w *workers) loop(ch chan func()) {
	timer := time.NewTimer(workerIdle)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-ch:
			if !ok { // closed while idle
				w.stopping.Done()
				return
			}
			f()
			w.mu.Lock()
			if w.closed || len(w.idle) >= maxIdleWorkers {
				w.mu.Unlock()
				return
			}
			w.idle = append(w.idle, ch)
			w.mu.Unlock()
			timer.Reset(workerIdle)
		case <-timer.C:
			w.mu.Lock()
			for i, idle := range w.idle {
				if idle == ch { // still idle: leave
					w.idle = append(w.idle[:i], w.idle[i+1:]...)
					w.mu.Unlock()
					return
				}
			}
			w.mu.Unlock()
			// run took this worker as the timer fired: its f is in ch.
		}
	}
}

func (w *workers) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// close tells every idle worker to exit and waits until they have; busy
// workers exit when their command is done.
func (w *workers) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		w.stopping.Add(len(w.idle))
		for _, ch := range w.idle {
			close(ch)
		}
		w.idle = nil
	}
	w.mu.Unlock()
	w.stopping.Wait()
}
