// The FIPS check (.ci/run): a program that uses atomicredis as a service
// would, through redigo and through the goredis adapter, built and run
// under GODEBUG=fips140=only, where any use of SHA-1 panics. Nothing the
// engine runs may compute one: a script's hash comes from the generated
// table or from SCRIPT LOAD's reply. It exits 0 after Ping, Lock, a
// guarded Eval, Unlock, AcquireSemaphore and Release on each client.
//
//	REDIS_ADDR=127.0.0.1:6379 GODEBUG=fips140=only go run fips.go
package main

import (
	"context"
	"crypto/fips140"
	"fmt"
	"os"
	"time"

	"github.com/atomicredis/atomicredis"
	arredis "github.com/atomicredis/atomicredis/goredis"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
)

func main() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		fail("set REDIS_ADDR")
	}
	if !fips140.Enforced() {
		fail("not in FIPS 140-only mode: run with GODEBUG=fips140=only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	pool := &redis.Pool{MaxIdle: 4, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	defer pool.Close()
	check(ctx, "redigo", atomicredis.New(pool, atomicredis.WithNamespace("fips-redigo:")))

	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	gp := arredis.NewPool(rdb)
	defer gp.Close()
	check(ctx, "go-redis", atomicredis.New(gp, atomicredis.WithNamespace("fips-goredis:")))
	fmt.Println("fips: every call ran in FIPS 140-only mode")
}

// reserve is a guarded write: it runs only while the lock is held.
var reserve = atomicredis.NewGuardedScript(1, "return redis.call('INCRBY', KEYS[1], ARGV[1])")

func check(ctx context.Context, client string, e *atomicredis.Engine) {
	defer e.Close(ctx)
	must(client, "Ping", e.Ping(ctx))
	l, err := e.Lock(ctx, "cart", atomicredis.LockOptions{TTL: 10 * time.Second})
	must(client, "Lock", err)
	tag, err := e.HashTag("cart")
	must(client, "HashTag", err)
	_, err = l.Eval(ctx, reserve, "stock:"+tag, 3)
	must(client, "Lock.Eval", err)
	must(client, "Unlock", l.Unlock(ctx))
	p, err := e.AcquireSemaphore(ctx, "workers", atomicredis.SemaphoreOptions{Limit: 2})
	must(client, "AcquireSemaphore", err)
	must(client, "Release", p.Release(ctx))
	fmt.Printf("fips: %s: Ping, Lock, Eval, Unlock, AcquireSemaphore, Release\n", client)
}

func must(client, call string, err error) {
	if err != nil {
		fail(fmt.Sprintf("%s: %s: %v", client, call, err))
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "fips:", msg)
	os.Exit(1)
}
