package atomicredis

// The call path on a cluster (binding, MOVED, deadlines without DoContext,
// transient errors), on miniredis behind a fake cluster connection.

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// connLog records what fake cluster connections were asked to do.
type connLog struct {
	mu       sync.Mutex
	binds    []string        // every Bind, keys joined by ","
	scripts  int             // EVALSHA sent
	timeouts int             // of those, sent with a read timeout
	moved    int             // EVALSHA replies still to answer with MOVED
	calls    map[string]bool // commands sent
}

func (l *connLog) record(cmd string, timeout bool) (moved bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]bool{}
	}
	l.calls[cmd] = true
	if cmd == "EVALSHA" { // one per call; EVAL follows NOSCRIPT on the same connection
		l.scripts++
		if timeout {
			l.timeouts++
		}
		if l.moved > 0 {
			l.moved--
			return true
		}
	}
	return false
}

// plainConn is a connection like redisc's without Bind: it has Do and
// DoWithTimeout, no DoContext, and answers MOVED while log.moved lasts.
type plainConn struct {
	c   redis.Conn
	log *connLog
}

func (c *plainConn) Do(cmd string, args ...any) (any, error) {
	if c.log.record(cmd, false) {
		return nil, redis.Error("MOVED 3999 127.0.0.1:1")
	}
	return c.c.Do(cmd, args...)
}

func (c *plainConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	if c.log.record(cmd, true) {
		return nil, redis.Error("MOVED 3999 127.0.0.1:1")
	}
	return redis.DoWithTimeout(c.c, d, cmd, args...)
}

func (c *plainConn) Send(cmd string, args ...any) error {
	c.log.record(cmd, false)
	return c.c.Send(cmd, args...)
}
func (c *plainConn) Flush() error          { return c.c.Flush() }
func (c *plainConn) Receive() (any, error) { return c.c.Receive() }
func (c *plainConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.c, d)
}
func (c *plainConn) Err() error   { return c.c.Err() }
func (c *plainConn) Close() error { return c.c.Close() }

// bindConn is plainConn with Bind, as a *redisc.Conn has.
type bindConn struct{ plainConn }

func (c *bindConn) Bind(keys ...string) error {
	c.log.mu.Lock()
	c.log.binds = append(c.log.binds, strings.Join(keys, ","))
	c.log.mu.Unlock()
	return nil
}

// fakeCluster is a Pool of bindConn (or plainConn) on a real pool.
type fakeCluster struct {
	pool  *redis.Pool
	log   *connLog
	plain bool
}

func (p *fakeCluster) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := p.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	if p.plain {
		return &plainConn{c, p.log}, nil
	}
	return &bindConn{plainConn{c, p.log}}, nil
}

// Every script call binds its connection to the object's first key before
// EVALSHA (CountActive's too, whose key counts come first), and a ctx with
// a deadline reaches a connection without DoContext as a read timeout.
func TestCallPathBindsByKey(t *testing.T) {
	s := testserver.Mini(t)
	log := &connLog{}
	e := New(&fakeCluster{pool: s.Pool, log: log}, WithNamespace(s.NS))
	ctx := ctxT(t)
	for _, c := range validCalls() {
		log.mu.Lock()
		log.binds, log.scripts, log.timeouts = nil, 0, 0
		log.mu.Unlock()
		if err := c.run(ctx, e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		log.mu.Lock()
		var binds []string
		for _, b := range log.binds {
			if b != e.wake.channel { // the wake subscription: not a script
				binds = append(binds, b)
			}
		}
		scripts, timeouts := log.scripts, log.timeouts
		log.mu.Unlock()
		if scripts == 0 {
			continue // answered without a script (Token, Fence, ...)
		}
		if len(binds) != scripts {
			t.Errorf("%s: %d binds for %d scripts", c.name, len(binds), scripts)
		}
		for _, b := range binds {
			if !strings.HasPrefix(b, s.NS) || !strings.Contains(b, "{") || strings.Contains(b, ",") {
				t.Errorf("%s: bound to %q, want one key of the object", c.name, b)
			}
		}
		if timeouts != scripts {
			t.Errorf("%s: %d of %d scripts sent with the ctx deadline as a read timeout", c.name, timeouts, scripts)
		}
	}
	log.mu.Lock()
	log.binds = nil
	log.mu.Unlock()
	if err := e.MarkActive(ctx, "g", "p1", 1<<23); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	log.binds = nil
	log.mu.Unlock()
	if _, err := e.CountActive(ctx, "g", "p1", "p2"); err != nil {
		t.Fatal(err)
	}
	// The periods' indexes, then the partition's directories, then its
	// scratch prefix.
	prefix := object{kind: kindActivity, name: "g", ns: s.NS}.partPrefix(placeOf(1 << 23).part())
	if want := []string{s.NS + "bitindex:{g}:p1", dirKey(prefix, "p1"), prefix + "~"}; !slices.Equal(log.binds, want) {
		t.Errorf("CountActive bound to %q, want %q", log.binds, want)
	}
}

// MOVED means the script did not run: the call follows it on a fresh,
// re-bound connection, at most maxRedirects times, and never on a
// connection that cannot bind (it would land on the same node).
func TestCallPathFollowsMoved(t *testing.T) {
	for _, c := range []struct {
		name       string
		plain      bool
		moved      int
		wantErr    bool
		wantBinds  int
		wantScript int
	}{
		{"one move", false, 1, false, 2, 2},
		{"up to the bound", false, maxRedirects, false, maxRedirects + 1, maxRedirects + 1},
		{"past the bound", false, maxRedirects + 1, true, maxRedirects + 1, maxRedirects + 1},
		{"no Bind: not followed", true, 1, true, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testserver.Mini(t)
			log := &connLog{moved: c.moved}
			e := New(&fakeCluster{pool: s.Pool, log: log, plain: c.plain}, WithNamespace(s.NS))
			l, err := e.TryLock(ctxT(t), "m", LockOptions{})
			if c.wantErr {
				if err == nil || !replyIs(err, "MOVED") || !transient(err) {
					t.Errorf("TryLock: %v, want the MOVED error, transient", err)
				}
				if ks := s.Keys(t); len(ks) != 0 {
					t.Errorf("keys written: %q", ks)
				}
			} else if err != nil || l.Fence() < 1 {
				t.Errorf("TryLock: fence %d, %v; want a fence", l.Fence(), err)
			}
			if len(log.binds) != c.wantBinds || log.scripts != c.wantScript {
				t.Errorf("%d binds, %d scripts sent; want %d, %d", len(log.binds), log.scripts, c.wantBinds, c.wantScript)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{redis.Error("CLUSTERDOWN The cluster is down"), true},
		{redis.Error("CLUSTERDOWN Hash slot not served"), true},
		{redis.Error("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{redis.Error("LOADING Redis is loading the dataset in memory"), true},
		{redis.Error("ASK 3999 127.0.0.1:7001"), true},
		{redis.Error("MOVED 3999 127.0.0.1:7001"), true},
		{fmt.Errorf("atomicredis: lock %q: %w", "x", redis.Error("CLUSTERDOWN The cluster is down")), true},
		{fmt.Errorf("atomicredis: lock %q: %w", "x", refused), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{redis.Error("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{redis.Error("OOM command not allowed when used memory > 'maxmemory'."), false},
		{redis.Error("NOSCRIPT No matching script."), false},
		{redis.Error("CLUSTERDOWNX"), false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("wrapped: %w", ErrInvalid), false},
		{nil, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
