package peers

// BenchmarkBudget measures the uncontended cycle's budget line by line
// (docs/handoff.md): the same cycle as BenchmarkUncontended's, one
// goroutine, TryLock + Unlock, through rungs of Lua that each add one
// part of lock_acquire's and lock_release's common path, with the
// library's keys and arguments, beside atomicredis itself, redislock and
// floor-cad, in interleaved rounds:
//
//	go test -run '^$' -bench Budget -benchtime 3s
//
// The rungs (testdata/budget; "ours" is the library's own two scripts,
// which return before their shared Lua):
//
//	empty   two EVALSHA of nothing, no keys, no arguments
//	args    two EVALSHA of nothing, with v4's lock_acquire's 5 keys and 7
//	        arguments and lock_release's 4 and 4
//	reads   and their reads: GET, EXISTS | GET, ZCARD
//	lease   and the lease: SET PX | DEL
//	fence   and the counter's INCR (v4's lock_acquire | lock_release
//	        added its PEXPIRE)
//	ours    the library's (v5, design hp: the lock's one key, a hash):
//	        HGET, HSET, PEXPIRE | HGET, HSET
//
// and designs, measured beside them: ours-lean-release, v4's lock_acquire
// (scripts/election_lock_acquire.lua, which is v4's) and a lock_release
// without the queue's ZCARD (a waiter would mark the lock's value);
// onekey, one key a name for the fence, the holder and its lease's
// deadline by the server's clock (GET, TIME, EXISTS, SET PX | GET, SET
// KEEPTTL); xd and x1, the fence in the lock's value (GET, SET PX | GET,
// SET PX), with every key declared or with the lock's alone; m, one
// string a name while nothing is flagged, read with MGET (MGET, SET PX |
// MGET, SET KEEPTTL); z and zm, the clock's fence, nothing kept (TIME,
// SET NX PX | GET or MGET, DEL). The same
// lines, in instructions, which repeat from run to run where these
// microseconds do not: testdata/budget/ir.sh.

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/gomodule/redigo/redis"
)

var (
	rungEmptyC = rungC("empty", "testdata/budget/empty.lua", "testdata/budget/empty.lua", false)
	rungArgsC  = rungC("args", "testdata/budget/empty.lua", "testdata/budget/empty.lua", true)
	rungReadsC = rungC("reads", "testdata/budget/reads_acquire.lua", "testdata/budget/reads_release.lua", true)
	rungLeaseC = rungC("lease", "testdata/budget/lease_acquire.lua", "testdata/budget/lease_release.lua", true)
	rungFenceC = rungC("fence", "testdata/budget/fence_acquire.lua", "testdata/budget/lease_release.lua", true)
	rungOursC  = rungD("ours", "../scripts/lock_acquire.lua", "../scripts/lock_release.lua", formLib1)

	// Designs measured beside them (not the library's).
	rungLeanC   = rungC("ours-lean-release", "../scripts/election_lock_acquire.lua", "testdata/budget/lean_release.lua", true) // v4's layout
	rungOneKeyC = rungC("onekey", "testdata/budget/onekey_acquire.lua", "testdata/budget/onekey_release.lua", true)

	// The fence in the lock's value ("- fence" when free, kept for the
	// retention), each with its own keys and arguments: xd declares every
	// key its slow path would touch, as the library must; x1 passes only
	// the lock's (its other keys would be built in the script).
	rungXDC = rungD("xd", "testdata/budget/xd_acquire.lua", "testdata/budget/xd_release.lua", formXD)
	rungX1C = rungD("x1", "testdata/budget/x1_acquire.lua", "testdata/budget/x1_release.lua", formX1)

	// One string a name while nothing is flagged, read with MGET (a
	// flagged lock's hash reads as nil, not WRONGTYPE): m keeps the free
	// value for the rest of the lease; z and zm keep nothing, the fence
	// the clock's (zm reading with MGET, with the library's arguments).
	rungMC  = rungD("m", "testdata/budget/m_acquire.lua", "testdata/budget/m_release.lua", formLib1)
	rungZC  = rungD("z", "testdata/budget/z_acquire.lua", "testdata/budget/del_release.lua", formX1)
	rungZMC = rungD("zm", "testdata/budget/z_acquire.lua", "testdata/budget/zm_release.lua", formLib1)
)

// A form is the keys and arguments a rung's scripts are called with.
type form int

const (
	formNone form = iota // none
	formLib              // v4's: lock_acquire's 5 keys and 7 arguments, lock_release's 4 and 4
	formLib1             // the library's (v5): the lock's one key, 2 arguments (a one try) | 3
	formXD               // the library's keys, its constants packed: 5 keys and 4 arguments | 4 and 3
	formX1               // the lock's key, the token and the lease | the token and the retention
)

// args are a rung's acquire and release arguments in form f, for lock key
// k and token tok, the count of keys first.
func (f form) args(k, tok, ns string) (acq, rel []any) {
	ms, ret := lease.Milliseconds(), 86400000
	switch f {
	case formLib:
		return []any{5, k, k + ":fence", k + ":queue", k + ":waiters", k + ":void:" + tok, tok, "0", "1000", ms, ret, "3408f1ee-81fa", ns + "wake:"},
			[]any{4, k, k + ":fence", k + ":queue", k + ":waiters", tok, ret, ns + "wake:", "3408f1ee-81fa"}
	case formLib1:
		return []any{1, k, tok, ms},
			[]any{1, k, tok, ns + "wake:", "3408f1ee-81fa"}
	case formXD:
		return []any{5, k, k + ":fence", k + ":queue", k + ":waiters", k + ":void:" + tok, tok, "0", ms, "1000:86400000:3408f1ee-81fa:" + ns + "wake:"},
			[]any{4, k, k + ":fence", k + ":queue", k + ":waiters", tok, ret, ns + "wake:3408f1ee-81fa"}
	case formX1:
		return []any{1, k, tok, ms}, []any{1, k, tok, ret}
	}
	return nil, nil
}

// rungC is a rung of the budget: its acquire and release scripts (files),
// run with the library's keys and arguments if keyed, else with none.
func rungC(name, acquire, release string, keyed bool) contender {
	f := formNone
	if keyed {
		f = formLib
	}
	return rungD(name, acquire, release, f)
}

// rungD is a rung or a design: its acquire and release scripts (files),
// run with the keys and arguments of form f.
func rungD(name, acquire, release string, f form) contender {
	return contender{"rung-" + name, []string{"evalsha", "eval"}, func(ns string) *lib { return rungLib(ns, acquire, release, f) }}
}

// rungTokens numbers the rungs' tokens, each as long as the library's.
var rungTokens atomic.Int64

func rungLib(ns, acquireFile, releaseFile string, f form) *lib {
	read := func(file string) string {
		src, err := os.ReadFile(file)
		if err != nil {
			panic(err) // the module's own files
		}
		return string(src)
	}
	keys := 0
	if f != formNone {
		keys = -1 // the count goes first, with the keys
	}
	acquire, release := redis.NewScript(keys, read(acquireFile)), redis.NewScript(keys, read(releaseFile))
	pool := newRedigoPool()
	return &lib{
		try: func(ctx context.Context, name string) (unlock, error) {
			tok := fmt.Sprintf("%08x-0000-4000-8000-%012x", rungTokens.Add(1), 0)
			k := ns + "lock:{" + name + "}"
			acq, rel := f.args(k, tok, ns)
			c, err := pool.GetContext(ctx)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			v, err := acquire.DoContext(ctx, c, acq...)
			if err != nil {
				return nil, err
			}
			if vs, ok := v.([]any); ok && len(vs) > 0 { // {1, fence} if taken
				v = vs[0]
			}
			if n, ok := v.(int64); !ok || n < 1 { // the empty script's 1 too, and the designs' fence
				return nil, fmt.Errorf("%w: %v", errNotObtained, v)
			}
			return func(ctx context.Context) error {
				c, err := pool.GetContext(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = release.DoContext(ctx, c, rel...)
				return err
			}, nil
		},
		close: func() { pool.Close() },
	}
}

// BenchmarkBudget: the rungs, atomicredis, redislock and floor-cad, one
// goroutine, the caller's context.
func BenchmarkBudget(b *testing.B) {
	x := newExperiment(b)
	x.Rounds = max(x.Rounds, 5)
	x.Passes = 10
	x.Show = []string{"ns/op", "ops/s", "srv-us/op", "cpu-us/op"}
	cts := contendersOf[b.Name()]
	libs := setup(x, cts)
	for _, ct := range cts {
		x.Add(ct.name, func(r *bench.Round) error {
			cycle := tryCycle(libs[ct.name], "budget-"+ct.name) // a name each: onekey leaves its key
			return cycles(r, ct.sent, 1, func(int) error { return cycle(context.Background()) })
		})
	}
	x.Run()
}
