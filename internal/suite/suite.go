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
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
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

var nsCounter atomic.Int64

// Namespace returns a key prefix unique to one test, so tests on a shared
// server never see each other's keys.
func Namespace() string {
	return "t" + uuid.NewString()[:8] + "-" + strconv.FormatInt(nsCounter.Add(1), 10) + ":"
}

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
		{"SemaphoreRefreshKeepsPermit", semaphoreRefreshKeepsPermit},
		{"SemaphoreWait", semaphoreWait},
		{"SemaphoreAdmission", semaphoreAdmission},
		{"RecentList", recentList},
		{"SuggestExact", suggestExact},
		{"Activity", activity},
		{"BadInputWritesNothing", badInputWritesNothing},
		{"WrongType", wrongType},
		{"ScriptFlushFallsBackToEval", scriptFlush},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, setup(t, newTarget(t)))
		})
	}
}

// server is a Target with the helpers the tests share.
type server struct {
	Target
	ns string
}

func setup(t *testing.T, tg Target) *server {
	t.Helper()
	if tg.Pool == nil || tg.Namespace == "" {
		t.Fatal("suite: a Target needs a Pool and a Namespace")
	}
	s := &server{Target: tg, ns: tg.Namespace}
	if s.Do == nil {
		s.Do = func(cmd string, args ...any) (any, error) {
			c, err := tg.Pool.GetContext(context.Background())
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.Do(cmd, args...)
		}
	}
	if s.Keys == nil {
		s.Keys = func(pattern string) ([]string, error) { return redis.Strings(s.Do("KEYS", pattern)) }
	}
	if s.Broadcast == nil {
		s.Broadcast = func(cmd string, args ...any) error { _, err := s.Do(cmd, args...); return err }
	}
	if _, err := s.Do("PING"); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if s.Mini != nil {
		s.Mini.SetTime(time.Now())
	} else {
		t.Cleanup(func() {
			ks, _ := s.Keys(s.ns + "*")
			for _, k := range ks {
				s.Do("DEL", k)
			}
		})
	}
	return s
}

// engine returns an Engine on the target with the test's namespace.
func (s *server) engine(opts ...atomicredis.Option) *atomicredis.Engine {
	all := append([]atomicredis.Option{atomicredis.WithNamespace(s.ns)}, s.Options...)
	return atomicredis.New(s.Pool, append(all, opts...)...)
}

func (s *server) must(t testing.TB, cmd string, args ...any) any {
	t.Helper()
	v, err := s.Do(cmd, args...)
	if err != nil {
		t.Fatalf("%s %q: %v", cmd, args, err)
	}
	return v
}

// keys lists the test's keys, sorted.
func (s *server) keys(t testing.TB) []string {
	t.Helper()
	ks, err := s.Keys(s.ns + "*")
	if err != nil {
		t.Fatalf("keys: %v", err)
	}
	sort.Strings(ks)
	return ks
}

// snapshot is every key of the test with its type and value, to prove
// that a call changed nothing: DUMP on a real server; miniredis, whose DUMP
// takes strings only, describes its keys itself.
func (s *server) snapshot(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	if s.Mini != nil {
		out["miniredis"] = s.Mini.Dump()
		return out
	}
	for _, k := range s.keys(t) {
		typ, err := redis.String(s.Do("TYPE", k))
		if err != nil {
			t.Fatalf("TYPE %s: %v", k, err)
		}
		dump, err := redis.String(s.Do("DUMP", k))
		if err != nil && err != redis.ErrNil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = typ + " " + strconv.Quote(dump)
	}
	return out
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// advance moves time forward by d: on miniredis the TTL clock
// (FastForward) and TIME (SetTime) jump at once; a real server is waited
// on.
func (s *server) advance(t testing.TB, d time.Duration) {
	if s.Mini == nil {
		time.Sleep(d)
		return
	}
	v, err := redis.Int64s(s.Do("TIME"))
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v %v", v, err)
	}
	s.Mini.FastForward(d)
	s.Mini.SetTime(time.Unix(v[0], v[1]*1000).Add(d))
}

// realtime makes miniredis's clocks follow the wall clock until the test
// ends, for goroutines that pace themselves in real time (the watchdog,
// waiters). A real server needs nothing.
func (s *server) realtime(t testing.TB) {
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
				s.Mini.FastForward(now.Sub(last))
				s.Mini.SetTime(now)
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func sameStrings(got, want []string) bool {
	return len(got) == len(want) && (len(got) == 0 || slices.Equal(got, want))
}
