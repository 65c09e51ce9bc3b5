package atomicredis

// The call path on a cluster (binding, MOVED, deadlines without DoContext,
// transient errors) and WithReplicaAck, on miniredis behind a fake cluster
// connection and on a private primary with a replica.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
// EVALSHA (CountActive's too, whose key count comes first), and a ctx with
// a deadline reaches a connection without DoContext as a read timeout.
func TestCallPathBindsByKey(t *testing.T) {
	s := newMini(t)
	log := &connLog{}
	e := New(&fakeCluster{pool: s.pool, log: log}, WithNamespace(s.ns))
	ctx := ctxT(t)
	for _, c := range validCalls() {
		log.mu.Lock()
		log.binds, log.scripts, log.timeouts = nil, 0, 0
		log.mu.Unlock()
		if err := c.run(ctx, e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		log.mu.Lock()
		binds, scripts, timeouts := log.binds, log.scripts, log.timeouts
		log.mu.Unlock()
		if scripts == 0 {
			continue // answered without a script (Token, Fence, ...)
		}
		if len(binds) != scripts {
			t.Errorf("%s: %d binds for %d scripts", c.name, len(binds), scripts)
		}
		for _, b := range binds {
			if !strings.HasPrefix(b, s.ns) || !strings.Contains(b, "{") || strings.Contains(b, ",") {
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
	if _, err := e.CountActive(ctx, "g", "p1", "p2"); err != nil {
		t.Fatal(err)
	}
	if want := s.ns + "active:{g}"; len(log.binds) != 1 || log.binds[0] != want {
		t.Errorf("CountActive bound to %q, want [%q]", log.binds, want)
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
			s := newMini(t)
			log := &connLog{moved: c.moved}
			e := New(&fakeCluster{pool: s.pool, log: log, plain: c.plain}, WithNamespace(s.ns))
			l, err := e.TryLock(ctxT(t), "m", LockOptions{})
			if c.wantErr {
				if err == nil || !replyIs(err, "MOVED") || !transient(err) {
					t.Errorf("TryLock: %v, want the MOVED error, transient", err)
				}
				if ks := s.keys(t); len(ks) != 0 {
					t.Errorf("keys written: %q", ks)
				}
			} else if err != nil || l.Fence() != 1 {
				t.Errorf("TryLock: fence %d, %v; want fence 1", l.Fence(), err)
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

// WithReplicaAck rejects what WAIT cannot do: every call returns ErrInvalid
// and nothing is written. replicas 0 is off, whatever the timeout.
func TestReplicaAckOptions(t *testing.T) {
	s := newMini(t)
	for _, c := range []struct {
		replicas int
		timeout  time.Duration
	}{{-1, time.Second}, {1, 0}, {1, -time.Second}, {2, 999 * time.Microsecond}} {
		e := New(s.pool, WithReplicaAck(c.replicas, c.timeout))
		for _, v := range validCalls() {
			if strings.HasPrefix(v.name, "Lock.") || strings.HasPrefix(v.name, "Permit.") {
				continue
			}
			if err := v.run(ctxT(t), e); !errors.Is(err, ErrInvalid) {
				t.Errorf("WithReplicaAck(%d, %v): %s: %v, want ErrInvalid", c.replicas, c.timeout, v.name, err)
			}
		}
	}
	if ks := s.keys(t); len(ks) != 0 {
		t.Errorf("keys written: %q", ks)
	}
	for _, timeout := range []time.Duration{0, -1, time.Second} {
		if _, err := New(s.pool, WithReplicaAck(0, timeout)).TryLock(ctxT(t), fmt.Sprint("off", timeout), LockOptions{}); err != nil {
			t.Errorf("WithReplicaAck(0, %v): %v", timeout, err)
		}
	}
}

// With more replicas asked for than any server here has, an acquisition is
// granted by the script, found unreplicated, undone, and reported with
// ErrNotReplicated; the lock is free afterwards.
func TestReplicaAckShortfall(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		ctx := ctxT(t)
		e := s.engine(WithReplicaAck(64, 20*time.Millisecond))
		_, err := e.TryLock(ctx, "short", LockOptions{})
		if !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "of 64 replicas") {
			t.Fatalf("TryLock: %v, want ErrNotReplicated naming the acks", err)
		}
		if err := e.Close(ctx); err != nil { // waits for the undo
			t.Fatal(err)
		}
		if held, err := s.engine().IsLocked(ctx, "short"); err != nil || held {
			t.Errorf("IsLocked after an unreplicated grant: %v, %v; want false", held, err)
		}
	})
}

// startReplicated starts a private primary and a replica of it, and waits
// until the replica is in sync. stopReplica detaches the replica (REPLICAOF
// NO ONE), leaving the primary with none.
func startReplicated(t *testing.T) (primary, replica *server) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server on PATH: the replica-ack tests need a real primary and replica")
	}
	addrs := make([]string, 2)
	for i := range addrs {
		addr, stop, err := startRedis(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		addrs[i] = addr
	}
	ns := testNamespace()
	primary = &server{name: "primary", pool: newPool(t, addrs[0]), ns: ns}
	replica = &server{name: "replica", pool: newPool(t, addrs[1]), ns: ns}
	host, port, _ := net.SplitHostPort(addrs[0])
	replica.must(t, "REPLICAOF", host, port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := redis.String(primary.do("INFO", "replication"))
		if strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return primary, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not in sync after 30s:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On a primary with one replica: WithReplicaAck(1, ...) acquires, extends
// and refreshes, each acknowledged, and the replica has the lock when the
// call returns; WithReplicaAck(2, ...) gets ErrNotReplicated and leaves the
// lock free. With the replica gone, Extend and Refresh keep what they set
// and say ErrNotReplicated.
func TestReplicaAck(t *testing.T) {
	primary, replica := startReplicated(t)
	ctx := ctxT(t)
	one := primary.engine(WithReplicaAck(1, time.Second))
	l, err := one.TryLock(ctx, "acked", LockOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("TryLock with one replica acking: %v", err)
	}
	// WAIT returned: the replica has the grant, with no pause needed.
	if n, _ := redis.Int(replica.do("EXISTS", primary.ns+"lock:{acked}")); n != 1 {
		t.Errorf("replica lacks the acknowledged lock key")
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Errorf("Extend, acked: %v", err)
	}
	p, err := one.AcquireSemaphore(ctx, "acked", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("AcquireSemaphore, acked: %v", err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Errorf("Refresh, acked: %v", err)
	}

	two := primary.engine(WithReplicaAck(2, 100*time.Millisecond))
	if _, err := two.TryLock(ctx, "unacked", LockOptions{}); !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "1 of 2 replicas") {
		t.Errorf("TryLock wanting 2 acks of 1 replica: %v, want ErrNotReplicated (1 of 2)", err)
	}
	if _, err := two.AcquireSemaphore(ctx, "unacked", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("AcquireSemaphore wanting 2 acks of 1 replica: %v, want ErrNotReplicated", err)
	}
	if err := two.Close(ctx); err != nil {
		t.Fatal(err)
	}
	plain := primary.engine()
	if held, err := plain.IsLocked(ctx, "unacked"); err != nil || held {
		t.Errorf("IsLocked after the unreplicated grant: %v, %v; want false", held, err)
	}
	if n, err := plain.SemaphoreHolders(ctx, "unacked"); err != nil || n != 0 {
		t.Errorf("SemaphoreHolders after the unreplicated grant: %d, %v; want 0", n, err)
	}

	// The replica leaves: nothing acknowledges now.
	replica.must(t, "REPLICAOF", "NO", "ONE")
	if err := l.Extend(ctx, 40*time.Second); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Extend without a replica: %v, want ErrNotReplicated", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 30*time.Second {
		t.Errorf("TTL after an unreplicated Extend(40s): %v, %v; want the extension kept", ttl, err)
	}
	before, _ := p.TTL(ctx)
	time.Sleep(20 * time.Millisecond)
	if err := p.Refresh(ctx); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Refresh without a replica: %v, want ErrNotReplicated", err)
	}
	if after, err := p.TTL(ctx); err != nil || after <= before {
		t.Errorf("permit TTL %v before an unreplicated Refresh, %v (%v) after; want it refreshed", before, after, err)
	}
	if _, err := one.TryLock(ctx, "lonely", LockOptions{}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("TryLock without a replica: %v, want ErrNotReplicated", err)
	}
}
