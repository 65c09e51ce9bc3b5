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
		run  func(t *testing.T, s *testserver.Server)
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
		{"ScriptFlushLoadsAgain", scriptFlush},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, setup(t, newTarget(t)))
		})
	}
}

// setup is the server of one test on tg: a testserver.Server whose
// commands go through the client under test (Engines), or tg.Do.
func setup(t *testing.T, tg Target) *testserver.Server {
	t.Helper()
	if tg.Pool == nil || tg.Namespace == "" {
		t.Fatal("suite: a Target needs a Pool and a Namespace")
	}
	s := &testserver.Server{Name: "target", Mini: tg.Mini, NS: tg.Namespace, T: t,
		Engines: tg.Pool, DoFunc: tg.Do, KeysFunc: tg.Keys, BroadcastFunc: tg.Broadcast}
	for _, o := range tg.Options {
		s.EngineOptions = append(s.EngineOptions, o)
	}
	if s.DoFunc == nil {
		s.DoFunc = func(cmd string, args ...any) (any, error) {
			c, err := tg.Pool.GetContext(context.Background())
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.Do(cmd, args...)
		}
	}
	s.Must(t, "PING")
	if s.Mini != nil {
		s.Mini.SetTime(time.Now())
	} else {
		s.DeleteKeysAtEnd(t)
	}
	return s
}

// engine returns an Engine on the client under test (s.Engines) with the
// test's namespace and the Target's Options, closed when the test ends:
// its wake subscription would otherwise outlive the test by two seconds.
func engine(s *testserver.Server, opts ...atomicredis.Option) *atomicredis.Engine {
	all := []atomicredis.Option{atomicredis.WithNamespace(s.NS)}
	for _, o := range s.EngineOptions {
		all = append(all, o.(atomicredis.Option))
	}
	e := atomicredis.New(s.Engines, append(all, opts...)...)
	s.T.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func ctxT(t testing.TB) context.Context { return testserver.Context(t) }
