package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	if cmd == "EVALSHA" { // one per call
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

func (c *plainConn) Flush() error { return c.c.Flush() }

func (c *plainConn) Receive() (any, error) { return c.c.Receive() }

func (c *plainConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.c, d)
}

func (c *plainConn) Err() error { return c.c.Err() }

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
func TestCall_BindsByKey(t *testing.T) {
	s := testserver.Mini(t)
	log := &connLog{}
	e := New(&fakeCluster{pool: s.Pool, log: log}, WithNamespace(s.NS))
	ctx := ctxT(t)
	if err := e.Ping(ctx); err != nil { // loads the scripts: no NOSCRIPT below
		t.Fatal(err)
	}
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
func TestCall_FollowsMoved(t *testing.T) {
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
			if err := New(s.Pool).Ping(ctxT(t)); err != nil { // loads the scripts: no NOSCRIPT below
				t.Fatal(err)
			}
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

func TestCall_Transient(t *testing.T) {
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

// A server that stops answering (SIGSTOP) holds no call past its bounds:
// TryLock returns after the call timeout, a waiting Lock when its Wait
// runs out, neither saying ErrNotAcquired (the server never answered), and
// what they may have left on the server is abandoned once it answers again.
func TestCall_HungServer(t *testing.T) {
	s := privateServer(t, "private redis")
	pid := info(s, t, "process_id")
	ctx := context.Background() // the bounds must come from the engine
	const callTimeout = 300 * time.Millisecond
	e := engine(s, WithCallTimeout(callTimeout))
	holder, err := engine(s).TryLock(ctxT(t), "hung", LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(int(pid), syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	start := time.Now()
	_, err = e.TryLock(ctx, "hung", LockOptions{})
	took := time.Since(start)
	t.Logf("TryLock on a stopped server: %v after %v", err, took)
	if err == nil || errors.Is(err, ErrNotAcquired) || took > callTimeout+time.Second {
		t.Errorf("TryLock on a stopped server: %v after %v; want a timeout (not ErrNotAcquired) within the call timeout %v", err, took, callTimeout)
	}
	start = time.Now()
	_, err = e.Lock(ctx, "hung", LockOptions{Wait: 500 * time.Millisecond})
	took = time.Since(start)
	t.Logf("Lock (Wait 500ms) on a stopped server: %v after %v", err, took)
	if err == nil || errors.Is(err, ErrNotAcquired) || took > 500*time.Millisecond+time.Second {
		t.Errorf("Lock (Wait 500ms) on a stopped server: %v after %v; want the last attempt's failure by the end of its wait", err, took)
	}
	resume()
	if err := e.Close(ctxT(t)); err != nil { // the abandons of the cut-off attempts run
		t.Fatal(err)
	}
	if err := holder.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, k := range s.Keys(t) { // the lock's one key, free, its abandon marks standing a call timeout: a late arrival takes nothing
		if k != s.NS+"lock:{hung}" {
			t.Errorf("left after the abandons: %s", k)
		}
	}
	if holder, _ := testserver.LockHolder(s.Do("HGET", s.NS+"lock:{hung}", "v")); holder != "" || len(lockQueue(s, t, "hung")) != 0 {
		t.Errorf("left after the abandons: the lock held by %q, queue %+v", holder, lockQueue(s, t, "hung"))
	}
}

// A pool without Wait answers ErrPoolExhausted at once when all its
// connections are out; a wait rides that out, and Unlock retries it, so
// that 16 goroutines on a pool of 3 all get their locks and free them.
func TestCall_PoolExhaustedWaitedOut(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		pool := &redis.Pool{MaxActive: 3, MaxIdle: 3, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", s.Addr) }}
		t.Cleanup(func() { pool.Close() })
		e := New(pool, WithNamespace(s.NS))
		ctx := ctxT(t)
		var failed, done atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					l, err := e.Lock(ctx, "pe"+strconv.Itoa(g%4), LockOptions{TTL: 30 * time.Second, Wait: 10 * time.Second})
					if err != nil {
						failed.Add(1)
						t.Errorf("Lock: %v", err)
						continue
					}
					time.Sleep(time.Millisecond)
					if err := l.Unlock(ctx); err != nil {
						failed.Add(1)
						t.Errorf("Unlock: %v", err)
						continue
					}
					done.Add(1)
				}
			}(g)
		}
		wg.Wait()
		t.Logf("%s: 160 cycles through a pool of 3 without Wait: %d done, %d failed", s.Name, done.Load(), failed.Load())
		for g := 0; g < 4; g++ {
			if locked, err := e.IsLocked(ctx, "pe"+strconv.Itoa(g)); err != nil || locked {
				t.Errorf("pe%d still locked (%v, %v): an Unlock gave up on the exhausted pool", g, locked, err)
			}
		}
		e.Close(ctx)
	})
}

// With Redis refusing connections, a wait and a one-try both fail with the
// connection's error, never with ErrNotAcquired.
func TestCall_RedisDownIsNotNotAcquired(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	e := New(&redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", down) }})
	ctx := ctxT(t)
	for name, try := range map[string]func() error{
		"Lock": func() error {
			_, err := e.Lock(ctx, "down", LockOptions{Wait: 300 * time.Millisecond})
			return err
		},
		"TryLock": func() error { _, err := e.TryLock(ctx, "down", LockOptions{}); return err },
		"AcquireSemaphore": func() error {
			_, err := e.AcquireSemaphore(ctx, "down", SemaphoreOptions{Limit: 1, Wait: 300 * time.Millisecond})
			return err
		},
	} {
		err := try()
		if errors.Is(err, ErrNotAcquired) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s with Redis down: %v; want connection refused, not ErrNotAcquired", name, err)
		}
	}
}

// On a real server, MONITOR proves that each operation is one EVALSHA:
// the commands a script runs show up tagged "lua", the client's own not.
func TestCall_OneRoundTripPerOperation(t *testing.T) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		t.Skip("REDIS_ADDR not set: MONITOR runs on a real server only")
	}
	s := testserver.Real(t, "redis", addr)
	ctx, e := ctxT(t), engine(s)
	var l, r *Lock
	var p *Permit
	ops := []struct {
		name string
		run  func() error
	}{
		{"TryLock", func() (err error) { l, err = e.TryLock(ctx, "one", LockOptions{}); return err }},
		{"Extend", func() error { return l.Extend(ctx, time.Minute) }},
		{"Unlock", func() error { return l.Unlock(ctx) }},
		{"TryRLock", func() (err error) { r, err = e.TryRLock(ctx, "one", LockOptions{}); return err }},
		{"RLock", func() (err error) { l, err = e.RLock(ctx, "one", LockOptions{}); return err }},
		{"Extend (reader)", func() error { return r.Extend(ctx, time.Minute) }},
		{"TTL (reader)", func() error { _, err := r.TTL(ctx); return err }},
		{"Unlock (reader)", func() error { return r.Unlock(ctx) }},
		{"Unlock (last reader)", func() error { return l.Unlock(ctx) }},
		{"TryWLock", func() (err error) { l, err = e.TryWLock(ctx, "one", LockOptions{}); return err }},
		{"Unlock (writer)", func() error { return l.Unlock(ctx) }},
		{"WLock", func() (err error) { l, err = e.WLock(ctx, "one", LockOptions{}); return err }},
		{"Unlock (writer)", func() error { return l.Unlock(ctx) }},
		{"AcquireSemaphore", func() (err error) { p, err = e.TryAcquireSemaphore(ctx, "one", SemaphoreOptions{Limit: 1}); return err }},
		{"Extend", func() error { return p.Extend(ctx, 0) }},
		{"SemaphoreHolders", func() error { _, err := e.SemaphoreHolders(ctx, "one"); return err }},
		{"Release", func() error { return p.Release(ctx) }},
		{"AddRecent", func() error { return e.AddRecent(ctx, "one", "Alice") }},
		{"SuggestRecent", func() error { _, err := e.SuggestRecent(ctx, "one", "al", 5); return err }},
		{"RemoveRecent", func() error { return e.RemoveRecent(ctx, "one", "Alice") }},
		{"AddMembers", func() error { return e.AddMembers(ctx, "one", "abc", "abd") }},
		{"Suggest", func() error { _, err := e.Suggest(ctx, "one", "ab", 5); return err }},
		{"RemoveMembers", func() error { return e.RemoveMembers(ctx, "one", "abc", "abd") }},
		{"MarkActive", func() error { return e.MarkActive(ctx, "one", "d1", 7) }},
		{"IsActive", func() error { _, err := e.IsActive(ctx, "one", "d1", 7); return err }},
		{"CountActive", func() error { _, err := e.CountActive(ctx, "one", "d1", "d2"); return err }},
		{"MarkActiveMany", func() error { return e.MarkActiveMany(ctx, "one", "d2", 7, 8, 9) }},
		{"CountActiveAll", func() error { _, err := e.CountActiveAll(ctx, "one", "d1", "d2"); return err }},
	}
	for _, op := range ops { // load the scripts first
		if err := op.run(); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range ops {
		got := monitor(t, addr, s.NS, op.run)
		want := 1
		if strings.HasPrefix(op.name, "CountActive") {
			want = 3 // the periods' indexes, the one partition's tries, its count
		}
		evalsha := 0
		for _, cmd := range got {
			if strings.HasPrefix(cmd, `"EVALSHA"`) {
				evalsha++
			}
		}
		if len(got) != want || evalsha != want {
			t.Errorf("%s sent %q, want exactly %d EVALSHA", op.name, got, want)
		}
	}
}

// monitor runs f and returns the commands clients sent that mention ns,
// leaving out those a script ran.
func monitor(t *testing.T, addr, ns string, f func() error) []string {
	t.Helper()
	m, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Do("MONITOR"); err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	marker := ns + "end-of-monitor"
	c, _ := redis.Dial("tcp", addr)
	c.Do("ECHO", marker)
	c.Close()
	var sent []string
	for {
		line, err := redis.String(m.Receive())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, marker) {
			return sent
		}
		if strings.Contains(line, " lua] ") || !strings.Contains(line, ns) {
			continue
		}
		_, cmd, _ := strings.Cut(line, "] ")
		sent = append(sent, cmd)
	}
}

// With more replicas asked for than any server here has, an acquisition is
// granted by the script, found unreplicated, abandoned, and reported with
// ErrNotReplicated; the lock is free afterwards.
func TestCall_ReplicaAckShortfall(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s, WithReplicaAck(64, 20*time.Millisecond))
		_, err := e.TryLock(ctx, "short", LockOptions{})
		if !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "of 64 replicas") {
			t.Fatalf("TryLock: %v, want ErrNotReplicated naming the acks", err)
		}
		if err := e.Close(ctx); err != nil { // waits for the abandon
			t.Fatal(err)
		}
		if held, err := engine(s).IsLocked(ctx, "short"); err != nil || held {
			t.Errorf("IsLocked after an unreplicated grant: %v, %v; want false", held, err)
		}
	})
}

// On a primary with one replica: WithReplicaAck(1, ...) acquires, extends
// and extends, each acknowledged, and the replica has the lock when the
// call returns; WithReplicaAck(2, ...) gets ErrNotReplicated and leaves the
// lock free. With the replica gone, Lock.Extend and Permit.Extend keep what they set
// and say ErrNotReplicated.
func TestCall_ReplicaAck(t *testing.T) {
	testserver.Parallel(t)
	primary, replica := startReplicated(t)
	ctx := ctxT(t)
	one := engine(primary, WithReplicaAck(1, time.Second))
	l, err := one.TryLock(ctx, "acked", LockOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("TryLock with one replica acking: %v", err)
	}
	// WAIT returned: the replica has the grant, with no pause needed.
	if n, _ := redis.Int(replica.Do("EXISTS", primary.NS+"lock:{acked}")); n != 1 {
		t.Errorf("replica lacks the acknowledged lock key")
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Errorf("Extend, acked: %v", err)
	}
	p, err := one.TryAcquireSemaphore(ctx, "acked", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("AcquireSemaphore, acked: %v", err)
	}
	if err := p.Extend(ctx, 0); err != nil {
		t.Errorf("Extend, acked: %v", err)
	}

	two := engine(primary, WithReplicaAck(2, 100*time.Millisecond))
	if _, err := two.TryLock(ctx, "unacked", LockOptions{}); !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "1 of 2 replicas") {
		t.Errorf("TryLock wanting 2 acks of 1 replica: %v, want ErrNotReplicated (1 of 2)", err)
	}
	if _, err := two.TryAcquireSemaphore(ctx, "unacked", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("AcquireSemaphore wanting 2 acks of 1 replica: %v, want ErrNotReplicated", err)
	}
	if err := two.Close(ctx); err != nil {
		t.Fatal(err)
	}
	plain := engine(primary)
	if held, err := plain.IsLocked(ctx, "unacked"); err != nil || held {
		t.Errorf("IsLocked after the unreplicated grant: %v, %v; want false", held, err)
	}
	if n, err := plain.SemaphoreHolders(ctx, "unacked"); err != nil || n != 0 {
		t.Errorf("SemaphoreHolders after the unreplicated grant: %d, %v; want 0", n, err)
	}

	// The replica leaves: nothing acknowledges now.
	replica.Must(t, "REPLICAOF", "NO", "ONE")
	if err := l.Extend(ctx, 40*time.Second); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Extend without a replica: %v, want ErrNotReplicated", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 30*time.Second {
		t.Errorf("TTL after an unreplicated Extend(40s): %v, %v; want the extension kept", ttl, err)
	}
	before, _ := p.TTL(ctx)
	time.Sleep(20 * time.Millisecond)
	if err := p.Extend(ctx, 0); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Extend without a replica: %v, want ErrNotReplicated", err)
	}
	if after, err := p.TTL(ctx); err != nil || after <= before {
		t.Errorf("permit TTL %v before an unreplicated Extend, %v (%v) after; want it extended", before, after, err)
	}
	if _, err := one.TryLock(ctx, "lonely", LockOptions{}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("TryLock without a replica: %v, want ErrNotReplicated", err)
	}
}

// The call timeout bounds getting a connection too: with a pool whose
// dial names its client (a command, as AUTH or SELECT would be) and a
// server that accepts and never answers (as a stopped one does), each call
// fails within its timeout.
func TestCall_TimeoutBoundsGettingAConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var accepted []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { // ends a dial that never returned (the bug), so nothing leaks
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range accepted {
			c.Close()
		}
	})
	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, "tcp", ln.Addr().String(), redis.DialClientName("stopped"))
	}}
	t.Cleanup(func() { pool.Close() })
	const callTimeout = 300 * time.Millisecond
	e := New(pool, WithCallTimeout(callTimeout))
	ctx := context.Background() // the bound must come from the engine
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"TryLock", func() error { _, err := e.TryLock(ctx, "l", LockOptions{}); return err }},
		{"LockInfo", func() error { _, err := e.LockInfo(ctx, "l"); return err }},
		{"MarkActiveMany", func() error { return e.MarkActiveMany(ctx, "g", "p", 1, 2, 3) }},
		{"Ping", func() error { return e.Ping(ctx) }},
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- c.run() }()
		select {
		case err := <-done:
			took := time.Since(start)
			t.Logf("%s: %v after %v", c.name, err, took)
			if err == nil || took > callTimeout+2*time.Second {
				t.Errorf("%s on a server that never answers: %v after %v; want an error within the call timeout %v", c.name, err, took, callTimeout)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s on a server that never answers: no return after 10s; want one within the call timeout %v", c.name, callTimeout)
		}
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A call under a cancellable context starts no goroutine of its own: on a
// pool of one connection through a proxy that holds each command back, the
// goroutines counted while each of 100 calls is in flight are those
// counted just before it plus the caller's.
func TestCall_NoGoroutinePerCommand(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		proxy := startProxy(t, s.Addr, faults{})
		pool := &redis.Pool{MaxActive: 1, MaxIdle: 1, Wait: true,
			Dial: func() (redis.Conn, error) { return redis.Dial("tcp", proxy.addr()) }}
		t.Cleanup(func() { pool.Close() })
		e := New(pool, WithNamespace(s.NS))
		if _, err := e.LockInfo(ctxT(t), "g"); err != nil { // the connection dialed, the script loaded
			t.Fatal(err)
		}
		proxy.lag.Store(int64(30 * time.Millisecond))
		var extra []int
		for range 100 {
			ctx, cancel := context.WithCancel(context.Background())
			before := runtime.NumGoroutine()
			done := make(chan error, 1)
			go func() { _, err := e.LockInfo(ctx, "g"); done <- err }()
			time.Sleep(10 * time.Millisecond) // the command is held back at the proxy
			extra = append(extra, runtime.NumGoroutine()-before)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		slices.Sort(extra)
		if m := extra[len(extra)/2]; m > 1 {
			t.Errorf("a call in flight under a cancellable context: %d goroutines more than before it (median of 100; the caller's is 1), want 1", m)
		}
	})
}

// stoppedEngine is an engine with the call timeout callTimeout on a
// private redis-server, which warm (run first: a connection in the pool,
// the scripts loaded) may use, then stops (SIGSTOP) until the test ends.
func stoppedEngine(t *testing.T, callTimeout time.Duration, warm func(e *Engine) error) *Engine {
	t.Helper()
	s := privateServer(t, "private redis")
	pid := info(s, t, "process_id")
	e := engine(s, WithCallTimeout(callTimeout))
	if err := warm(e); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(int(pid), syscall.SIGCONT) })
	return e
}

// A call under a cancellable context on a stopped server returns by its
// deadline: the caller's, or the call timeout if it has none.
func TestCall_CancelledOnAStoppedServer(t *testing.T) {
	const callTimeout = 400 * time.Millisecond
	e := stoppedEngine(t, callTimeout, func(e *Engine) error { _, err := e.LockInfo(ctxT(t), "st"); return err })
	for _, c := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		bound time.Duration
	}{
		{"cancelled, no deadline", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, callTimeout},
		{"a deadline of 200ms", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, 200 * time.Millisecond},
	} {
		ctx, cancel := c.ctx()
		start := time.Now()
		_, err := e.LockInfo(ctx, "st")
		cancel()
		took := time.Since(start)
		t.Logf("%s: %v after %v", c.name, err, took)
		if err == nil || took > c.bound+time.Second {
			t.Errorf("%s on a stopped server: %v after %v; want an error by %v", c.name, err, took, c.bound)
		}
	}
}

// A call that a bound of the engine's ended says which, and matches
// context.DeadlineExceeded only when the caller's ctx ended: on a stopped
// server (SIGSTOP), the call timeout of a lock call and of a batch of
// marks (whose error says how many it marked), and a caller's deadline.
func TestCall_TimeoutNamed(t *testing.T) {
	const callTimeout = 300 * time.Millisecond
	e := stoppedEngine(t, callTimeout, func(e *Engine) error {
		if _, err := e.LockInfo(ctxT(t), "tn"); err != nil {
			return err
		}
		return e.MarkActiveMany(ctxT(t), "tn", "p", 1, 2)
	})
	bg := context.Background()
	named := func(what string, err error) {
		t.Logf("%s: %v", what, err)
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) ||
			!strings.Contains(err.Error(), "no reply within the engine's call timeout (300ms") {
			t.Errorf("%s on a stopped server, a Background ctx: %v; want the call timeout named, os.ErrDeadlineExceeded, no context.DeadlineExceeded", what, err)
		}
	}
	_, err := e.LockInfo(bg, "tn")
	named("LockInfo", err)
	err = e.MarkActiveMany(bg, "tn", "p", 3, 4)
	named("MarkActiveMany", err)
	var me *MarkError
	if !errors.As(err, &me) || me.Marked != 0 || me.Of != 2 {
		t.Errorf("MarkActiveMany on a stopped server: %v; want a MarkError of 0 of 2 marked", err)
	}
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	if _, err := e.LockInfo(ctx, "tn"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockInfo on a stopped server under a 200ms deadline: %v; want context.DeadlineExceeded", err)
	}
}

// A Background call on a *redis.Pool with Wait, whose MaxActive
// connections are all out, is bounded by the call timeout: the pool's
// wait for one to come back ends then, with an error.
func TestCall_TimeoutBoundsAPoolsWait(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		pool := &redis.Pool{MaxActive: 1, Wait: true, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", s.Addr) }}
		t.Cleanup(func() { pool.Close() })
		const callTimeout = 300 * time.Millisecond
		ctx := context.Background() // the bound must come from the engine
		e := New(pool, WithNamespace(s.NS), WithCallTimeout(callTimeout))
		defer e.Close(ctx)
		out := pool.Get() // the pool's one connection, held out
		if _, err := out.Do("PING"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			l, err := e.TryLock(ctx, "w", LockOptions{TTL: time.Minute})
			if err == nil {
				err = l.Unlock(ctx)
				if err == nil {
					err = errors.New("taken")
				}
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || err.Error() == "taken" {
				t.Errorf("TryLock with the pool's only connection out: %v; want an error within the call timeout", err)
			}
			// The engine's bound, not the caller's: it says so, and is no
			// context.DeadlineExceeded.
			if errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) ||
				!strings.Contains(err.Error(), "no connection from the pool within the engine's call timeout") {
				t.Errorf("TryLock with the pool's only connection out: %v; want it to name the call timeout, and no DeadlineExceeded", err)
			}
		case <-time.After(10 * time.Second):
			out.Close()
			<-done
			t.Fatalf("TryLock with the pool's only connection out: no return after 10 s; want an error within the call timeout %v", callTimeout)
		}
		out.Close()
		l, err := e.TryLock(ctx, "w", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatalf("TryLock once the connection was back: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
