// Package testserver is the test harness of atomicredis: the servers the
// tests run on, a key namespace of each test's own, and control of
// miniredis's clocks. The package's own tests (package atomicredis),
// internal/suite and the goredis module all use it; it does not import
// atomicredis, so that the package's internal tests can.
//
// A run is given real servers by three environment variables, which
// .ci/run sets. Two of them differ by one letter and mean different
// things, so the code names them apart:
//
//	REDIS_ADDR           host:port of a plain redis-server        RedisAddr()
//	REDIS_CLUSTER_ADDR   host:port of ONE cluster-enabled node    ClusterNodeAddr()
//	                     that serves all 16384 slots itself
//	REDIS_CLUSTER_ADDRS  comma-separated seeds of a multi-node    ClusterSeeds()
//	                     Redis Cluster (3 primaries + 3 replicas
//	                     in CI), reached through a cluster client
//
// Without them the tests run on miniredis, and tests that need a server of
// their own start a private redis-server (StartRedis) when one is on PATH.
// VALKEY_SERVER and REDIS8_SERVER name the binaries of Valkey 8.0.1 and
// Redis 8.0 (built from ../shared/servers) for tests of what only they do
// (Builds, PrivateBuild).
// REDIS_ADDR also marks a full run (Full): the heavy tests run only then.
// Without a shared server, the slow tests that read nothing shared run in
// parallel (Parallel).
package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

// RedisAddr is REDIS_ADDR: a plain redis-server, or "".
func RedisAddr() string { return os.Getenv("REDIS_ADDR") }

// ClusterNodeAddr is REDIS_CLUSTER_ADDR: a single cluster-enabled node
// serving every slot, where a key outside an object's hash tag fails with
// CROSSSLOT; or "".
func ClusterNodeAddr() string { return os.Getenv("REDIS_CLUSTER_ADDR") }

// ClusterSeeds is REDIS_CLUSTER_ADDRS split at commas: seed addresses of a
// multi-node cluster; nil when unset.
func ClusterSeeds() []string {
	var seeds []string
	for _, a := range strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			seeds = append(seeds, a)
		}
	}
	return seeds
}

// Full reports whether this is a full run, with the heavy tests (the
// fault checkers at full count, private failover clusters): REDIS_ADDR
// names a server, as in CI.
func Full() bool { return RedisAddr() != "" }

// Parallel runs t in parallel with the other tests that call it, unless
// a real server is shared (any of the three variables set): there tests
// run one at a time, since the timing bounds of some assume a server
// that nothing else loads. On miniredis every test has a server of its
// own.
func Parallel(t *testing.T) {
	if !Shared() {
		t.Parallel()
	}
}

// Apart runs t in parallel with the other tests that call it or Parallel,
// even where a real server is shared: for the fault checkers, each of
// which uses keys of its own through a proxy of its own, reads nothing the
// server shares (no INFO, no SCRIPT FLUSH) and checks what holds under any
// load (they count what the server confirmed, never a time). On a shared
// server they run together after every test that runs one at a time.
func Apart(t *testing.T) { t.Parallel() }

// Shared reports whether the tests share a real server: any of
// REDIS_ADDR, REDIS_CLUSTER_ADDR and REDIS_CLUSTER_ADDRS is set.
func Shared() bool {
	return RedisAddr() != "" || ClusterNodeAddr() != "" || len(ClusterSeeds()) > 0
}

// Conns hands out connections: a *redis.Pool, an atomicredis.Pool, a
// cluster client's wrapper.
type Conns interface {
	GetContext(ctx context.Context) (redis.Conn, error)
}

// Server is one Redis a test runs against, with a key namespace of the
// test's own, so that tests sharing a real server never see each other's
// keys.
type Server struct {
	Name string
	// Addr is the address Pool dials; "" on a multi-node cluster.
	Addr string
	// Mini is the miniredis server, whose clocks Advance moves; nil on a
	// real server, where the tests wait instead.
	Mini *miniredis.Miniredis
	// Pool carries the test's own commands (on a multi-node cluster,
	// routed as one connection to one node would be; see testcluster).
	Pool *redis.Pool
	// Engines is the pool engines take when it is not Pool: a cluster
	// client's.
	Engines Conns
	// NS prefixes every key the test writes.
	NS string
	// T is the test the server is for: what outlives one call of a
	// helper (the engines the tests make) is closed when it ends.
	T testing.TB

	// When set, these replace Pool for the test's own commands (a client
	// other than redigo, in internal/suite).
	DoFunc   func(cmd string, args ...any) (any, error)
	KeysFunc func(pattern string) ([]string, error)
	// BroadcastFunc runs a command on every primary (SCRIPT FLUSH);
	// nil: Do.
	BroadcastFunc func(cmd string, args ...any) error

	// tickMax is the longest step Realtime has moved miniredis's clocks
	// by, in ns (RealtimeStep).
	tickMax atomic.Int64
	// EngineOptions are given to every engine of the test after its
	// namespace (internal/suite's Target.Options). They are
	// atomicredis.Option values, which this package cannot name: it does
	// not import atomicredis.
	EngineOptions []any
}

var nsCounter atomic.Int64

// Namespace returns a key prefix unique to one test (no braces).
func Namespace() string {
	return "t" + uuid.NewString()[:8] + "-" + strconv.FormatInt(nsCounter.Add(1), 10) + ":"
}

// NewPool is a redigo pool on addr, closed when the test ends.
func NewPool(t testing.TB, addr string) *redis.Pool {
	p := &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr) },
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Mini starts a miniredis of the test's own, its TIME set to now.
func Mini(t testing.TB) *Server {
	m := miniredis.RunT(t)
	m.SetTime(time.Now())
	return &Server{Name: "miniredis", Addr: m.Addr(), Mini: m, Pool: NewPool(t, m.Addr()), NS: Namespace(), T: t}
}

// Real is a server on the redis-server at addr, which must answer PING;
// the test's keys are deleted when it ends.
func Real(t testing.TB, name, addr string) *Server {
	t.Helper()
	s := On(t, name, addr)
	if _, err := s.Do("PING"); err != nil {
		t.Fatalf("%s at %s: %v", name, addr, err)
	}
	s.DeleteKeysAtEnd(t)
	return s
}

// On is a server on addr with a fresh namespace, and nothing more: no
// PING, no cleanup (a private server that dies with the test).
func On(t testing.TB, name, addr string) *Server {
	return &Server{Name: name, Addr: addr, Pool: NewPool(t, addr), NS: Namespace(), T: t}
}

// DeleteKeysAtEnd deletes the test's keys when it ends.
func (s *Server) DeleteKeysAtEnd(t testing.TB) {
	t.Cleanup(func() {
		ks, _ := s.KeysMatching(s.NS + "*")
		for _, k := range ks {
			s.Do("DEL", k)
		}
	})
}

// Do runs one command on a connection of its own.
func (s *Server) Do(cmd string, args ...any) (any, error) {
	if s.DoFunc != nil {
		return s.DoFunc(cmd, args...)
	}
	c := s.Pool.Get()
	defer c.Close()
	return c.Do(cmd, args...)
}

// Must is Do, failing the test on an error.
func (s *Server) Must(t testing.TB, cmd string, args ...any) any {
	t.Helper()
	v, err := s.Do(cmd, args...)
	if err != nil {
		t.Fatalf("%s %q: %v", cmd, args, err)
	}
	return v
}

// Broadcast runs a command on every primary (BroadcastFunc), or once
// through Do.
func (s *Server) Broadcast(cmd string, args ...any) error {
	if s.BroadcastFunc != nil {
		return s.BroadcastFunc(cmd, args...)
	}
	_, err := s.Do(cmd, args...)
	return err
}

// PTTL is a key's PTTL (-1 ms: no expiry, -2 ms: no key), failing the
// test on an error.
func (s *Server) PTTL(t testing.TB, key string) time.Duration {
	t.Helper()
	v, err := redis.Int64(s.Do("PTTL", key))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(v) * time.Millisecond
}

// KeysMatching lists the keys matching pattern (on every node).
func (s *Server) KeysMatching(pattern string) ([]string, error) {
	if s.KeysFunc != nil {
		return s.KeysFunc(pattern)
	}
	return redis.Strings(s.Do("KEYS", pattern))
}

// Keys lists the test's keys (on every node), sorted.
func (s *Server) Keys(t testing.TB) []string {
	t.Helper()
	ks, err := s.KeysMatching(s.NS + "*")
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	sort.Strings(ks)
	return ks
}

// Snapshot is every key of the test with its type and value, to prove that
// a call changed nothing. One script reads each key, so that the replies
// are the same over any client and protocol (go-redis's RESP3 too).
func (s *Server) Snapshot(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range s.Keys(t) {
		v, err := redis.Values(s.Do("EVAL", snapshotLua, 1, k))
		if err != nil || len(v) != 2 {
			t.Fatalf("reading %s: %v %v", k, v, err)
		}
		typ, _ := redis.String(v[0], nil)
		val, _ := redis.Strings(v[1], nil)
		out[k] = typ + "=" + fmt.Sprintf("%q", val)
	}
	return out
}

// snapshotLua replies {type, value} for KEYS[1], the value a list of
// strings: sets sorted, hashes as field, value pairs sorted by field, any
// type the engine does not write as its DUMP.
const snapshotLua = `
local k = KEYS[1]
local t = redis.call('TYPE', k)['ok']
local v
if t == 'string' then v = {redis.call('GET', k)}
elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1)
elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
elseif t == 'set' then v = redis.call('SMEMBERS', k); table.sort(v)
elseif t == 'hash' then
  local flat, fields = redis.call('HGETALL', k), {}
  for i = 1, #flat, 2 do fields[#fields + 1] = {flat[i], flat[i + 1]} end
  table.sort(fields, function(a, b) return a[1] < b[1] end)
  v = {}
  for _, f in ipairs(fields) do v[#v + 1] = f[1]; v[#v + 1] = f[2] end
else v = {redis.call('DUMP', k)} end
return {t, v}
`

// Advance moves time forward by d: on miniredis both the TTL clock
// (FastForward) and TIME (SetTime) jump at once; a real server is waited
// on.
func (s *Server) Advance(d time.Duration) {
	if s.Mini == nil {
		time.Sleep(d)
		return
	}
	v, err := redis.Int64s(s.Do("TIME"))
	if err != nil || len(v) != 2 {
		panic(fmt.Sprintf("miniredis TIME: %v %v", v, err)) // an in-process server
	}
	s.Mini.FastForward(d)
	s.Mini.SetTime(time.Unix(v[0], v[1]*1000).Add(d))
}

// Realtime makes miniredis's clocks follow the wall clock until the test
// ends, for goroutines that pace themselves in real time (the watchdog,
// waiters). A real server needs nothing.
func (s *Server) Realtime(t testing.TB) {
	if s.Mini == nil {
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := time.Now()
		s.Mini.SetTime(last)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				d := now.Sub(last)
				if int64(d) > s.tickMax.Load() {
					s.tickMax.Store(int64(d))
				}
				s.Mini.FastForward(d)
				s.Mini.SetTime(now)
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// RealtimeStep is the longest step Realtime has moved miniredis's clocks
// by so far: between its two moves (the keys' expiries, then TIME) a
// command may see one clock that far ahead of the other.
func (s *Server) RealtimeStep() time.Duration { return time.Duration(s.tickMax.Load()) }

// Context is a context that ends a minute from now or with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// LockHolder is the token of a lock's holder from an HGET of its hash's
// holding 'v' (the value opens with it and a space, with "+" in front
// while the lock is flagged: scripts/lib/lock.lua), "" if the lock is
// free. A flagged lease past its end is not checked.
func LockHolder(reply any, err error) (string, error) {
	v, err := redis.String(reply, err)
	if errors.Is(err, redis.ErrNil) {
		return "", nil
	}
	token, _, _ := strings.Cut(strings.TrimPrefix(v, "+"), " ")
	if token == "-" { // free, its last fence kept
		token = ""
	}
	return token, err
}
