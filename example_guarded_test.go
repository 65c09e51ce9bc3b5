package atomicredis_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

// moveJob moves a job's status from ARGV[1] to ARGV[2], only from the
// status it expects: with Lock.Eval, only while the job's lock is held.
var moveJob = atomicredis.NewGuardedScript(1, `
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[2])
return 1`)

// A worker moves a job from "queued" to "running" only while it holds the
// job's lock: if the lock was lost (a pause longer than the lease), the
// script runs nothing and Eval says ErrNotHeld.
func ExampleLock_Eval() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 16, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(context.Background())
	ctx := context.Background()

	l, err := e.TryLock(ctx, "job:7", atomicredis.LockOptions{TTL: 5 * time.Second})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	defer l.Unlock(ctx)
	jobKey := l.Key("job") // "app:{job:7}:job": in the namespace, in the lock's slot
	mr.HSet(jobKey, "status", "queued")
	moved, err := redis.Int(l.Eval(ctx, moveJob, jobKey, "queued", "running"))
	fmt.Println(moved, err, mr.HGet(jobKey, "status"))

	mr.FastForward(6 * time.Second) // a pause longer than the lease: the lock is gone
	_, err = l.Eval(ctx, moveJob, jobKey, "running", "done")
	fmt.Println(errors.Is(err, atomicredis.ErrNotHeld), mr.HGet(jobKey, "status"))
	// Output:
	// 1 <nil> running
	// true running
}
