package atomicredis

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/bench"
	"github.com/gomodule/redigo/redis"
)

// BenchmarkElectionObserve: how fast an election's observer, on another
// engine, hears of a change a script made (a leader's SetOwner), from the
// call's start to the state's arrival on Observe's channel, against one
// PING's round trip and against the floor under it: a bare script's
// PUBLISH reaching a bare subscriber in this process (on a 2-core machine
// the subscriber's wake-up competes with the caller's, so the floor itself
// is 2–3× PING); SetOwner's own round trip with an observer, with none, and
// a plain lock's, say where a change's time goes; and how long after a leader's lease ran out (its
// engine cut off from Redis: no script runs) an observer sees it gone.
func BenchmarkElectionObserve(b *testing.B) {
	x := newExperiment(b)
	ctx := context.Background()
	leaderEngine, watcher := x.env.engine(), x.env.engine()
	defer closeAll(leaderEngine, watcher)()
	lead, err := leaderEngine.Election("bench", ElectionOptions{TTL: time.Second}).Campaign(ctx, "v0") // a new election: waits a lease
	if err != nil {
		bench.Check(b, err)
	}
	defer lead.Unlock(ctx)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := watcher.Election("bench", ElectionOptions{}).Observe(octx)
	if l := <-seen; l.Value != "v0" {
		b.Fatalf("first state %+v", l)
	}
	const changes = 100
	x.Add("change", func(r *bench.Round) error {
		ds := make([]time.Duration, 0, changes)
		for i := 0; i < changes; i++ {
			value := "v" + strconv.Itoa(r.Index) + "-" + strconv.Itoa(i)
			start := time.Now()
			if err := lead.SetOwner(ctx, value); err != nil {
				return err
			}
			select {
			case l := <-seen:
				if l.Value != value {
					return fmt.Errorf("observed %+v, want %s", l, value)
				}
			case <-time.After(5 * time.Second):
				return fmt.Errorf("no state in 5 s")
			}
			ds = append(ds, time.Since(start))
		}
		addLatencies(r, ds)
		return nil
	})
	// SetOwner alone, its reply awaited: the part of a change's latency
	// before its script has run and replied.
	x.Add("set-owner", func(r *bench.Round) error {
		ds := make([]time.Duration, 0, changes)
		for i := 0; i < changes; i++ {
			value := "w" + strconv.Itoa(r.Index) + "-" + strconv.Itoa(i)
			start := time.Now()
			if err := lead.SetOwner(ctx, value); err != nil {
				return err
			}
			ds = append(ds, time.Since(start))
			<-seen
		}
		addLatencies(r, ds)
		return nil
	})
	// A leader nobody observes: its SetOwner publishes nothing.
	lone, err := leaderEngine.Election("bench-lone", ElectionOptions{TTL: time.Second}).Campaign(ctx, "v0")
	if err != nil {
		bench.Check(b, err)
	}
	defer lone.Unlock(ctx)
	if err := lone.Extend(ctx, time.Hour); err != nil { // past any run's rounds
		bench.Check(b, err)
	}
	// A plain lock's SetOwner: no observers to publish to.
	plain, err := leaderEngine.TryLock(ctx, "bench-plain", LockOptions{TTL: time.Hour})
	if err != nil {
		bench.Check(b, err)
	}
	defer plain.Unlock(ctx)
	x.AddOps("lock-set-owner", func(i int) error { return plain.SetOwner(ctx, strconv.Itoa(i)) })
	timed := func(f func(i int) error) func(r *bench.Round) error {
		return func(r *bench.Round) error {
			ds := make([]time.Duration, 0, changes)
			for i := 0; i < changes; i++ {
				start := time.Now()
				if err := f(i); err != nil {
					return err
				}
				ds = append(ds, time.Since(start))
			}
			addLatencies(r, ds)
			return nil
		}
	}
	x.Add("lock-set-owner-p50", timed(func(i int) error { return plain.SetOwner(ctx, strconv.Itoa(i)) }))
	x.Add("unobserved-set-owner", timed(func(i int) error { return lone.SetOwner(ctx, strconv.Itoa(i)) }))
	// The floor: a bare script's PUBLISH reaching a bare subscriber in this
	// process, timed as a change is. What a change costs above it is ours.
	subConn, err := redis.Dial("tcp", benchAddr)
	if err != nil {
		bench.Check(b, err)
	}
	sub := redis.PubSubConn{Conn: subConn}
	defer subConn.Close() // ends the reading goroutine
	floorChannel := x.env.ns + "bench-floor"
	if err := sub.Subscribe(floorChannel); err != nil {
		bench.Check(b, err)
	}
	if _, ok := sub.Receive().(redis.Subscription); !ok {
		b.Fatal("no subscription")
	}
	heard := make(chan string, 1)
	go func() {
		for {
			switch m := sub.Receive().(type) {
			case redis.Message:
				heard <- string(m.Data)
			case error:
				close(heard)
				return
			}
		}
	}()
	publish := redis.NewScript(1, "return redis.call('PUBLISH', KEYS[1], ARGV[1])")
	x.Add("floor", func(r *bench.Round) error {
		c := x.env.Pool.Get()
		defer c.Close()
		ds := make([]time.Duration, 0, changes)
		for i := 0; i < changes; i++ {
			value := "f" + strconv.Itoa(r.Index) + "-" + strconv.Itoa(i)
			start := time.Now()
			if _, err := publish.Do(c, floorChannel, value); err != nil {
				return err
			}
			select {
			case got := <-heard:
				if got != value {
					return fmt.Errorf("heard %q, want %q", got, value)
				}
			case <-time.After(5 * time.Second):
				return fmt.Errorf("nothing heard in 5 s")
			}
			ds = append(ds, time.Since(start))
		}
		addLatencies(r, ds)
		return nil
	})
	x.Add("ping", func(r *bench.Round) error {
		ds := make([]time.Duration, 0, changes)
		for i := 0; i < changes; i++ {
			start := time.Now()
			c := x.env.Pool.Get()
			_, err := c.Do("PING")
			c.Close()
			if err != nil {
				return err
			}
			ds = append(ds, time.Since(start))
		}
		addLatencies(r, ds)
		return nil
	})
	if benchMini {
		x.Skip("lease-end", "a leader's lease ends by the server's clock: on redis-server")
	} else {
		// Each round a leader campaigns through a proxy that is then cut;
		// the server's PTTL, read at the cut, says when its lease ends.
		x.Add("lease-end", func(r *bench.Round) error {
			proxy := startProxy(b, benchAddr, faults{})
			defer proxy.close()
			pool := bench.Limit(newPool(b, proxy.addr()))
			dying := New(pool, WithNamespace(x.env.ns))
			defer dying.Close(ctx)
			name := "bench-end"
			seenEnd := watcher.Election(name, ElectionOptions{}).Observe(octx)
			<-seenEnd
			l, err := dying.Election(name, ElectionOptions{TTL: 300 * time.Millisecond}).Campaign(ctx, "dying")
			if err != nil {
				return err
			}
			for st := range seenEnd {
				if st.Value == "dying" {
					break
				}
			}
			proxy.refuse.Store(true)
			proxy.cutAll()
			ms, err := x.env.Admin.Do("PTTL", x.env.ns+"election:{"+name+"}")
			if err != nil {
				return err
			}
			end := time.Now().Add(time.Duration(ms.(int64)) * time.Millisecond)
			for st := range seenEnd {
				if st == (Leader{}) {
					break
				}
			}
			late := time.Since(end)
			r.Did(1)
			r.Add("ns/op", float64(late))
			r.Add("late-ms", float64(late)/1e6)
			<-l.Lost()
			return nil
		})
	}
	x.Run()
}

func init() {
	targets = append(targets,
		bench.Row("election: a change reaches an observer, p50 ÷ PING's p50", [2]string{"BenchmarkElectionObserve/change", "p50-ms"}, [2]string{"BenchmarkElectionObserve/ping", "p50-ms"}, "<=", 3).Aim(),
		bench.Row("election: a change reaches an observer, p50 ÷ the floor's p50 (a bare script's PUBLISH reaching a bare subscriber)", [2]string{"BenchmarkElectionObserve/change", "p50-ms"}, [2]string{"BenchmarkElectionObserve/floor", "p50-ms"}, "", 0),
		bench.Row("election: the floor, p50 ÷ PING's p50", [2]string{"BenchmarkElectionObserve/floor", "p50-ms"}, [2]string{"BenchmarkElectionObserve/ping", "p50-ms"}, "", 0),
		bench.Row("election: SetOwner's own round trip, p50 ÷ PING's p50", [2]string{"BenchmarkElectionObserve/set-owner", "p50-ms"}, [2]string{"BenchmarkElectionObserve/ping", "p50-ms"}, "", 0),
		bench.Row("election: SetOwner of a leader nobody observes, p50 ÷ PING's p50", [2]string{"BenchmarkElectionObserve/unobserved-set-owner", "p50-ms"}, [2]string{"BenchmarkElectionObserve/ping", "p50-ms"}, "", 0),
		bench.Row("election: a plain lock's SetOwner, p50 ÷ PING's p50", [2]string{"BenchmarkElectionObserve/lock-set-owner-p50", "p50-ms"}, [2]string{"BenchmarkElectionObserve/ping", "p50-ms"}, "", 0),
		bench.Row("election: a lease that ran out is seen, ms after its end", [2]string{"BenchmarkElectionObserve/lease-end", "late-ms"}, [2]string{}, "<=", 50),
	)
}
