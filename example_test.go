package atomicredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

func Example_lock() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()

	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	l, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{TTL: 5 * time.Second, Watchdog: true})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	defer l.Unlock(ctx)
	fmt.Println("fence", l.Fence()) // hand this to the guarded resource
	// Output: fence 1
}
