package atomicredis

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// hookOp is one public call that TestHook_UnusedCostsNothing times.
type hookOp struct {
	name string
	run  func() error
}

// unusedHookOps are the calls whose cost an engine without a hook must
// keep: the common path of each kind of object.
func unusedHookOps(e *Engine, ctx context.Context) []hookOp {
	return []hookOp{
		{"TryLock+Unlock", func() error { return takeAndLeave(ctx)(e.TryLock(ctx, "hook-l", LockOptions{TTL: time.Minute})) }},
		{"TryAcquireSemaphore+Release", func() error {
			return giveBack(ctx)(e.TryAcquireSemaphore(ctx, "hook-s", SemaphoreOptions{Limit: 2, TTL: time.Minute}))
		}},
		{"LockInfo", func() error { _, err := e.LockInfo(ctx, "hook-l"); return err }},
		{"MarkActive", func() error { return e.MarkActive(ctx, "hook-g", "p", 7) }},
		{"SuggestRecent", func() error { _, err := e.SuggestRecent(ctx, "hook-r", "a", 5); return err }},
	}
}

// unhookedAllocs is each call's allocations per run (client side, on a
// private redis-server) at bb60bb4, before engines had hooks: measured by
// TestHook_UnusedCostsNothing's loop on that commit. Under -race the
// counts are not compared: the race detector's sync.Pool drops a random
// quarter of what is put back (call.go keeps its conns in one), so a
// call's allocations vary from run to run (37 or 36 for MarkActive).
// LockInfo's is 10 since lock_info replies with named fields (a free
// lock's reply is {"waiting", n}): 12 at bb60bb4, with five values.
// TryLock+Unlock's is 15 and LockInfo's 8 since a lock is one key (v5;
// 19 and 10 before: the other keys' strings and their boxes), and 13
// since the lock's scripts take only what they read (a one-try acquire
// its token and lease) and a grant replies its fence alone.
var unhookedAllocs = map[string]float64{
	"TryLock+Unlock": 13, "TryAcquireSemaphore+Release": 23, "LockInfo": 8, "MarkActive": 35, "SuggestRecent": 6,
}

// An engine without a hook spends nothing on hooks: each common call
// allocates as much as before hooks existed, and a hook adds no command
// (INFO commandstats of a private server).
func TestHook_UnusedCostsNothing(t *testing.T) {
	s := privateServer(t, "redis")
	ctx := ctxT(t)
	plain, withHook := engine(s), engine(s, WithHook(&recordingHook{}))
	if raceDetector {
		t.Log("allocations not compared under -race (its sync.Pool drops at random); the commands still are")
	}
	for _, op := range unusedHookOps(plain, ctx) {
		if err := op.run(); err != nil { // loads its scripts
			t.Fatalf("%s: %v", op.name, err)
		}
		if raceDetector {
			continue
		}
		n := testing.AllocsPerRun(100, func() { _ = op.run() })
		for range 2 { // the least of three: other goroutines' allocations count too
			n = min(n, testing.AllocsPerRun(100, func() { _ = op.run() }))
		}
		if want := unhookedAllocs[op.name]; n != want {
			t.Errorf("%s without a hook: %v allocations a call, want %v as before hooks", op.name, n, want)
		}
	}
	const rounds = 10
	plainOps, hookedOps := unusedHookOps(plain, ctx), unusedHookOps(withHook, ctx)
	for _, op := range hookedOps {
		if err := op.run(); err != nil { // an engine's first mark of a partition indexes it
			t.Fatalf("%s: %v", op.name, err)
		}
	}
	for i := range plainOps {
		count := func(op hookOp) int64 {
			before := dataCommands(t, s)
			for range rounds {
				if err := op.run(); err != nil {
					t.Fatalf("%s: %v", op.name, err)
				}
			}
			return dataCommands(t, s) - before
		}
		if a, b := count(plainOps[i]), count(hookedOps[i]); a != b {
			t.Errorf("%s: %d commands with a hook, %d without", plainOps[i].name, b, a)
		}
	}
}

// recordingHook records what a Hook sees: each Start and End, and every
// Event its Observe gets.
type recordingHook struct {
	mu       sync.Mutex
	started  []Operation
	ended    []hookEnd
	observed []Event
}

type hookEnd struct {
	op      Operation
	ev      Event
	spanned bool // End's context is the one Start returned
}

type spanKey struct{}

func (h *recordingHook) Start(ctx context.Context, op Operation) context.Context {
	h.mu.Lock()
	h.started = append(h.started, op)
	h.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, op)
}

func (h *recordingHook) End(ctx context.Context, op Operation, ev Event) {
	h.mu.Lock()
	h.ended = append(h.ended, hookEnd{op, ev, ctx.Value(spanKey{}) == op})
	h.mu.Unlock()
}

func (h *recordingHook) Observe(ev Event) {
	h.mu.Lock()
	h.observed = append(h.observed, ev)
	h.mu.Unlock()
}

// last returns the last End of method, and whether there was one.
func (h *recordingHook) last(method string) (hookEnd, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.ended) - 1; i >= 0; i-- {
		if h.ended[i].op.Method == method {
			return h.ended[i], true
		}
	}
	return hookEnd{}, false
}

// seen returns the types of the events Observe got for name, in order.
func (h *recordingHook) seen(name string) []EventType {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ts []EventType
	for _, ev := range h.observed {
		if ev.Name == name {
			ts = append(ts, ev.Type)
		}
	}
	return ts
}

// spanPool is a Pool that records whether the context of each connection
// it hands out carries a Hook's span.
type spanPool struct {
	Pool
	mu      sync.Mutex
	spanned map[string]int // by Method: connections taken under its span
}

func (p *spanPool) GetContext(ctx context.Context) (redis.Conn, error) {
	if op, ok := ctx.Value(spanKey{}).(Operation); ok {
		p.mu.Lock()
		p.spanned[op.Method]++
		p.mu.Unlock()
	}
	return p.Pool.GetContext(ctx)
}

// A Hook sees each public call: Start with its Operation, End with the
// context Start returned and the outcome (acquired, refused, released, or
// done with its error and time), and the call's commands run under that
// context. Bad input is a call too.
func TestHook_SeesEachCall(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		h := &recordingHook{}
		var pool *spanPool // where the engine's pool can be wrapped: not a multi-node cluster's
		e := engine(s, WithHook(h))
		if s.Engines == nil {
			pool = &spanPool{Pool: s.Pool, spanned: map[string]int{}}
			e = New(pool, WithNamespace(s.NS), WithHook(h))
			defer e.Close(context.Background())
		}
		ctx, other := ctxT(t), engine(s)

		l, err := e.Lock(ctx, "cart:1", LockOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		end, ok := h.last("Lock")
		if !ok || end.op != (Operation{ObjectLock, "cart:1", "Lock"}) || end.ev.Type != EventAcquired ||
			end.ev.Fence != l.Fence() || end.ev.Token != l.Token() || end.ev.Err != nil || !end.spanned {
			t.Errorf("Lock's End: %+v (found %v), want acquired with fence %d under Start's context", end, ok, l.Fence())
		}
		if _, err := e.TryLock(ctx, "cart:1", LockOptions{}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
		if end, _ := h.last("TryLock"); end.ev.Type != EventNotAcquired || !errors.Is(end.ev.Err, ErrNotAcquired) {
			t.Errorf("refused TryLock's End: %+v, want not acquired with ErrNotAcquired", end.ev)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if end, _ := h.last("Unlock"); end.ev.Type != EventReleased || end.ev.Fence != l.Fence() || end.ev.Held <= 0 {
			t.Errorf("Unlock's End: %+v, want released with its fence and how long it was held", end.ev)
		}
		if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Unlock: %v", err)
		}
		if end, _ := h.last("Unlock"); end.ev.Type != EventDone || !errors.Is(end.ev.Err, ErrNotHeld) {
			t.Errorf("failed Unlock's End: %+v, want done with ErrNotHeld", end.ev)
		}

		p, err := e.TryAcquireSemaphore(ctx, "pool", SemaphoreOptions{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if end, _ := h.last("TryAcquireSemaphore"); end.ev.Type != EventAcquired || end.op.Object != ObjectSemaphore {
			t.Errorf("TryAcquireSemaphore's End: %+v", end)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if end, _ := h.last("Release"); end.ev.Type != EventReleased {
			t.Errorf("Release's End: %+v", end.ev)
		}

		s.Realtime(t) // a new election's first term waits a lease
		leader, err := e.Election("primary", ElectionOptions{TTL: 200 * time.Millisecond}).Campaign(ctx, "me")
		if err != nil {
			t.Fatal(err)
		}
		defer leader.Unlock(ctx)
		if end, _ := h.last("Campaign"); end.ev.Type != EventElected || end.ev.Fence != leader.Fence() || end.op.Object != ObjectElection {
			t.Errorf("Campaign's End: %+v, want elected in term %d", end, leader.Fence())
		}

		if err := e.MarkActive(ctx, "logins", "day", -1); !errors.Is(err, ErrInvalid) {
			t.Fatalf("MarkActive of a negative id: %v", err)
		}
		if end, _ := h.last("MarkActive"); end.ev.Type != EventDone || !errors.Is(end.ev.Err, ErrInvalid) || end.op.Object != ObjectActivityGroup {
			t.Errorf("bad MarkActive's End: %+v, want done with ErrInvalid", end)
		}
		if err := e.MarkActiveMany(ctx, "logins", "day", 1, 2, 3); err != nil {
			t.Fatal(err)
		}
		if n, err := e.CountActive(ctx, "logins", "day"); err != nil || n != 3 {
			t.Fatalf("CountActive: %d, %v", n, err)
		}
		if end, _ := h.last("CountActive"); end.ev.Type != EventDone || end.ev.Err != nil || end.ev.Wait <= 0 || !end.spanned {
			t.Errorf("CountActive's End: %+v, want done, timed, under Start's context", end)
		}
		ml, err := e.LockAll(ctx, []string{"a", "b"}, LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if end, _ := h.last("LockAll"); end.op.Name != "a,b" || end.ev.Type != EventAcquired || end.ev.Fence != ml.Locks()[0].Fence() {
			t.Errorf("LockAll's End: %+v", end)
		}
		if err := ml.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := other.LockInfo(ctx, "cart:1"); err != nil {
			t.Fatal(err)
		}

		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.started) != len(h.ended) {
			t.Errorf("%d Starts, %d Ends", len(h.started), len(h.ended))
		}
		if pool == nil {
			return
		}
		pool.mu.Lock()
		defer pool.mu.Unlock()
		for _, m := range []string{"Lock", "TryLock", "Unlock", "Campaign", "MarkActiveMany", "CountActive", "LockAll"} {
			if pool.spanned[m] == 0 {
				t.Errorf("%s took no connection under its span's context (%v)", m, pool.spanned)
			}
		}
	})
}

// Observe gets what the observer gets, elections' own events included: a
// campaign that waits, the one elected, a leader deposed when its lock
// vanishes, and each change an Observe call sees; and a watchdog lock's
// loss in the background.
func TestHook_ObservesElectionsAndLosses(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		h := &recordingHook{}
		var mu sync.Mutex
		var fromObserver []EventType
		e := engine(s, WithHook(h), WithObserver(func(ev Event) {
			mu.Lock()
			fromObserver = append(fromObserver, ev.Type)
			mu.Unlock()
		}))
		ctx := ctxT(t)
		s.Realtime(t) // a new election's first term waits a lease
		el := e.Election("office", ElectionOptions{TTL: 300 * time.Millisecond})
		octx, stop := context.WithCancel(ctx)
		defer stop()
		changes := el.Observe(octx)
		first, err := el.Campaign(ctx, "one")
		if err != nil {
			t.Fatal(err)
		}
		second := make(chan *Lock, 1)
		go func() {
			l, err := el.Campaign(ctx, "two")
			if err != nil {
				t.Error(err)
			}
			second <- l
		}()
		waitFor(t, func() bool { return slices.Contains(h.seen("office"), EventCampaign) }) // the second campaign queued
		s.Must(t, "DEL", s.NS+"election:{office}")                                          // the leadership vanishes: the watchdog finds it gone
		l2 := <-second
		defer l2.Unlock(ctx)
		waitFor(t, func() bool { return slices.Contains(h.seen("office"), EventDeposed) }) // the first leader deposed
		for l := range changes {
			if l.Value == "two" {
				break
			}
		}
		want := []EventType{EventElected, EventCampaign, EventDeposed, EventElected, EventLeaderChanged}
		got := h.seen("office")
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("Observe got %v, want each of %v", got, want)
				break
			}
		}
		if slices.Contains(got, EventAcquired) || slices.Contains(got, EventLost) || slices.Contains(got, EventQueued) {
			t.Errorf("an election told as a lock: %v", got)
		}
		mu.Lock()
		n := len(fromObserver)
		mu.Unlock()
		h.mu.Lock()
		m := len(h.observed)
		h.mu.Unlock()
		if n != m {
			t.Errorf("the observer got %d events, the hook's Observe %d", n, m)
		}
		_ = first
	})
}

// panickingPool is a Pool whose GetContext panics.
type panickingPool struct{}

func (panickingPool) GetContext(context.Context) (redis.Conn, error) { panic("the pool panicked") }

// A call that panics (here in the Pool) still ends its span: End gets an
// Event whose Err says it panicked, and the panic goes on to the caller.
func TestHook_EndsACallThatPanicked(t *testing.T) {
	h := &recordingHook{}
	e := New(panickingPool{}, WithHook(h))
	calls := map[string]func(){
		"TryLock": func() { _, _ = e.TryLock(context.Background(), "p", LockOptions{}) },
		"Unlock": func() {
			l := &Lock{holding: holding{e: e, obj: object{kind: kindLock, name: "p"}, ops: lockOps, since: time.Now()}}
			_ = l.Unlock(context.Background())
		},
	}
	for method, call := range calls {
		panicked := func() (p any) {
			defer func() { p = recover() }()
			call()
			return nil
		}()
		if panicked == nil {
			t.Errorf("%s: no panic reached the caller", method)
			continue
		}
		end, ok := h.last(method)
		if !ok || !errors.Is(end.ev.Err, errPanicked) || !end.spanned {
			t.Errorf("%s panicked (%v): End %+v (%v), want one with errPanicked in Start's context", method, panicked, end, ok)
		}
	}
}
