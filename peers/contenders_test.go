package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	argoredis "github.com/atomicredis/atomicredis/goredis"
	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// errNotObtained is a library's answer that the lock is held (a try), or
// that its wait ran out (its tries, its deadline).
var errNotObtained = errors.New("not obtained")

// unlock gives a lock back.
type unlock func(ctx context.Context) error

// lib is one library's lock on the bench server: try makes one attempt,
// lock waits (nil: the library does not wait).
type lib struct {
	try, lock func(ctx context.Context, name string) (unlock, error)
	close     func()
}

// contender is a library as a contender: its name, the commands it sends
// itself (INFO commandstats names; what its scripts call is inside their
// time) and how to open it with keys under the prefix ns.
type contender struct {
	name string
	sent []string
	open func(ns string) *lib
}

var (
	atomicredisC        = contender{"atomicredis", []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "blpop", "brpop", "blmove", "blmpop", "brpoplpush"}, openAtomicredis}
	atomicredisGoredisC = contender{"atomicredis-goredis", atomicredisC.sent, openAtomicredisGoredis}
	redislockC          = contender{"redislock", []string{"evalsha", "eval"}, openRedislock}
	redsyncC            = contender{"redsync", []string{"set", "evalsha", "eval"}, openRedsync}
	rueidislockC        = contender{"rueidislock", []string{"evalsha", "eval"}, openRueidislock}
	floorC              = contender{"floor", []string{"set", "del"}, openFloor}
	floorCADC           = contender{"floor-cad", []string{"set", "evalsha", "eval"}, openFloorCAD}
)

func newRedigoPool() *redis.Pool {
	return &redis.Pool{
		MaxIdle:     redigoMaxIdle,
		IdleTimeout: time.Minute,
		Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", benchAddr) },
	}
}

func openAtomicredis(ns string) *lib {
	pool := newRedigoPool()
	return engineLib(atomicredis.New(pool, atomicredis.WithNamespace(ns)), func() { pool.Close() })
}

// openAtomicredisGoredis is atomicredis through its goredis adapter, on
// a go-redis client as redislock's.
func openAtomicredisGoredis(ns string) *lib {
	c := newGoredisClient()
	pool := argoredis.NewPool(c)
	return engineLib(atomicredis.New(pool, atomicredis.WithNamespace(ns)), func() { pool.Close(); c.Close() })
}

// engineLib is the lib of an engine: TryLock, Lock with a wait, Unlock;
// closing it closes the engine, then its pool (closePool).
func engineLib(e *atomicredis.Engine, closePool func()) *lib {
	held := func(l *atomicredis.Lock, err error) (unlock, error) {
		if errors.Is(err, atomicredis.ErrNotAcquired) {
			return nil, fmt.Errorf("%w: %w", errNotObtained, err)
		}
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			return held(e.TryLock(ctx, name, atomicredis.LockOptions{TTL: lease}))
		},
		lock: func(ctx context.Context, name string) (unlock, error) {
			return held(e.Lock(ctx, name, atomicredis.LockOptions{TTL: lease, Wait: waitFor}))
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.Close(ctx)
			closePool()
		},
	}
}

// newGoredisClient is redislock's client: go-redis's defaults.
func newGoredisClient() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: benchAddr})
}

func openRedislock(ns string) *lib {
	c := newGoredisClient()
	rl := redislock.New(c)
	held := func(l *redislock.Lock, err error) (unlock, error) {
		if errors.Is(err, redislock.ErrNotObtained) {
			return nil, fmt.Errorf("%w: %w", errNotObtained, err)
		}
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			return held(rl.Obtain(ctx, ns+name, lease, nil)) // nil: NoRetry
		},
		lock: func(ctx context.Context, name string) (unlock, error) {
			wctx, cancel := context.WithTimeout(ctx, waitFor)
			defer cancel()
			u, err := held(rl.Obtain(wctx, ns+name, lease, &redislock.Options{RetryStrategy: redislock.LinearBackoff(retryEvery)}))
			if err != nil && ctx.Err() == nil && wctx.Err() != nil {
				err = fmt.Errorf("%w: waited %v: %w", errNotObtained, waitFor, err)
			}
			return u, err
		},
		close: func() { c.Close() },
	}
}

func openRedsync(ns string) *lib {
	pool := newRedigoPool()
	rs := redsync.New(redsyncredigo.NewPool(pool))
	acquire := func(ctx context.Context, name string, tryLock bool) (unlock, error) {
		var m *redsync.Mutex
		var err error
		if tryLock {
			m = rs.NewMutex(ns+name, redsync.WithExpiry(lease))
			err = m.TryLockContext(ctx)
		} else {
			m = rs.NewMutex(ns+name, redsync.WithExpiry(lease), redsync.WithTries(redsyncTries), redsync.WithRetryDelay(retryEvery))
			err = m.LockContext(ctx)
		}
		var taken *redsync.ErrTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
			return nil, fmt.Errorf("%w: %w", errNotObtained, err)
		}
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = errors.New("redsync: unlock found the lock gone")
			}
			return err
		}, nil
	}
	return &lib{
		try:   func(ctx context.Context, name string) (unlock, error) { return acquire(ctx, name, true) },
		lock:  func(ctx context.Context, name string) (unlock, error) { return acquire(ctx, name, false) },
		close: func() { pool.Close() },
	}
}

// rueidislockCallTimeout is rueidislock's TryNextAfter: with one key
// (KeyMajority 1) there is no next key to try, and what remains of it is
// the timeout of every acquiring call, 20 ms by default: here as long as
// go-redis's ReadTimeout under redislock.
const rueidislockCallTimeout = 5 * time.Second

// openRueidislock opens a rueidislock Locker on one key per name
// (KeyMajority 1, as the other contenders' one node), with Redis 7.0.5's
// NOLOOP tracking, and leases as the others'. A Locker that cannot start
// (its client dials at once) is a lib whose every call fails with why,
// so that its rows say it.
func openRueidislock(ns string) *lib {
	lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{benchAddr}},
		KeyPrefix:      ns + "rueidislock",
		KeyValidity:    lease,
		KeyMajority:    1,
		NoLoopTracking: true,
		TryNextAfter:   rueidislockCallTimeout,
	})
	if err != nil {
		fail := func(context.Context, string) (unlock, error) {
			return nil, fmt.Errorf("rueidislock.NewLocker: %w", err)
		}
		return &lib{try: fail, lock: fail, close: func() {}}
	}
	// The lock lives as long as the context it was taken with, and its
	// CancelFunc releases it: it returns once the release script ran.
	held := func(cancel context.CancelFunc) unlock {
		return func(context.Context) error { cancel(); return nil }
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			_, cancel, err := lk.TryWithContext(ctx, name)
			if errors.Is(err, rueidislock.ErrNotLocked) {
				return nil, fmt.Errorf("%w: %w", errNotObtained, err)
			}
			if err != nil {
				return nil, err
			}
			return held(cancel), nil
		},
		lock: func(ctx context.Context, name string) (unlock, error) {
			// Its wait ends only with its context: bound it as redislock's.
			// The bound's context is the lock's too, cancelled at unlock.
			wctx, wcancel := context.WithTimeout(ctx, waitFor)
			_, cancel, err := lk.WithContext(wctx, name)
			if err != nil {
				wcancel()
				if ctx.Err() == nil && wctx.Err() != nil {
					err = fmt.Errorf("%w: waited %v: %w", errNotObtained, waitFor, err)
				}
				return nil, err
			}
			return func(context.Context) error { cancel(); wcancel(); return nil }, nil
		},
		close: lk.Close,
	}
}

// openFloor is the physical limit of a lock cycle: SET NX PX, then DEL,
// each on a connection taken with the caller's context, sent with it.
func openFloor(ns string) *lib { return floorLib(ns, false) }

// openFloorCAD is the floor of a release that checks its token, as a real
// one must: SET NX PX, then compare-and-delete (cadScript).
func openFloorCAD(ns string) *lib { return floorLib(ns, true) }

// cadScript is the classic release: delete the key if it holds the token.
var cadScript = redis.NewScript(1, cadSource)

const cadSource = `if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end`

// floorLib is a floor whose release is DEL, or with cad cadScript
// (EVALSHA, EVAL on NOSCRIPT).
func floorLib(ns string, cad bool) *lib {
	pool := newRedigoPool()
	conn := func(ctx context.Context, f func(c redis.Conn) (any, error)) (any, error) {
		c, err := pool.GetContext(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return f(c)
	}
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			key := ns + name
			v, err := conn(ctx, func(c redis.Conn) (any, error) {
				return redis.DoContext(c, ctx, "SET", key, "token", "NX", "PX", lease.Milliseconds())
			})
			if err != nil {
				return nil, err
			}
			if v == nil {
				return nil, errNotObtained
			}
			return func(ctx context.Context) error {
				v, err := conn(ctx, func(c redis.Conn) (any, error) {
					if cad {
						return cadScript.DoContext(ctx, c, key, "token")
					}
					return redis.DoContext(c, ctx, "DEL", key)
				})
				if err == nil && v != int64(1) {
					err = fmt.Errorf("release of %s: %v, not 1", key, v)
				}
				return err
			}, nil
		},
		close: func() { pool.Close() },
	}
}

// ---------------------------------------------------------------------------
// The settings

// printSettings writes each contender's version and fixed settings.
func printSettings(w io.Writer) {
	versions := modVersions()
	gr := newGoredisClient()
	o := gr.Options()
	gr.Close()
	lines := []string{
		fmt.Sprintf("atomicredis %s on a redigo %s pool (MaxIdle %d, MaxActive 0: unbounded, no dial options): TryLock / Lock(Wait %v, FIFO queue), TTL %v; Unlock",
			versions["github.com/atomicredis/atomicredis"], versions["github.com/gomodule/redigo"], redigoMaxIdle, waitFor, lease),
		fmt.Sprintf("atomicredis-goredis: atomicredis as above through its goredis adapter (goredis.NewPool, %s) on a go-redis client as redislock's, below",
			versions["github.com/atomicredis/atomicredis/goredis"]),
		fmt.Sprintf("bsm/redislock %s on go-redis %s (its defaults: PoolSize %d, MinIdleConns %d, ReadTimeout %v, WriteTimeout %v, protocol RESP%d): Obtain(ttl %v) with no retry (NoRetry) to try; to wait, LinearBackoff(%v) under a %v deadline; Release",
			versions["github.com/bsm/redislock"], versions["github.com/redis/go-redis/v9"], o.PoolSize, o.MinIdleConns, o.ReadTimeout, o.WriteTimeout, o.Protocol, lease, retryEvery, waitFor),
		fmt.Sprintf("go-redsync/redsync/v4 %s on its redigo pool (one node, quorum 1; the pool as atomicredis's): NewMutex(WithExpiry(%v)) per acquisition; TryLockContext to try; to wait, LockContext with WithTries(%d), WithRetryDelay(%v) (its defaults: 32 tries, 50-250 ms); UnlockContext",
			versions["github.com/go-redsync/redsync/v4"], lease, redsyncTries, retryEvery),
		fmt.Sprintf("rueidislock (rueidis %s) on its own rueidis client (its defaults; one pipelined connection, client-side caching): KeyMajority 1 (one key a name; its default 2 of 3), NoLoopTracking true (Redis 7.0.5+), KeyValidity %v, TryNextAfter %v: with one key it is only the timeout of each acquiring call, whose default 20 ms a call on this busy 2-core machine can outlast, so as long as the ReadTimeout of redislock's go-redis (%v); TryWithContext to try; to wait, WithContext under a %v deadline; its CancelFunc to unlock",
			versions["github.com/redis/rueidis"], lease, rueidislockCallTimeout, o.ReadTimeout, waitFor),
		fmt.Sprintf("the floor: SET key token NX PX %d, then DEL key, each on a connection from a redigo pool as atomicredis's (GetContext), sent with the context (redis.DoContext)",
			lease.Milliseconds()),
		fmt.Sprintf("floor-cad: the floor with a release that checks its token, as a real one must: SET key token NX PX %d, then EVALSHA (EVAL on NOSCRIPT, redigo's Script) of %q",
			lease.Milliseconds(), cadSource),
		fmt.Sprintf("every caller's context: context.Background() (a crowd's: the round's, cancelled at a wind-down past %v); under <name>/cancel each operation, a try or lock and its unlock, under a fresh context.WithCancel of it, cancelled after the unlock (an HTTP handler's)",
			drainTimeout),
		fmt.Sprintf("own names: %d goroutines, a name each; crowds: %d goroutines, no hold, window %v; %d goroutines holding %v, window %v; each after %v + a turn of the queue",
			ownClients, hotClients, window(hotWindow, briefHotWindow), crowdClients, crowdHold, window(crowdWindow, briefCrowdWindow), warmup),
	}
	for _, l := range lines {
		fmt.Fprintln(w, "settings: "+l)
	}
}

// modVersions reads the versions this module builds with from its go.mod
// (go test runs in the module's directory; a test binary carries no
// module versions of its own): path → version, or "this tree (replace
// ../)" for a module replaced by a directory.
func modVersions() map[string]string {
	versions := map[string]string{}
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return versions
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		switch {
		case len(f) == 4 && f[0] == "replace" && f[2] == "=>":
			versions[f[1]] = "this tree (replace " + f[3] + ")"
		case len(f) >= 2 && strings.HasPrefix(f[1], "v") && versions[f[0]] == "":
			versions[f[0]] = f[1]
		}
	}
	return versions
}

// The settings name the versions built with.
func TestModVersions(t *testing.T) {
	v := modVersions()
	for _, path := range []string{"github.com/bsm/redislock", "github.com/go-redsync/redsync/v4", "github.com/redis/go-redis/v9", "github.com/redis/rueidis", "github.com/gomodule/redigo"} {
		if !strings.HasPrefix(v[path], "v") {
			t.Errorf("%s: version %q", path, v[path])
		}
	}
	if got := v["github.com/atomicredis/atomicredis"]; got != "this tree (replace ../)" {
		t.Errorf("atomicredis: %q", got)
	}
	if got := v["github.com/atomicredis/atomicredis/goredis"]; got != "this tree (replace ../goredis)" {
		t.Errorf("atomicredis/goredis: %q", got)
	}
}
