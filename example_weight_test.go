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

// Import jobs share 8 GB of memory: each takes a permit weighing the
// gigabytes it needs. Waiters get in strictly in arrival order.
func ExampleSemaphoreOptions_weight() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 8, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()
	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(ctx)

	take := func(gb int) (*atomicredis.Permit, error) {
		return e.AcquireSemaphore(ctx, "import-memory", atomicredis.SemaphoreOptions{
			Limit: 8, Weight: gb, TTL: time.Minute, Wait: 5 * time.Second,
		})
	}
	big, _ := take(6)
	small, _ := take(1)
	fmt.Println("held:", big.Weight()+small.Weight())

	// A 3 GB job waits for room (1 GB is free), and a 1 GB job that comes
	// after it waits behind it, though it would fit now: first come, first
	// served.
	jobs := make([]chan *atomicredis.Permit, 2)
	for i, gb := range []int{3, 1} {
		jobs[i] = make(chan *atomicredis.Permit, 1)
		go func() {
			p, _ := take(gb)
			jobs[i] <- p
		}()
		for waiting(ctx, e) <= i { // until it queued
			time.Sleep(time.Millisecond)
		}
	}
	big.Release(ctx) // 7 GB free: both get in, in order
	three, one := <-jobs[0], <-jobs[1]
	fmt.Println("3 GB before 1 GB:", three.Fence() < one.Fence())
	info, _ := e.SemaphoreInfo(ctx, "import-memory")
	fmt.Printf("%d permits hold %d GB of %d\n", info.Holders, info.Held, info.Limit)

	_, err := take(9) // more than the limit: refused at once, never queued
	fmt.Println("9 GB:", errors.Is(err, atomicredis.ErrInvalid))
	// Output:
	// held: 7
	// 3 GB before 1 GB: true
	// 3 permits hold 5 GB of 8
	// 9 GB: true
}

func waiting(ctx context.Context, e *atomicredis.Engine) int {
	info, _ := e.SemaphoreInfo(ctx, "import-memory")
	return info.Waiting
}
