package goredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/goredis"
	"github.com/redis/go-redis/v9"
)

func ExampleNewPool() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	ctx := context.Background()

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()}) // the client the service already has
	defer rdb.Close()
	pool := goredis.NewPool(rdb)
	defer pool.Close() // stops its background workers
	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(ctx) // before pool.Close and rdb.Close: stops watchdogs, waits for clean-ups
	l, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{TTL: 5 * time.Second})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	defer l.Unlock(ctx)
	fmt.Println("held, fence of 16 digits:", len(fmt.Sprint(l.Fence())) == 16)
	// Output: held, fence of 16 digits: true
}

// A cluster client (or a failover client) is used the same way.
func ExampleNewPool_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}})
	e := atomicredis.New(goredis.NewPool(rdb))
	_ = e
}
