// Package suite is the behavioural test suite of atomicredis, written
// against the exported API only, so that every client the engine runs on —
// a redigo pool, the go-redis adapter in the goredis module, a cluster
// client — runs the same tests on miniredis and on a real server.
//
//	func TestSuite(t *testing.T) {
//		suite.Run(t, func(t *testing.T) suite.Target {
//			return suite.Target{Pool: pool, Namespace: suite.Namespace()}
//		})
//	}
package suite

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
)

// Target is one client on one server for one test.
type Target struct {
	// Pool is the client under test.
	Pool atomicredis.Pool
	// Namespace prefixes every key the test writes; it must be unique to
	// the test (Namespace() gives one) and contain no braces.
	Namespace string
	// Do runs one command, routed by its first key on a cluster, and
	// returns the reply as redigo gives it. Nil: on a connection from Pool.
	Do func(cmd string, args ...any) (any, error)
	// Keys returns the keys matching pattern on every node. Nil: KEYS
	// through Do.
	Keys func(pattern string) ([]string, error)
	// Broadcast runs a command on every primary (SCRIPT FLUSH). Nil: Do.
	Broadcast func(cmd string, args ...any) error
	// Mini is the miniredis server, whose clocks the tests move by hand;
	// nil on a real server, where tests wait instead.
	Mini *miniredis.Miniredis
	// Options are given to every Engine of the test, after its namespace
	// (WithReplicaAck on a cluster with replicas, say).
	Options []atomicredis.Option
}

// Namespace returns a key prefix unique to one test, so tests on a shared
// server never see each other's keys.
func Namespace() string { return testserver.Namespace() }

// Run runs every test of the suite as a subtest, each on a Target of its
// own from newTarget. On a real server (Mini nil) the keys a test leaves
// are deleted when it ends.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, s *server)
	}{
		{"LockAcquireRelease", lockAcquireRelease},
		{"LockStaleHolder", lockStaleHolder},
		{"LockFenceGrowsAcrossEngines", lockFenceGrowsAcrossEngines},
		{"LockWaitsForRelease", lockWaitsForRelease},
		{"LockWaitRunsOut", lockWaitRunsOut},
		{"LockContext", lockContext},
		{"WatchdogKeepsLockUntilUnlock", watchdogKeepsLock},
		{"LockMutualExclusion", lockMutualExclusion},
		{"SemaphoreLimit", semaphoreLimit},
		{"SemaphoreTimeout", semaphoreTimeout},
		{"SemaphoreExtendKeepsPermit", semaphoreExtendKeepsPermit},
		{"SemaphoreWait", semaphoreWait},
		{"SemaphoreAdmission", semaphoreAdmission},
		{"RecentList", recentList},
		{"SuggestExact", suggestExact},
		{"Activity", activity},
		{"ActivityWrongType", activityWrongType},
		{"BadInputWritesNothing", badInputWritesNothing},
		{"WrongType", wrongType},
		{"ScriptFlushFallsBackToEval", scriptFlush},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, setup(t, newTarget(t)))
		})
	}
}

// server is a Target with the helpers the tests share; they are named
// as in the package's own tests (helpers_test.go), and both rest on
// internal/testserver.
type server struct {
	ts        *testserver.Server
	mini      *miniredis.Miniredis // nil on a real server
	ns        string
	pool      atomicredis.Pool // the client under test
	options   []atomicredis.Option
	broadcast func(cmd string, args ...any) error
	t         testing.TB // closes the test's engines when it ends
}

func setup(t *testing.T, tg Target) *server {
	t.Helper()
	if tg.Pool == nil || tg.Namespace == "" {
		t.Fatal("suite: a Target needs a Pool and a Namespace")
	}
	ts := &testserver.Server{Name: "target", Mini: tg.Mini, NS: tg.Namespace, DoFunc: tg.Do, KeysFunc: tg.Keys}
	if ts.DoFunc == nil {
		ts.DoFunc = func(cmd string, args ...any) (any, error) {
			c, err := tg.Pool.GetContext(context.Background())
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.Do(cmd, args...)
		}
	}
	s := &server{ts: ts, mini: tg.Mini, ns: tg.Namespace, pool: tg.Pool, options: tg.Options, broadcast: tg.Broadcast, t: t}
	if s.broadcast == nil {
		s.broadcast = func(cmd string, args ...any) error { _, err := s.do(cmd, args...); return err }
	}
	s.must(t, "PING")
	if s.mini != nil {
		s.mini.SetTime(time.Now())
	} else {
		ts.DeleteKeysAtEnd(t)
	}
	return s
}

// engine returns an Engine on the target with the test's namespace,
// closed when the test ends: its wake subscription would otherwise
// outlive the test by two seconds.
func (s *server) engine(opts ...atomicredis.Option) *atomicredis.Engine {
	all := append([]atomicredis.Option{atomicredis.WithNamespace(s.ns)}, s.options...)
	e := atomicredis.New(s.pool, append(all, opts...)...)
	s.t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func (s *server) do(cmd string, args ...any) (any, error) { return s.ts.Do(cmd, args...) }

func (s *server) must(t testing.TB, cmd string, args ...any) any {
	t.Helper()
	return s.ts.Must(t, cmd, args...)
}

// keys lists the test's keys, sorted.
func (s *server) keys(t testing.TB) []string { t.Helper(); return s.ts.Keys(t) }

// snapshot is every key of the test with its type and value, to prove
// that a call changed nothing.
func (s *server) snapshot(t testing.TB) map[string]string { t.Helper(); return s.ts.Snapshot(t) }

// advance moves time forward by d: miniredis's clocks jump, a real server
// is waited on.
func (s *server) advance(d time.Duration) { s.ts.Advance(d) }

// realtime makes miniredis's clocks follow the wall clock until the test
// ends, for goroutines that pace themselves in real time (the watchdog,
// waiters). A real server needs nothing.
func (s *server) realtime(t testing.TB) { s.ts.Realtime(t) }

func ctxT(t testing.TB) context.Context { return testserver.Context(t) }

func sameStrings(a, b []string) bool { return slices.Equal(a, b) }
