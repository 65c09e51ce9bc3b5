package atomicredis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// ownerlessCommands is how many commands (scripts' calls included) each
// operation made on a private redis-server before holdings stored an
// Owner (fb270a2, where only exclusive locks did): an empty Owner must
// cost nothing, so these stay as they were. Measured by
// TestOwnerlessCostsNothing itself on that commit; the semaphore's since
// lowered, as this test counted them, where a one-try acquire reads the
// waiters hash, and a release the fence counter, only when someone is
// queued (27, 27 and 26 before).
var ownerlessCommands = map[string]int{
	"TryLock+Unlock":                    8,
	"TryRLock+Unlock":                   15,
	"TryRLock+Unlock beside a reader":   18,
	"TryWLock+Unlock":                   15,
	"TryAcquireSemaphore+Release":       25,
	"AcquireSemaphore+Release":          26,
	"TryAcquireSemaphore beside permit": 24,
}

// An empty Owner costs nothing: taking and releasing a lock, a read or a
// write hold and a permit runs as many commands as it did before Owners
// were stored (INFO commandstats of a private server, which nobody else
// uses).
func TestOwnerlessCostsNothing(t *testing.T) {
	t.Parallel()
	s := privateServer(t, "redis")
	e, ctx := engine(s), ctxT(t)
	reader, err := e.TryRLock(ctx, "rb", LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Unlock(ctx)
	permit, err := e.TryAcquireSemaphore(ctx, "sb", SemaphoreOptions{Limit: 2, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer permit.Release(ctx)
	ops := []struct {
		name string
		run  func() error
	}{
		{"TryLock+Unlock", func() error { return takeAndLeave(ctx)(e.TryLock(ctx, "l", LockOptions{})) }},
		{"TryRLock+Unlock", func() error { return takeAndLeave(ctx)(e.TryRLock(ctx, "r", LockOptions{})) }},
		{"TryRLock+Unlock beside a reader", func() error { return takeAndLeave(ctx)(e.TryRLock(ctx, "rb", LockOptions{})) }},
		{"TryWLock+Unlock", func() error { return takeAndLeave(ctx)(e.TryWLock(ctx, "w", LockOptions{})) }},
		{"TryAcquireSemaphore+Release", func() error {
			return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 2}))
		}},
		{"AcquireSemaphore+Release", func() error { return giveBack(ctx)(e.AcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 2})) }},
		{"TryAcquireSemaphore beside permit", func() error {
			return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "sb", SemaphoreOptions{Limit: 2}))
		}},
	}
	const rounds = 10
	for _, op := range ops {
		if err := op.run(); err != nil { // loads its scripts
			t.Fatalf("%s: %v", op.name, err)
		}
		before := dataCommands(t, s)
		for range rounds {
			if err := op.run(); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
		}
		n := dataCommands(t, s) - before
		if n != int64(rounds*ownerlessCommands[op.name]) {
			t.Errorf("%s: %v commands, want %d as before Owners were stored", op.name, float64(n)/rounds, ownerlessCommands[op.name])
		}
	}
}

// takeAndLeave unlocks what a lock call took, or returns its error.
func takeAndLeave(ctx context.Context) func(*Lock, error) error {
	return func(l *Lock, err error) error {
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}
}

// giveBack releases what an acquisition took, or returns its error.
func giveBack(ctx context.Context) func(*Permit, error) error {
	return func(p *Permit, err error) error {
		if err != nil {
			return err
		}
		return p.Release(ctx)
	}
}

// dataCommands is how many commands s has run (INFO commandstats), but
// those that run no script's data work: EVALSHA itself, INFO, PING and
// the engine's subscription.
func dataCommands(t *testing.T, s *testserver.Server) int64 {
	t.Helper()
	info, err := redis.String(s.Do("INFO", "commandstats"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		switch name {
		case "evalsha", "eval", "info", "ping", "subscribe", "unsubscribe", "script", "client", "hello", "select":
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		c, _ := strconv.ParseInt(v, 10, 64)
		n += c
	}
	return n
}
