package goredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/suite"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// goroutineID is the running goroutine's number, from its stack's first
// line ("goroutine 7 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	n, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return n
}

type callerKey struct{}

// seen is a go-redis hook that records, for each EVALSHA, whether its
// context is the caller's (it carries the caller's goroutine number), and
// a dialer whose connections record whether each write of an EVALSHA is on
// the caller's goroutine.
type seen struct {
	caller uint64 // the goroutine of the calls

	mu                sync.Mutex
	evalshas, withCtx int
	writes, onCaller  int
}

func (h *seen) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &seenConn{c, h}, nil
}

type seenConn struct {
	net.Conn
	h *seen
}

func (c *seenConn) Write(b []byte) (int, error) {
	if !bytes.Contains(bytes.ToUpper(b[:min(len(b), 64)]), []byte("\r\nEVALSHA\r\n")) {
		return c.Conn.Write(b) // the engine's subscription, a handshake
	}
	id := goroutineID()
	c.h.mu.Lock()
	c.h.writes++
	if id == c.h.caller {
		c.h.onCaller++
	}
	c.h.mu.Unlock()
	return c.Conn.Write(b)
}

func (h *seen) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *seen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *seen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "evalsha") {
			id, ok := ctx.Value(callerKey{}).(uint64)
			h.mu.Lock()
			h.evalshas++
			if ok && id == h.caller {
				h.withCtx++
			}
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *seen) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evalshas, h.withCtx, h.writes, h.onCaller = 0, 0, 0, 0
}

// hooksOnConn: go-redis before v9.9.0 gives a Client.Conn none of the
// client's hooks (go-redis issue 3267), so they see no command of a pinned
// connection.
func hooksOnConn() bool {
	var major, minor int
	_, err := fmt.Sscanf(redis.Version(), "%d.%d", &major, &minor)
	return err == nil && (major > 9 || major == 9 && minor >= 9)
}

// The engine's commands reach go-redis with the caller's context, so that
// go-redis's hooks (redisotel's among them) see it, and run on the
// caller's goroutine, with no worker handoff, where go-redis's own
// deadlines bound them within the call's timeout: ContextTimeoutEnabled,
// or a ReadTimeout (and its retry's backoff) within it. A call timeout
// shorter than that takes a worker, still with the caller's context.
func TestEngineContext(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		for _, c := range []struct {
			name      string
			opts      redis.Options
			timeout   time.Duration // the engine's call timeout; 0: its default, 5s
			cancelled bool
			// TryLock's and Unlock's commands (Unlock's bound is its 1s
			// ReleaseTimeout) on the caller's goroutine
			lockOnCaller, unlockOnCaller bool
		}{
			{name: "a 3s ReadTimeout (go-redis's default before v9.23)", opts: redis.Options{ReadTimeout: 3 * time.Second}, lockOnCaller: true},
			{name: "a 3s ReadTimeout, a cancellable context", opts: redis.Options{ReadTimeout: 3 * time.Second}, cancelled: true, lockOnCaller: true},
			{name: "ContextTimeoutEnabled, a 1s call timeout", opts: redis.Options{ContextTimeoutEnabled: true}, timeout: time.Second, cancelled: true, lockOnCaller: true, unlockOnCaller: true},
			{name: "a 1s call timeout under a 3s ReadTimeout", opts: redis.Options{ReadTimeout: 3 * time.Second}, timeout: time.Second, cancelled: true},
			{name: "a 500ms ReadTimeout", opts: redis.Options{ReadTimeout: 500 * time.Millisecond}, cancelled: true, lockOnCaller: true, unlockOnCaller: true},
			// With its retry's backoff, a read may keep the caller past 5s.
			{name: "a 5s ReadTimeout (go-redis's default from v9.23)", opts: redis.Options{ReadTimeout: 5 * time.Second}, cancelled: true},
			{name: "a 20s ReadTimeout", opts: redis.Options{ReadTimeout: 20 * time.Second}, cancelled: true},
		} {
			t.Run(c.name, func(t *testing.T) {
				o := c.opts
				o.Addr, o.Protocol = s.addr, s.proto
				h := &seen{caller: goroutineID()}
				o.Dialer = h.dial
				client := newClientOpts(t, &o)
				client.AddHook(h)
				opts := []atomicredis.Option{atomicredis.WithNamespace(s.ns)}
				if c.timeout > 0 {
					opts = append(opts, atomicredis.WithCallTimeout(c.timeout))
				}
				e := atomicredis.New(newPool(t, client), opts...)
				defer e.Close(context.Background())
				// Dialed, the scripts loaded (a NOSCRIPT's reload is a pipeline,
				// on a worker).
				if l, err := e.TryLock(context.Background(), "ctx", atomicredis.LockOptions{}); err != nil {
					t.Fatal(err)
				} else if err := l.Unlock(context.Background()); err != nil {
					t.Fatal(err)
				}
				// EVALSHA writes, on the caller's goroutine; seen by the
				// hooks, with the caller's context
				var lock, unlock [4]int
				op := func(sum *[4]int, f func() error) {
					h.reset()
					if err := f(); err != nil {
						t.Fatal(err)
					}
					h.mu.Lock()
					sum[0] += h.writes
					sum[1] += h.onCaller
					sum[2] += h.evalshas
					sum[3] += h.withCtx
					h.mu.Unlock()
				}
				for i := 0; i < 20; i++ {
					ctx := context.WithValue(context.Background(), callerKey{}, h.caller)
					cancel := func() {}
					if c.cancelled {
						ctx, cancel = context.WithCancel(ctx)
					}
					var l *atomicredis.Lock
					op(&lock, func() (err error) {
						l, err = e.TryLock(ctx, "ctx", atomicredis.LockOptions{TTL: time.Minute})
						return err
					})
					op(&unlock, func() error { return l.Unlock(ctx) })
					cancel()
				}
				t.Logf("go-redis %s: TryLock's EVALSHA: %d written, %d on the caller's goroutine, %d seen by its hooks, %d with the caller's context; Unlock's: %d, %d, %d, %d",
					redis.Version(), lock[0], lock[1], lock[2], lock[3], unlock[0], unlock[1], unlock[2], unlock[3])
				for _, w := range []struct {
					name     string
					n        [4]int
					onCaller bool
				}{{"TryLock", lock, c.lockOnCaller}, {"Unlock", unlock, c.unlockOnCaller}} {
					if want := map[bool]int{true: w.n[0], false: 0}[w.onCaller]; w.n[0] < 20 || w.n[1] != want {
						t.Errorf("%s: %d of %d EVALSHA written on the caller's goroutine, want %d (and at least 20)", w.name, w.n[1], w.n[0], want)
					}
					if !hooksOnConn() {
						continue
					}
					if w.n[2] != w.n[0] || w.n[3] != w.n[0] {
						t.Errorf("%s: go-redis's hooks saw %d of %d EVALSHA, %d with the caller's context; want all, with it", w.name, w.n[2], w.n[0], w.n[3])
					}
				}
				if !hooksOnConn() {
					t.Logf("go-redis %s: before v9.9.0 a pinned connection runs none of the client's hooks: their context not checked", redis.Version())
				}
			})
		}
	})
}

// A call on a stopped server (SIGSTOP) returns by its bound, through
// either path: the call timeout when it is shorter than go-redis's
// ReadTimeout (a worker), the context's deadline with
// ContextTimeoutEnabled, go-redis's ReadTimeout otherwise (the caller's
// goroutine); a cancellation does not cut it short, as in go-redis.
func TestEngineContextStoppedServer(t *testing.T) {
	r := testserver.PrivateRedis(t)
	info, err := r.Do("INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	pidText, _ := testserver.InfoField(string(info.([]byte)), "process_id")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatalf("process_id %q: %v", pidText, err)
	}
	type engineCase struct {
		name    string
		opts    redis.Options
		timeout time.Duration // the call timeout
		ctx     func() (context.Context, context.CancelFunc)
		least   time.Duration // it returns no sooner: a cancellation does not cut it short
		bound   time.Duration
	}
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		return ctx, cancel
	}
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 300*time.Millisecond)
	}
	cases := []engineCase{
		{"a 400ms call timeout, cancelled at 50ms (a worker)", redis.Options{}, 400 * time.Millisecond, cancelled, 360 * time.Millisecond, 400 * time.Millisecond},
		{"a 300ms deadline (a worker)", redis.Options{}, 0, deadline, 270 * time.Millisecond, 300 * time.Millisecond},
		{"ContextTimeoutEnabled, a 300ms deadline (the caller's goroutine)", redis.Options{ContextTimeoutEnabled: true}, 0, deadline, 270 * time.Millisecond, 300 * time.Millisecond},
		// go-redis retries after a read timeout, once its backoff (at most
		// 512ms) has passed, and finds the connection broken.
		{"a 600ms ReadTimeout, a 2s call timeout, cancelled at 50ms (the caller's goroutine)", redis.Options{ReadTimeout: 600 * time.Millisecond}, 2 * time.Second, cancelled, 540 * time.Millisecond, 600*time.Millisecond + 512*time.Millisecond},
	}
	var engines []*atomicredis.Engine
	for _, c := range cases {
		o := c.opts
		o.Addr = r.Addr()
		opts := []atomicredis.Option{atomicredis.WithNamespace(suite.Namespace())}
		if c.timeout > 0 {
			opts = append(opts, atomicredis.WithCallTimeout(c.timeout))
		}
		e := atomicredis.New(newPool(t, newClientOpts(t, &o)), opts...)
		if _, err := e.LockInfo(context.Background(), "st"); err != nil { // the scripts loaded
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	for i, c := range cases {
		ctx, cancel := c.ctx()
		start := time.Now()
		_, err := engines[i].LockInfo(ctx, "st")
		cancel()
		took := time.Since(start)
		t.Logf("%s: %v after %v", c.name, err, took)
		// After its read timeout go-redis's retry waits out its backoff
		// on ctx, and a cancelled ctx ends it: context.Canceled.
		ended := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.Canceled)
		if !ended || took > c.bound+time.Second {
			t.Errorf("%s on a stopped server: %v after %v; want a timeout by %v", c.name, err, took, c.bound)
		}
		if took < c.least {
			t.Errorf("%s: returned after %v, before %v: the cancellation cut it short", c.name, took, c.least)
		}
	}
}
