package atomicredis

import (
	"testing"
	"time"
)

// unweightedCommands is how many commands (scripts' calls included) each
// semaphore operation made on a private redis-server before permits had
// weights (main at 9851909), measured by TestUnweightedCostsNothing itself
// on that commit with its Weight fields removed: permits of weight 1 must
// cost nothing, so these stay as they were. Since lowered, as this test
// counted them, where a one-try acquire reads the waiters hash, and a
// release the fence counter, only when someone is queued (27, 27, 26, 30,
// 33 and 65 before); raised where SetSemaphoreLimit reads the permits
// before its first write, so that a key of the wrong type fails it with
// nothing written (11 before), and where a permit's extension writes
// PEXPIRE first, so that it works at maxmemory (31 before).
var unweightedCommands = map[string]int{
	"TryAcquireSemaphore+Release":       25,
	"AcquireSemaphore+Release":          26,
	"TryAcquireSemaphore beside permit": 24,
	"with an Owner":                     28,
	"Extend":                            32,
	"handoff":                           63,
	"SemaphoreInfo":                     7,
	"SemaphoreInfo with an Owner":       8,
	"SetSemaphoreLimit":                 12,
}

// Weight 1 costs nothing: taking, extending, handing over and releasing
// permits of weight 1, and reading a semaphore's figures, run as many
// commands as before permits had weights (INFO commandstats of a private
// server, which nobody else uses).
func TestUnweightedCostsNothing(t *testing.T) {
	t.Parallel()
	s := privateServer(t, "redis")
	queued := make(chan struct{}, 1)
	e, ctx := engine(s, WithObserver(func(ev Event) {
		if ev.Type == EventQueued {
			queued <- struct{}{}
		}
	})), ctxT(t)
	e.queueTTL = 10 * time.Second // no extension of a queue entry within a round
	beside, err := e.TryAcquireSemaphore(ctx, "sb", SemaphoreOptions{Limit: 2, TTL: time.Minute, Weight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer beside.Release(ctx)
	named, err := e.TryAcquireSemaphore(ctx, "so", SemaphoreOptions{Limit: 2, TTL: time.Minute, Weight: 1, Owner: "me"})
	if err != nil {
		t.Fatal(err)
	}
	defer named.Release(ctx)
	o := SemaphoreOptions{Limit: 2, Weight: 1}
	ops := []struct {
		name string
		run  func() error
	}{
		{"TryAcquireSemaphore+Release", func() error { return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "s", o)) }},
		{"AcquireSemaphore+Release", func() error { return giveBack(ctx)(e.AcquireSemaphore(ctx, "s", o)) }},
		{"TryAcquireSemaphore beside permit", func() error { return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "sb", o)) }},
		{"with an Owner", func() error {
			return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 2, Weight: 1, Owner: "me"}))
		}},
		{"Extend", func() error {
			p, err := e.TryAcquireSemaphore(ctx, "s", o)
			if err != nil {
				return err
			}
			if err := p.Extend(ctx, 0); err != nil {
				return err
			}
			return p.Release(ctx)
		}},
		{"handoff", func() error { // a holder, a waiter queued, the release hands over
			one := SemaphoreOptions{Limit: 1, TTL: time.Minute, Wait: 30 * time.Second, Weight: 1}
			p, err := e.TryAcquireSemaphore(ctx, "h", one)
			if err != nil {
				return err
			}
			c := make(chan error, 1)
			go func() { c <- giveBack(ctx)(e.AcquireSemaphore(ctx, "h", one)) }()
			<-queued
			if err := p.Release(ctx); err != nil {
				return err
			}
			return <-c
		}},
		{"SemaphoreInfo", func() error { _, err := e.SemaphoreInfo(ctx, "sb"); return err }},
		{"SemaphoreInfo with an Owner", func() error { _, err := e.SemaphoreInfo(ctx, "so"); return err }},
		{"SetSemaphoreLimit", func() error { return e.SetSemaphoreLimit(ctx, "sb", 2) }},
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
		t.Logf("%s: %v commands", op.name, float64(n)/rounds)
		if n != int64(rounds*unweightedCommands[op.name]) {
			t.Errorf("%s: %v commands, want %d as before permits had weights", op.name, float64(n)/rounds, unweightedCommands[op.name])
		}
	}
}
