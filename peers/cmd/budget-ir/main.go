// Command budget-ir runs one line of the budget (docs/handoff.md): n
// cycles of an acquire script and a release script on one name, for a
// redis-server run under valgrind's callgrind to count the instructions
// of (peers/testdata/budget/ir.sh). Instructions, unlike microseconds on
// a shared machine, repeat from run to run.
//
//	budget-ir -addr HOST:PORT -n 2000 -name NAME \
//	    -acquire FILE -acquire-args 'COUNT KEYS... ARGS...' \
//	    -release FILE -release-args 'COUNT KEYS... ARGS...' [-handoff [-queued Q]]
//
// In the arguments %k stands for the lock's key (<NAME>:lock:{n}) and %t
// for the token of the cycle. A cycle is an acquire by a fresh token and
// its release; with -handoff it is a waiter's acquire while the last
// token holds (it queues), then the last token's release, which hands the
// lock to that waiter: one join and one handoff, a hot name's share of an
// acquisition. Each call's reply is checked (unless -check=false, for the
// rungs that write nothing): a cycle that does not take, or a handoff
// that does not hand, stops the run. With -queued Q, Q more waiters stay
// queued behind the one handed the lock, as on a hot name whose queue
// never empties: each cycle's waiter joins at the tail, and the release
// hands the lock to the head.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gomodule/redigo/redis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the server")
	n := flag.Int("n", 2000, "cycles")
	name := flag.String("name", "budget", "the keys' prefix: a name a run")
	acquireFile := flag.String("acquire", "", "the acquire script")
	releaseFile := flag.String("release", "", "the release script")
	acquireArgs := flag.String("acquire-args", "", "its key count, keys and arguments")
	releaseArgs := flag.String("release-args", "", "its key count, keys and arguments")
	handoff := flag.Bool("handoff", false, "a waiter queues, then the holder's release hands it the lock")
	queued := flag.Int("queued", 0, "with -handoff: waiters that stay queued behind the one handed the lock")
	check := flag.Bool("check", true, "stop at a reply that is not a grant or a release (false: for rungs that write nothing)")
	flag.Parse()
	if err := run(*addr, *n, *name, *acquireFile, *releaseFile, *acquireArgs, *releaseArgs, *handoff, *queued, *check); err != nil {
		fmt.Fprintln(os.Stderr, "budget-ir:", err)
		os.Exit(1)
	}
}

func run(addr string, n int, name, acquireFile, releaseFile, acquireArgs, releaseArgs string, handoff bool, queued int, check bool) error {
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	acquire, err := script(acquireFile)
	if err != nil {
		return err
	}
	release, err := script(releaseFile)
	if err != nil {
		return err
	}
	key := name + ":lock:{n}"
	args := func(spec, token string) []any {
		var out []any
		for _, f := range strings.Fields(spec) {
			out = append(out, strings.ReplaceAll(strings.ReplaceAll(f, "%k", key), "%t", token))
		}
		return out
	}
	token := func(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", i) }
	holders := []string{token(0)} // with -handoff: the holder, then the queue in order
	if handoff {
		if v, err := acquire.Do(c, args(acquireArgs, token(0))...); err != nil || !taken(v) {
			return fmt.Errorf("the first acquire: %v, %v", v, err)
		}
		for i := 1; i <= queued; i++ {
			t := fmt.Sprintf("%08x-0000-4000-8000-000000000001", i)
			if v, err := acquire.Do(c, args(acquireArgs, t)...); err != nil || taken(v) {
				return fmt.Errorf("queued waiter %d: %v, %v", i, v, err)
			}
			holders = append(holders, t)
		}
	}
	for i := 1; i <= n; i++ {
		v, err := acquire.Do(c, args(acquireArgs, token(i))...)
		switch {
		case err != nil:
			return fmt.Errorf("acquire %d: %w", i, err)
		case check && taken(v) == handoff:
			return fmt.Errorf("acquire %d: %v", i, v)
		}
		holder := token(i)
		if handoff {
			holder, holders = holders[0], append(holders[1:], token(i))
		}
		v, err = release.Do(c, args(releaseArgs, holder)...)
		switch {
		case err != nil:
			return fmt.Errorf("release %d: %w", i, err)
		case check && v == int64(0):
			return fmt.Errorf("release %d: not held", i)
		}
	}
	return nil
}

// script reads a script file.
func script(file string) (*redis.Script, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return redis.NewScript(-1, string(src)), nil
}

// taken reports whether an acquire's reply is a grant: a positive fence,
// {1, fence}, or OK (redislock's).
func taken(v any) bool {
	switch v := v.(type) {
	case int64:
		return v > 0
	case []any:
		return len(v) > 0 && v[0] == int64(1)
	case string:
		return v == "OK"
	}
	return false
}
