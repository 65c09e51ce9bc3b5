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
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
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

// ---------------------------------------------------------------------------
// A real multi-node cluster: REDIS_CLUSTER_ADDRS (.ci/run starts 3 primaries
// and 3 replicas), or a private one a test starts for itself.

// clusterSeeds is REDIS_CLUSTER_ADDRS, split at commas.
func clusterSeeds() []string {
	var seeds []string
	for _, a := range strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			seeds = append(seeds, a)
		}
	}
	return seeds
}

// newRedisc returns a redisc cluster client on seeds, its slot map loaded,
// closed when the test ends.
func newRedisc(t testing.TB, seeds []string) *redisc.Cluster {
	t.Helper()
	c := &redisc.Cluster{
		StartupNodes: seeds,
		DialOptions:  []redis.DialOption{redis.DialConnectTimeout(time.Second)},
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			return &redis.Pool{
				MaxIdle:     64,
				IdleTimeout: time.Minute,
				Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr, opts...) },
			}, nil
		},
	}
	if err := c.Refresh(); err != nil {
		t.Fatalf("cluster at %v: %v", seeds, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rediscPool is the README's wrapper: a *redisc.Cluster as a Pool.
type rediscPool struct{ *redisc.Cluster }

func (p rediscPool) GetContext(ctx context.Context) (redis.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.Get(), nil
}

// adminConn carries a test's own commands to a cluster, as one connection
// to one node would: it binds to the node serving the first key it is
// given (an EVALSHA's or EVAL's first key, else the first argument), holding
// back keyless commands sent before it (MULTI) until then, so that WATCH,
// MULTI/EXEC and pipelines work on one slot. Commands about a whole server
// (KEYS, SCRIPT, CONFIG, FLUSHALL, DBSIZE) and multi-key DEL, UNLINK and
// EXISTS, sent before it binds, run on every primary or key by key, their
// replies merged. The pool closes it after each use (MaxIdle 0), so every
// s.do starts unbound.
type adminConn struct {
	cluster *redisc.Cluster
	conn    redis.Conn // a *redisc.Conn
	bound   bool
	held    [][]any // keyless commands sent before binding: name, args...
}

// keyless are commands that name no key; they go wherever the connection is
// bound.
var keyless = map[string]bool{"MULTI": true, "EXEC": true, "DISCARD": true, "UNWATCH": true, "PING": true, "ECHO": true,
	"TIME": true, "INFO": true, "CLIENT": true, "CLUSTER": true, "DEBUG": true, "ROLE": true, "WAIT": true}

// perNode are commands adminConn runs on every primary when unbound.
var perNode = map[string]bool{"KEYS": true, "SCRIPT": true, "CONFIG": true, "FLUSHALL": true, "DBSIZE": true}

// perKey are multi-key commands adminConn splits by key when unbound,
// summing the integer replies.
var perKey = map[string]bool{"DEL": true, "UNLINK": true, "EXISTS": true}

func routingKey(cmd string, args []any) (string, bool) {
	switch {
	case keyless[cmd] || len(args) == 0:
		return "", false
	case cmd == "EVALSHA" || cmd == "EVAL":
		if n, _ := strconv.Atoi(argString(args[1])); n > 0 && len(args) > 2 {
			return argString(args[2]), true
		}
		return "", false
	case (cmd == "BITOP" || cmd == "MEMORY" || cmd == "OBJECT") && len(args) > 1:
		return argString(args[1]), true
	}
	return argString(args[0]), true
}

func argString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

func (a *adminConn) bind(key string, ok bool) error {
	if a.bound {
		return nil
	}
	a.bound = true
	var err error
	if ok {
		err = redisc.BindConn(a.conn, key)
	} else {
		err = redisc.BindConn(a.conn) // any node
	}
	if err != nil {
		return err
	}
	for _, h := range a.held {
		if err := a.conn.Send(h[0].(string), h[1:]...); err != nil {
			return err
		}
	}
	a.held = nil
	return nil
}

func (a *adminConn) Do(cmd string, args ...any) (any, error) {
	up := strings.ToUpper(cmd)
	if cmd == "" && !a.bound && len(a.held) == 0 {
		return nil, nil
	}
	if !a.bound && len(a.held) == 0 {
		switch {
		case perNode[up]:
			return onEveryPrimary(a.cluster, up, args...)
		case perKey[up] && len(args) > 1:
			var sum int64
			for _, k := range args {
				n, err := redis.Int64(onKey(a.cluster, up, k))
				if err != nil {
					return nil, err
				}
				sum += n
			}
			return sum, nil
		}
	}
	if err := a.bind(routingKey(up, args)); err != nil {
		return nil, err
	}
	return a.conn.Do(cmd, args...)
}

func (a *adminConn) Send(cmd string, args ...any) error {
	up := strings.ToUpper(cmd)
	if !a.bound {
		key, ok := routingKey(up, args)
		if !ok {
			a.held = append(a.held, append([]any{cmd}, args...))
			return nil
		}
		if err := a.bind(key, true); err != nil {
			return err
		}
	}
	return a.conn.Send(cmd, args...)
}

func (a *adminConn) Flush() error {
	if err := a.bind("", false); err != nil {
		return err
	}
	return a.conn.Flush()
}

func (a *adminConn) Receive() (any, error) {
	if err := a.bind("", false); err != nil {
		return nil, err
	}
	return a.conn.Receive()
}

// The engine may be given s.pool itself: a *redis.Pool then asks for these.
func (a *adminConn) DoContext(_ context.Context, cmd string, args ...any) (any, error) {
	return a.Do(cmd, args...)
}
func (a *adminConn) ReceiveContext(context.Context) (any, error) { return a.Receive() }
func (a *adminConn) DoWithTimeout(_ time.Duration, cmd string, args ...any) (any, error) {
	return a.Do(cmd, args...)
}
func (a *adminConn) ReceiveWithTimeout(time.Duration) (any, error) { return a.Receive() }

func (a *adminConn) Err() error   { return a.conn.Err() }
func (a *adminConn) Close() error { return a.conn.Close() }

// onKey runs one command on the node serving key.
func onKey(c *redisc.Cluster, cmd string, key any, args ...any) (any, error) {
	conn := c.Get()
	defer conn.Close()
	if err := redisc.BindConn(conn, argString(key)); err != nil {
		return nil, err
	}
	return conn.Do(cmd, append([]any{key}, args...)...)
}

// onEveryPrimary runs a command on each primary: KEYS replies are joined,
// SCRIPT EXISTS replies or-ed (loaded somewhere), others are the last one.
func onEveryPrimary(c *redisc.Cluster, cmd string, args ...any) (any, error) {
	primaries, err := clusterPrimaries(c)
	if err != nil {
		return nil, err
	}
	var joined []any
	var last any
	for _, addr := range primaries {
		conn, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second))
		if err != nil {
			return nil, err
		}
		v, err := conn.Do(cmd, args...)
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", cmd, addr, err)
		}
		switch vs, _ := v.([]any); {
		case cmd == "KEYS":
			joined = append(joined, vs...)
		case cmd == "SCRIPT" && len(args) > 0 && strings.EqualFold(fmt.Sprint(args[0]), "EXISTS"):
			if joined == nil {
				joined = vs
			}
			for i := range vs {
				if n, _ := redis.Int(vs[i], nil); n == 1 && i < len(joined) {
					joined[i] = int64(1)
				}
			}
		}
		last = v
	}
	if joined != nil || cmd == "KEYS" {
		return joined, nil
	}
	return last, nil
}

// clusterPrimaries lists the addresses of the primaries that serve slots,
// as a node reachable through c says.
func clusterPrimaries(c *redisc.Cluster) ([]string, error) {
	owners, err := slotOwners(c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range owners {
		if o != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	sort.Strings(out)
	return out, nil
}

// slotOwners maps every slot to the address of the primary serving it
// ("" if none), from CLUSTER SLOTS.
func slotOwners(c *redisc.Cluster) ([]string, error) {
	conn := c.Get()
	defer conn.Close()
	if err := redisc.BindConn(conn); err != nil { // any node
		return nil, err
	}
	ranges, err := redis.Values(conn.Do("CLUSTER", "SLOTS"))
	if err != nil {
		return nil, err
	}
	owners := make([]string, 16384)
	for _, r := range ranges {
		v, err := redis.Values(r, nil)
		if err != nil || len(v) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: %v", r)
		}
		from, _ := redis.Int(v[0], nil)
		to, _ := redis.Int(v[1], nil)
		node, _ := redis.Values(v[2], nil)
		host, _ := redis.String(node[0], nil)
		port, _ := redis.Int(node[1], nil)
		for s := from; s <= to; s++ {
			owners[s] = net.JoinHostPort(host, fmt.Sprint(port))
		}
	}
	return owners, nil
}

// newClusterServer is a server on the cluster at seeds: the engines it
// makes take redisc connections, bound per call; its own commands go
// through adminConn.
func newClusterServer(t testing.TB, seeds []string) *server {
	t.Helper()
	rc := newRedisc(t, seeds)
	admin := &redis.Pool{Dial: func() (redis.Conn, error) { return &adminConn{cluster: rc, conn: rc.Get()}, nil }}
	t.Cleanup(func() { admin.Close() })
	s := &server{name: "redis-cluster", pool: admin, cluster: rediscPool{rc}, ns: testNamespace()}
	if info, err := redis.String(s.do("CLUSTER", "INFO")); err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("cluster at %v: not ok: %v %s", seeds, err, info)
	}
	t.Cleanup(func() {
		for _, k := range s.keys(t) {
			s.do("DEL", k)
		}
	})
	return s
}

// clusterServer is the shared cluster's server (REDIS_CLUSTER_ADDRS), or a
// skip saying why not: the variable is unset, or the test is one that
// cannot run on a multi-node cluster (notOnCluster).
func clusterServer(t *testing.T) *server {
	t.Helper()
	seeds := clusterSeeds()
	if len(seeds) == 0 {
		t.Skip("REDIS_CLUSTER_ADDRS not set: multi-node cluster run skipped")
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if why, ok := notOnCluster[top]; ok {
		t.Skip("not on a multi-node cluster: " + why)
	}
	return newClusterServer(t, seeds)
}

// notOnCluster are the behavioural tests that cannot run on a multi-node
// cluster, and why. The cluster's own faults are TestFailoverKill and
// TestFailoverStall.
var notOnCluster = map[string]string{
	"TestMutualExclusionUnderFaults":  proxied,
	"TestAdmissionUnderFaults":        proxied,
	"TestRWUnderFaults":               proxied,
	"TestExtendBeatsLateRenewal":      proxied,
	"TestEngineClose":                 proxied,
	"TestNoLostWakeup":                proxied,
	"TestBookFairSemaphoreOverAdmits": proxied,
	"TestBookLockCutBeforeExpire":     proxied,
	"TestBookRefreshRevives":          proxied,
	"TestBoundedPoolNoDeadlock":       ownPool,
	"TestRWDeadReader":                ownPool,
}

const (
	proxied = "its fault proxy fronts one server address"
	ownPool = "it dials its own pool to one server address"
)

// nodeKeys lists the keys matching pattern on each primary, by address.
func nodeKeys(t *testing.T, s *server, pattern string) map[string][]string {
	t.Helper()
	primaries, err := clusterPrimaries(s.cluster.(rediscPool).Cluster)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, addr := range primaries {
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := redis.Strings(c.Do("KEYS", pattern))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[addr] = ks
	}
	return out
}

// spreadNames are object names whose slots fall on every primary of a
// three-primary cluster made by redis-cli --cluster create.
func spreadNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("spread", i)
	}
	return names
}

// Objects of every kind spread over all the primaries, and each of their
// keys lives on the primary that owns its slot, by CLUSTER KEYSLOT.
func TestClusterSpread(t *testing.T) {
	s := clusterServer(t)
	ctx, e := ctxT(t), s.engine()
	for _, name := range spreadNames(24) {
		if _, err := e.TryLock(ctx, name, LockOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.AcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 2}); err != nil {
			t.Fatal(err)
		}
		if err := e.AddRecent(ctx, name, "item"); err != nil {
			t.Fatal(err)
		}
		if err := e.AddMembers(ctx, name, "a", "b"); err != nil {
			t.Fatal(err)
		}
		if err := e.MarkActive(ctx, name, "p", 7); err != nil {
			t.Fatal(err)
		}
	}
	owners, err := slotOwners(s.cluster.(rediscPool).Cluster)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for addr, ks := range nodeKeys(t, s, s.ns+"*") {
		if len(ks) == 0 {
			t.Errorf("primary %s holds none of the objects", addr)
		}
		total += len(ks)
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			slot, err := redis.Int(c.Do("CLUSTER", "KEYSLOT", k))
			if err != nil {
				t.Fatal(err)
			}
			if owners[slot] != addr {
				t.Errorf("%s (slot %d) on %s; the slot's owner is %s", k, slot, addr, owners[slot])
			}
		}
		c.Close()
		t.Logf("primary %s: %d keys", addr, len(ks))
	}
	if want := 24 * 5; total < want { // lock, fence, semaphore keys, recent, members, bitmap
		t.Errorf("%d keys in all, want at least %d", total, want)
	}
}

// countingGets counts the connections a pool hands out.
type countingGets struct {
	Pool
	n atomic.Int64
}

func (p *countingGets) GetContext(ctx context.Context) (redis.Conn, error) {
	p.n.Add(1)
	return p.Pool.GetContext(ctx)
}

// monitorNode collects what MONITOR shows on addr until stop is called.
func monitorNode(t *testing.T, addr string) (stop func() []string) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do("MONITOR"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			v, err := redis.String(c.Receive())
			if err != nil {
				return
			}
			lines = append(lines, v)
		}
	}()
	return func() []string {
		c.Close()
		<-done
		return lines
	}
}

// In steady state one operation on the cluster is one connection and one
// EVALSHA, on the primary that owns the object's slot: no redirect, no EVAL,
// nothing else. MONITOR on every primary shows it, filtered to this test's
// keys (other tests may share the cluster); INFO errorstats counts MOVED.
func TestClusterOneRoundTrip(t *testing.T) {
	s := clusterServer(t)
	ctx := ctxT(t)
	pool := &countingGets{Pool: s.cluster}
	e := New(pool, WithNamespace(s.ns))
	names := spreadNames(30)
	ops := func() int {
		n := 0
		for _, name := range names {
			l, err := e.TryLock(ctx, name, LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Suggest(ctx, name, "a", 5); err != nil {
				t.Fatal(err)
			}
			if err := e.MarkActive(ctx, name, "p", 3); err != nil {
				t.Fatal(err)
			}
			if _, err := e.CountActive(ctx, name, "p", "q"); err != nil {
				t.Fatal(err)
			}
			n += 5
		}
		return n
	}
	ops() // loads the scripts on every primary (EVALSHA, NOSCRIPT, EVAL)
	owners, err := slotOwners(s.cluster.(rediscPool).Cluster)
	if err != nil {
		t.Fatal(err)
	}
	primaries, _ := clusterPrimaries(s.cluster.(rediscPool).Cluster)
	moved := func() (n int64) {
		for _, addr := range primaries {
			c, err := redis.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			info, _ := redis.String(c.Do("INFO", "errorstats"))
			c.Close()
			for _, line := range splitLines(info) {
				if v, ok := cutPrefix(line, "errorstat_MOVED:count="); ok {
					var k int64
					fmt.Sscan(v, &k)
					n += k
				}
			}
		}
		return n
	}
	stops := map[string]func() []string{}
	for _, addr := range primaries {
		stops[addr] = monitorNode(t, addr)
	}
	movedBefore := moved()
	pool.n.Store(0)
	n := ops()
	gets := pool.n.Load()
	movedAfter := moved()
	time.Sleep(100 * time.Millisecond) // MONITOR lines in flight
	evalsha, other := 0, 0
	for addr, stop := range stops {
		here := 0
		for _, line := range stop() {
			if !strings.Contains(line, `"`+s.ns) || strings.Contains(line, " lua] ") {
				continue // another test's, or run by a script
			}
			f := strings.Split(line, `"`) // ts [db addr] "CMD" "arg1" "arg2" ...
			if len(f) < 2 || f[1] != "EVALSHA" {
				other++
				t.Errorf("on %s: %s", addr, line)
				continue
			}
			evalsha++
			here++
			key := f[7] // "EVALSHA" "sha" "numkeys" "key1" ...
			if owner := owners[keySlot(key)]; owner != addr {
				t.Errorf("EVALSHA on %s for %s, whose slot %s owns", addr, key, owner)
			}
		}
		t.Logf("primary %s: %d EVALSHA", addr, here)
	}
	t.Logf("%d operations: %d connections, %d EVALSHA on the owners, %d other commands; MOVED errors on the primaries %d -> %d",
		n, gets, evalsha, other, movedBefore, movedAfter)
	if gets != int64(n) || evalsha != n || other != 0 {
		t.Errorf("%d operations took %d connections and %d EVALSHA (+%d other commands); want one each", n, gets, evalsha, other)
	}
	if movedAfter != movedBefore {
		t.Logf("note: %d MOVED replies on the primaries meanwhile (from this test or another sharing the cluster)", movedAfter-movedBefore)
	}
}
