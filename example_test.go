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
	pool := &redis.Pool{
		MaxIdle:     16, // keep connections: with 0, redigo closes each after one call
		MaxActive:   64,
		IdleTimeout: time.Minute,
		Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) },
	}
	ctx := context.Background()

	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(context.Background()) // stops watchdogs, waits for clean-ups

	l, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{TTL: 5 * time.Second, Watchdog: true})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	defer l.Unlock(ctx)
	fmt.Println("fence", l.Fence()) // hand this to the guarded resource
	// Output: fence 1
}

func Example_autocomplete() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()
	e := atomicredis.New(pool)

	// Recent contacts (the book's list): newest first, prefix ignoring ASCII case.
	for _, c := range []string{"alice", "Bob", "Albert"} {
		e.AddRecent(ctx, "user:7", c)
	}
	recent, _ := e.SuggestRecent(ctx, "user:7", "al", 10)
	fmt.Println(recent)

	// A guild's members (the book's sorted set): exact bytes, byte order.
	e.AddMembers(ctx, "guild:9", "abc", "abb{", "ab{", "abd", "b")
	names, _ := e.Suggest(ctx, "guild:9", "ab", 10)
	fmt.Printf("%q\n", names)
	// Output:
	// [Albert alice]
	// ["abb{" "abc" "abd" "ab{"]
}

func Example_activity() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	ctx := context.Background()
	e := atomicredis.New(pool)

	e.MarkActive(ctx, "logins", "2026-11-20", 42)
	e.MarkActive(ctx, "logins", "2026-11-21", 42)
	e.MarkActive(ctx, "logins", "2026-11-21", 7)
	today, _ := e.IsActive(ctx, "logins", "2026-11-21", 7)
	both, _ := e.CountActive(ctx, "logins", "2026-11-20", "2026-11-21")
	fmt.Println(today, both)
	// Output: true 2
}
