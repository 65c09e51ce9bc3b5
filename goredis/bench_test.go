package goredis

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/suite"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// The same engine calls through go-redis and through redigo, on the real
// server REDIS_ADDR names, interleaved op by op so that every client sees
// the same server, machine and moment:
//
//	REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench . -benchtime 20000x
//
// Each client's median time per op is reported (goredis-µs/op, ...), and
// the ratios: goredis/redigo for both clients as they come (go-redis sets
// a 3s read and write deadline on every command; a redigo pool dialled
// without options sets none), and like for like, goredis/redigo-dl against
// a redigo pool with go-redis's deadlines, goredis-nodl/redigo with
// go-redis's deadlines off. "bg" calls with context.Background(),
// "deadline" with a context that has a deadline (both clients then watch
// it in a goroutine per command).

// variant is one client's way of doing the benchmark's op.
type variant struct {
	name string
	op   func(ctx context.Context, i int) error
}

// clients are the four clients of the same server, with the namespace
// their engines use.
type clients struct {
	ns           string
	gr, grNoDL   *redis.Client
	rg, rgDL     *redigo.Pool
	pgr, pgrNoDL *Pool // gr and grNoDL as Pools
}

func newClients(b *testing.B) *clients {
	addr := realAddr(b)
	c := &clients{ns: suite.Namespace(),
		gr:     redis.NewClient(&redis.Options{Addr: addr}),
		grNoDL: redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -2, WriteTimeout: -2}),
		rg:     &redigo.Pool{MaxIdle: 16, Dial: func() (redigo.Conn, error) { return redigo.Dial("tcp", addr) }},
		rgDL: &redigo.Pool{MaxIdle: 16, Dial: func() (redigo.Conn, error) {
			return redigo.Dial("tcp", addr, redigo.DialReadTimeout(3*time.Second), redigo.DialWriteTimeout(3*time.Second))
		}},
	}
	c.pgr, c.pgrNoDL = NewPool(c.gr), NewPool(c.grNoDL)
	b.Cleanup(func() {
		ctx := context.Background()
		ks, _ := c.gr.Keys(ctx, c.ns+"*").Result()
		for _, k := range ks {
			c.gr.Del(ctx, k)
		}
		c.pgr.Close()
		c.pgrNoDL.Close()
		c.gr.Close()
		c.grNoDL.Close()
		c.rg.Close()
		c.rgDL.Close()
	})
	return c
}

// pools are the four clients as atomicredis Pools, by variant name.
func (c *clients) pools() map[string]atomicredis.Pool {
	return map[string]atomicredis.Pool{"goredis": c.pgr, "redigo": c.rg, "goredis-nodl": c.pgrNoDL, "redigo-dl": c.rgDL}
}

// engineVariants runs op on an engine over each client.
func (c *clients) engineVariants(op func(ctx context.Context, e *atomicredis.Engine, i int) error) []variant {
	var vs []variant
	pools := c.pools()
	for _, name := range []string{"goredis", "redigo", "goredis-nodl", "redigo-dl"} {
		e := atomicredis.New(pools[name], atomicredis.WithNamespace(c.ns))
		vs = append(vs, variant{name, func(ctx context.Context, i int) error { return op(ctx, e, i) }})
	}
	return vs
}

// interleave runs each variant b.N times, in a rotating order, and reports
// the median time of each and the ratios.
func interleave(b *testing.B, vs []variant) {
	for _, mode := range []string{"bg", "deadline"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			if mode == "deadline" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			for _, v := range vs { // warm: scripts loaded, pools filled
				for i := 0; i < 50; i++ {
					if err := v.op(ctx, i); err != nil {
						b.Fatal(err)
					}
				}
			}
			times := make([][]time.Duration, len(vs))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range vs {
					k := (i + j) % len(vs)
					start := time.Now()
					if err := vs[k].op(ctx, i); err != nil {
						b.Fatal(err)
					}
					times[k] = append(times[k], time.Since(start))
				}
			}
			med := map[string]float64{}
			for k, v := range vs {
				med[v.name] = float64(median(times[k])) / 1e3
				b.ReportMetric(med[v.name], v.name+"-µs/op")
			}
			b.ReportMetric(med["goredis"]/med["redigo"], "goredis/redigo")
			b.ReportMetric(med["goredis"]/med["redigo-dl"], "goredis/redigo-dl")
			b.ReportMetric(med["goredis-nodl"]/med["redigo"], "goredis-nodl/redigo")
		})
	}
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// BenchmarkLockCycle: TryLock then Unlock, two scripts, two round trips.
func BenchmarkLockCycle(b *testing.B) {
	c := newClients(b)
	interleave(b, c.engineVariants(func(ctx context.Context, e *atomicredis.Engine, i int) error {
		l, err := e.TryLock(ctx, "bench", atomicredis.LockOptions{TTL: 10 * time.Second})
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}))
}

// BenchmarkSuggest: a prefix query on a set of 10,000 names, 10 results.
func BenchmarkSuggest(b *testing.B) {
	c := newClients(b)
	ctx := context.Background()
	names := make([]string, 0, 10000)
	for i := 0; i < 10000; i++ {
		names = append(names, fmt.Sprintf("user%05d", i*7919%10000))
	}
	e := atomicredis.New(c.rg, atomicredis.WithNamespace(c.ns))
	for i := 0; i < len(names); i += 1000 {
		if err := e.AddMembers(ctx, "names", names[i:i+1000]...); err != nil {
			b.Fatal(err)
		}
	}
	interleave(b, c.engineVariants(func(ctx context.Context, e *atomicredis.Engine, i int) error {
		got, err := e.Suggest(ctx, "names", fmt.Sprintf("user%03d", i%100), 10)
		if err == nil && len(got) != 10 {
			err = fmt.Errorf("Suggest: %d results, want 10", len(got))
		}
		return err
	}))
}

// BenchmarkRoundTrip: one EVALSHA of "return 1" on a pooled connection,
// without the engine: what each client costs by itself. "goredis-raw" is
// go-redis's own client.Do, without this package.
func BenchmarkRoundTrip(b *testing.B) {
	c := newClients(b)
	const script = "return 1"
	sha, err := c.gr.ScriptLoad(context.Background(), script).Result()
	if err != nil {
		b.Fatal(err)
	}
	// A test sharing the server may SCRIPT FLUSH: load the script again.
	reload := func(err error) error {
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return c.gr.ScriptLoad(context.Background(), script).Err()
		}
		return err
	}
	var vs []variant
	pools := c.pools()
	for _, name := range []string{"goredis", "redigo", "goredis-nodl", "redigo-dl"} {
		p := pools[name]
		vs = append(vs, variant{name, func(ctx context.Context, i int) error {
			conn, err := p.GetContext(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			if ctx.Done() != nil {
				_, err = conn.(redigo.ConnWithContext).DoContext(ctx, "EVALSHA", sha, 0)
			} else {
				_, err = conn.Do("EVALSHA", sha, 0)
			}
			return reload(err)
		}})
	}
	vs = append(vs, variant{"goredis-raw", func(ctx context.Context, i int) error {
		return reload(c.gr.Do(ctx, "EVALSHA", sha, 0).Err())
	}})
	interleave(b, vs)
}
