package atomicredis

// Benchmarks: each operation as one script against the book's WATCH/MULTI
// code (book_test.go), and against the physical limit of plain round trips.
// Run: go test -run '^$' -bench .

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"
)

// benchAddr is the server the benchmarks use, chosen once in TestMain.
var benchAddr string

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // tests pick their own servers
	}
	stop, err := pickBenchServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(2)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// pickBenchServer: REDIS_ADDR if set; else a private redis-server if one
// is on PATH; else miniredis. It prints which.
func pickBenchServer() (stop func(), err error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		benchAddr = addr
		fmt.Printf("bench server: redis-server at %s (REDIS_ADDR)\n", addr)
		return func() {}, nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		addr, stop, err := startRedis(path)
		if err != nil {
			return nil, err
		}
		benchAddr = addr
		fmt.Printf("bench server: private %s at %s (no persistence)\n", redisVersion(addr), addr)
		return stop, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	benchAddr = m.Addr()
	fmt.Println("bench server: miniredis (no redis-server on PATH): figures measure miniredis's Go Lua interpreter, not Redis")
	return m.Close, nil
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, and returns a function that stops it.
func startRedis(path string, extra ...string) (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "atomicredis-redis")
	if err != nil {
		return "", nil, err
	}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir}, extra...)
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	addr = "127.0.0.1:" + strconv.Itoa(port)
	for i := 0; i < 100; i++ {
		if c, err := redis.Dial("tcp", addr); err == nil {
			_, err = c.Do("PING")
			c.Close()
			if err == nil {
				return addr, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("redis-server on %s did not answer", addr)
}

func redisVersion(addr string) string {
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		return "redis-server"
	}
	defer c.Close()
	info, _ := redis.String(c.Do("INFO", "server"))
	for _, line := range splitLines(info) {
		if v, ok := cutPrefix(line, "redis_version:"); ok {
			return "redis-server " + v
		}
	}
	return "redis-server"
}

// benchSetup gives a benchmark a pool on the chosen server and a fresh
// namespace.
func benchSetup(b *testing.B) (*redis.Pool, string) {
	b.Helper()
	if benchAddr == "" {
		b.Fatal("no bench server (TestMain did not run with -bench)")
	}
	p := newPool(b, benchAddr)
	p.MaxIdle = 128
	return p, testNamespace()
}

func BenchmarkRoundTrip(b *testing.B) {
	pool, ns := benchSetup(b)
	ctx := context.Background()
	key := ns + "rt"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, _ := pool.GetContext(ctx)
		if _, err := c.Do("SET", key, "x", "NX", "PX", 10000); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Do("DEL", key); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func BenchmarkLock(b *testing.B) {
	b.Run("lua", func(b *testing.B) {
		pool, ns := benchSetup(b)
		e, ctx := New(pool, WithNamespace(ns)), context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l, err := e.TryLock(ctx, "bench", LockOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("watch", func(b *testing.B) {
		pool, ns := benchSetup(b)
		var retries atomic.Int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := pool.Get()
			id, err := bookAcquireLockWithTimeout(c, ns+"bench", time.Second, 10*time.Second, &retries)
			if err != nil || id == "" {
				b.Fatal("acquire:", err)
			}
			if ok, err := bookReleaseLock(c, ns+"bench", id); !ok || err != nil {
				b.Fatal("release:", err)
			}
			c.Close()
		}
	})
}
