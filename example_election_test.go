package atomicredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
)

// A scheduler that runs only while it leads: it campaigns, runs its work
// under the leadership's Context (which ends if the leadership is lost),
// and resigns when done. Another process watches who leads with Observe.
func Example_election() {
	mr, _ := miniredis.Run() // any Redis; miniredis keeps the example self-contained
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 16, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	e := atomicredis.New(pool, atomicredis.WithNamespace("app:"))
	defer e.Close(context.Background())
	ctx := context.Background()
	// A new election's first term waits one lease (TTL), in case a leader
	// elected before its keys were lost still runs.
	election := e.Election("scheduler", atomicredis.ElectionOptions{TTL: 500 * time.Millisecond})

	// Who leads, as it changes (here from the same engine; usually another
	// process's).
	watch, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	leaders := election.Observe(watch)
	fmt.Printf("leader: %q\n", (<-leaders).Value) // none yet

	lead, err := election.Campaign(ctx, "host-a:8080") // waits, in line, until it leads
	if err != nil {
		fmt.Println("not leading:", err)
		return
	}
	defer lead.Unlock(ctx) // resign; the next candidate leads in a higher term
	fmt.Printf("leader: %q\n", (<-leaders).Value)

	work, cancel := lead.Context(ctx) // ends if the leadership is lost
	defer cancel()
	runSchedule(work, lead.Fence(), lead.Token()) // the term and token go with every write, as a fence
	// Output:
	// leader: ""
	// leader: "host-a:8080"
	// scheduled under term of 16 digits: true
}

func runSchedule(ctx context.Context, term int64, token string) {
	if ctx.Err() != nil {
		return // no longer the leader: stop
	}
	_ = token // a store admits a higher term, or the same term with the same token
	fmt.Println("scheduled under term of 16 digits:", len(fmt.Sprint(term)) == 16)
}

// A new election's first term waits one lease, the candidate's TTL (10 s
// at DefaultTTL): a leader elected before the election's keys were lost
// (a restart without persistence) may still act until its lease ends.
// Once the election has a term, a resignation hands over at once.
func ExampleElection_Campaign() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	pool := &redis.Pool{MaxIdle: 16, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", mr.Addr()) }}
	e := atomicredis.New(pool)
	defer e.Close(context.Background())
	ctx := context.Background()
	const ttl = time.Second
	election := e.Election("reports", atomicredis.ElectionOptions{TTL: ttl})

	start := time.Now()
	first, err := election.Campaign(ctx, "host-a")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first term waited a lease:", time.Since(start) >= ttl)
	first.Unlock(ctx) // resign

	start = time.Now()
	second, err := election.Campaign(ctx, "host-b")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Unlock(ctx)
	fmt.Println("next term waited a lease:", time.Since(start) >= ttl)
	fmt.Println("a higher term:", second.Fence() > first.Fence())
	// Output:
	// first term waited a lease: true
	// next term waited a lease: false
	// a higher term: true
}
