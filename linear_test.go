package atomicredis

// Histories checked linearizable: every call of several clients on
// several engines (each its own pool, all through one fault proxy that
// delays and cuts) recorded by internal/linear and checked with porcupine
// against a model of its object. Leases and queue entries last longer than
// a run, so that no lease runs out by a clock the history cannot see, but
// in TestLinear_Lease, whose calls learn the server's clock (clockedLock);
// FIFO is held to the server's arrival numbers; a
// call cut without an answer leaves its object possibly held, and the
// names move on in windows, so that a name stuck that way does not stall
// the run and no name's history grows past what the checker decides in
// seconds.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/atomicredis/atomicredis/internal/linear"
	"github.com/atomicredis/atomicredis/internal/testserver"
)

const (
	// linearLease is every lease and queue entry's lifetime: longer than
	// a run, so none runs out within one.
	linearLease = 30 * time.Minute
	// linearWait is how long a waiting acquisition waits.
	linearWait = 200 * time.Millisecond
	// linearWindow is how many names a window offers at once, and
	// linearCycles how many cycles a window lasts: each name sees some
	// 15 cycles, 40 to 60 operations.
	linearWindow = 4
	linearCycles = 60
	// rwWindow is linearCycles for a read-write lock, whose waiting grants
	// after a lost reply carry an Unknown acquisition each (RW's doc; every
	// waiting grant did before a holding knew of its lost replies): half
	// the operations a name, so that the checker decides within 2 s (up to
	// 15 s with 60 under -race here).
	rwWindow = 30
	// electionNames is linearWindow for an election, whose waiting
	// campaigns overlap long: twice the names, half the clients a name and
	// half the operations, so that each name's history stays quick to
	// check. (A CI run of 2 December at 4 names left the checker undecided
	// after 2 minutes; at 8 a run here found why: a late attempt that took
	// a leadership again after its Unlock, since fixed, as
	// TestRelease_VoidsALateAttempt shows.)
	electionNames = 8
	// linearCheck is the checker's timeout: an Unknown verdict fails.
	linearCheck = 2 * time.Minute
)

// linearTarget is how many operations each model's run records: 10,000
// with ATOMICREDIS_LINEAR_LONG=1 (CI), else a short run of a few seconds.
func linearTarget() int {
	if os.Getenv("ATOMICREDIS_LINEAR_LONG") == "1" {
		return 10000
	}
	return 600
}

// linearRig is a run's engines, their proxy and the recorder.
type linearRig struct {
	t      *testing.T
	s      *testserver.Server
	rec    *linear.Recorder
	t0     time.Time // about when rec began
	proxy  *faultProxy
	es     []*Engine
	cycles atomic.Int64
	window int64 // cycles a window lasts, if not linearCycles
	names  int64 // names a window offers, if not linearWindow
	ids    atomic.Int64

	joined  sync.Map // token -> when its caller was first told it was queued
	arrival sync.Map // token -> the arrival number the server gave its last queue entry
	mu      sync.Mutex
	grants  []linear.Grant // for FIFO
	// freeze, when not 0, is the window (plus one) names stay in, whatever
	// the cycles: around a failover, so that the names of the window it
	// met are used after it.
	freeze atomic.Int64
	long   atomic.Bool // holdings last up to 6 s (pause)
	// guard, if set, is told of every lock and leadership granted, as the
	// holder's first write to a store guarded by its fence and token.
	guard func(name string, fence int64, token string)
}

// newLinearRig makes engines engines in s's namespace, each with a pool of
// its own through one proxy that delays a fifth of all chunks by up to
// 20 ms.
func newLinearRig(t *testing.T, s *testserver.Server, engines int) *linearRig {
	s.Realtime(t)
	r := &linearRig{t: t, s: s, rec: linear.NewRecorder(), t0: time.Now()}
	r.proxy = startProxy(t, s.Addr, faults{delayP: 0.2, maxDelay: 20 * time.Millisecond})
	for i := 0; i < engines; i++ {
		e := New(newPool(t, r.proxy.addr()), WithNamespace(s.NS), WithObserver(func(ev Event) {
			if ev.Type == EventQueued {
				r.joined.LoadOrStore(ev.Token, time.Now())
			}
		}))
		e.queueTTL = linearLease
		e.queuedHook = func(token string, arrival int64) { r.arrival.Store(token, arrival) }
		t.Cleanup(func() { e.Close(context.Background()) })
		r.es = append(r.es, e)
	}
	return r
}

// check checks the run's history under m, and logs how much of it the
// faults left unanswered.
func (r *linearRig) check(what string, m porcupine.Model) {
	ops := r.rec.Operations()
	linear.Check(r.t, r.s.Name+" "+what, m, ops, linearCheck)
	unknown := linear.Unknowns(ops)
	r.t.Logf("%s: %d calls without an answer (%d of them open, at most %d in one partition), %d connections cut", r.s.Name, unknown, r.rec.Opened(), linear.MostOpen(m, ops, r.rec.Opened()), r.proxy.cuts.Load())
	if unknown == 0 && len(ops) >= 10000 {
		r.t.Errorf("no call of %d went unanswered: the faults did not bite, the check proves little", len(ops))
	}
}

// linearClient is one goroutine of a run.
type linearClient struct {
	r  *linearRig
	id int
	e  *Engine
}

// run runs cycle on clients goroutines per engine until the recorder holds
// target operations (or five minutes pass), while the proxy cuts a
// connection at random three times as often as chaos alone does.
func (r *linearRig) run(clients, target int, cycle func(c *linearClient)) {
	stops := []func(){r.proxy.chaos(), r.proxy.chaos(), r.proxy.chaos()}
	deadline := time.Now().Add(5 * time.Minute)
	var wg sync.WaitGroup
	for i := 0; i < clients*len(r.es); i++ {
		c := &linearClient{r: r, id: i, e: r.es[i%len(r.es)]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.rec.Len() < target && time.Now().Before(deadline) {
				cycle(c)
			}
		}()
	}
	wg.Wait()
	for _, stop := range stops {
		stop()
	}
	if n := r.rec.Len(); n < target {
		r.t.Errorf("only %d of %d operations in five minutes", n, target)
	}
}

// name is a name of the current window, prefixed: each cycle moves the
// windows on by one cycle.
func (c *linearClient) name(prefix string) string {
	cycles := int64(linearCycles)
	if c.r.window != 0 {
		cycles = c.r.window
	}
	names := int64(linearWindow)
	if c.r.names != 0 {
		names = c.r.names
	}
	w := c.r.cycles.Add(1) / cycles
	if f := c.r.freeze.Load(); f != 0 {
		w = f - 1
	}
	return prefix + strconv.FormatInt(w*names+rand.Int64N(names), 10)
}

// newID is a fresh identity: of an acquisition that failed, which the
// model's Abandon names; of a LockAll's holdings; of a campaign's value.
func (c *linearClient) newID() string { return "g" + strconv.FormatInt(c.r.ids.Add(1), 10) }

// pause holds for up to 2 ms a third of the time, so that holdings
// overlap other calls; while the rig's holds are long (across a failover),
// for up to 6 s half the time.
func (c *linearClient) pause() {
	if c.r.long.Load() && rand.IntN(2) == 0 {
		time.Sleep(rand.N(6 * time.Second))
		return
	}
	if rand.IntN(3) == 0 {
		time.Sleep(rand.N(2 * time.Millisecond))
	}
}

// fate is what an acquisition's error says happened to it.
type fate int8

const (
	granted    fate = iota
	refused         // the server's answer: not acquired
	failed          // no answer to trust; abandoned before the call returned
	failedLate      // no answer, and the abandon went on in the background
)

// classify reads an acquisition's error. Only a one-try call's
// ErrNotAcquired is a plain refusal: a waiting one's may have been handed
// the object and abandoned it (passing it on) before it returned.
func classify(err error, try bool) fate {
	switch {
	case err == nil:
		return granted
	case strings.Contains(err.Error(), "abandoning the attempt got no answer"):
		return failedLate
	case try && errors.Is(err, ErrNotAcquired):
		return refused
	}
	return failed
}

// recordFailed records an acquisition that failed without an answer as
// an Unknown one (unknown) and the library's abandon of it, which ran
// within the call (ran: it released whatever the acquisition took); or,
// if late (the abandon went on in the background), both open.
func recordFailed[I linear.Input, O any](call linear.Call, acq, abandon I, unknown, ran O, late bool) {
	if late {
		call.Open(acq, unknown)
		call.Open(abandon, unknown)
		return
	}
	call.End(acq, unknown)
	call.End(abandon, ran)
}

// settle pauses a client whose call failed: while the server is down every
// call fails at once, and the pause keeps each name's open calls few.
func settle() { time.Sleep(10 * time.Millisecond) }

// releaseResult is what a release's error says: Ok, No (not held), or
// Unknown, which is recorded open (its reply was lost; it may land late).
func releaseResult(err error) linear.Result {
	switch {
	case err == nil:
		return linear.Ok
	case errors.Is(err, ErrNotHeld):
		return linear.No
	}
	return linear.Unknown
}

// end records a call with res: open if Unknown.
func end[I linear.Input, O any](call linear.Call, in I, out O, res linear.Result) {
	if res == linear.Unknown {
		call.Open(in, out)
		return
	}
	call.End(in, out)
}

// TestLinear_Lock: TryLock and Lock with a short wait, IsLocked, Unlock and
// a second, stale Unlock now and then, by 3 clients on each of 3 engines.
func TestLinear_Lock(t *testing.T) {
	testserver.Parallel(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		r := newLinearRig(t, s, 3)
		r.run(3, linearTarget(), lockCycle)
		r.check("lock", linear.Lock())
		r.checkFIFO(linear.Lock())
	})
}

// checkFIFO holds the run's grants against the order their callers were
// told they were queued in (linear.FIFO); m describes the history.
func (r *linearRig) checkFIFO(m porcupine.Model) {
	queued, numbered := 0, 0
	for i, g := range r.grants {
		if at, ok := r.joined.Load(g.Token); ok {
			r.grants[i].Joined = at.(time.Time)
			queued++
		}
		// miniredis's clock moves in Realtime's ticks: a queue that empties
		// and fills again within one gives its new entry a number at or
		// below an earlier one's (q_join), so there the clients' clock alone
		// orders the waiters.
		if n, ok := r.arrival.Load(g.Token); ok && r.s.Mini == nil {
			r.grants[i].Arrival = n.(int64)
			numbered++
		}
	}
	bad := linear.FIFO(r.grants)
	r.t.Logf("%s: FIFO: %d grants, %d of them after a wait in the queue (%d with the server's arrival number), %d out of order", r.s.Name, len(r.grants), queued, numbered, len(bad))
	for i, b := range bad {
		if i == 5 {
			break
		}
		r.t.Errorf("out of queue order: %s", b)
		if i == 0 { // the name's grants and history, to see how
			name, _, _ := strings.Cut(b, ":")
			for _, g := range r.grants {
				if g.Name == name {
					queued := "never queued"
					if !g.Joined.IsZero() {
						queued = fmt.Sprintf("told queued %d µs, arrival %d", g.Joined.Sub(r.t0).Microseconds(), g.Arrival)
					}
					r.t.Logf("  grant %s fence %d began %d µs, %s", g.Token, g.Fence, g.Began.Sub(r.t0).Microseconds(), queued)
				}
			}
			r.t.Logf("its history:\n%s", linear.Describe(m, linear.Named(r.rec.Operations(), name)))
		}
	}
	if (queued == 0 || numbered == 0 && r.s.Mini == nil) && len(r.grants) >= 1000 {
		r.t.Errorf("of %d grants, %d were queued first and %d had an arrival number: FIFO was not tried", len(r.grants), queued, numbered)
	}
}

func lockCycle(c *linearClient) {
	ctx, name := context.Background(), c.name("l")
	o := LockOptions{TTL: linearLease, Wait: linearWait}
	try := rand.IntN(2) == 0
	began := time.Now()
	call := c.r.rec.Begin(c.id)
	var l *Lock
	var err error
	if try {
		l, err = c.e.TryLock(ctx, name, o)
	} else {
		l, err = c.e.Lock(ctx, name, o)
	}
	switch classify(err, try) {
	case granted:
		call.End(linear.LockIn{Op: linear.Acquire, Name: name, Token: l.Token()}, linear.LockOut{Result: linear.Ok, Fence: l.Fence()})
		c.r.mu.Lock()
		c.r.grants = append(c.r.grants, linear.Grant{Name: name, Token: l.Token(), Fence: l.Fence(), Began: began})
		c.r.mu.Unlock()
		if c.r.guard != nil {
			c.r.guard(name, l.Fence(), l.Token())
		}
	case refused:
		call.End(linear.LockIn{Op: linear.Acquire, Name: name}, linear.LockOut{Result: linear.No})
	case failed, failedLate:
		g := c.newID()
		recordFailed(call, linear.LockIn{Op: linear.Acquire, Name: name, Token: g},
			linear.LockIn{Op: linear.Abandon, Name: name, Token: g}, linear.LockOut{Result: linear.Unknown}, linear.LockOut{Result: linear.Ok}, classify(err, try) == failedLate)
		settle()
	}
	if rand.IntN(3) == 0 {
		call := c.r.rec.Begin(c.id)
		if locked, err := c.e.IsLocked(ctx, name); err == nil { // a failed read says nothing
			call.End(linear.LockIn{Op: linear.Read, Name: name}, linear.LockOut{Result: linear.Ok, Locked: locked})
		}
	}
	if l == nil {
		return
	}
	c.pause()
	unlocks := 1
	if rand.IntN(10) == 0 {
		unlocks = 2 // the second by a token no longer the holder's
	}
	for i := 0; i < unlocks; i++ {
		call := c.r.rec.Begin(c.id)
		res := releaseResult(l.Unlock(ctx))
		end(call, linear.LockIn{Op: linear.Release, Name: name, Token: l.Token()}, linear.LockOut{Result: res}, res)
	}
}

// clockedLock is the lock scripts a lease run's engines send clocked
// (embed.go's clocked): each call then learns the server's clock when its
// script began, which decides whether a lease had run out.
var clockedLock = map[*script]*script{
	scriptLockAcquire: clocked(scriptLockAcquire),
	scriptLockRelease: clocked(scriptLockRelease),
	scriptLockExtend:  clocked(scriptLockExtend),
}

// leaseSlack is linear.Lease's slack on s, in ms: how far the clock a
// script reads may be from the one that expires keys. A server reads one
// clock for both (3 ms covers a script's own run); miniredis's keys expire
// by Realtime's moves, each followed by TIME's, so a command between the
// two sees the keys' clock up to the longest move ahead.
func leaseSlack(s *testserver.Server) int64 {
	if s.Mini != nil {
		return 10 + s.RealtimeStep().Milliseconds()
	}
	return 3
}

// TestLinear_Lease: leases that run out while their holders hold on. One
// try to take a lock for 100 or 150 ms, a pause short of its end, about
// at it or past it, an Extend now and then, and Unlock, by 3 clients on
// each of 3 engines, each call clocked by the server (clockedLock); no
// waiting Lock, whose handed leases end by a queue entry's deadline.
func TestLinear_Lease(t *testing.T) {
	testserver.Parallel(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		r := newLinearRig(t, s, 3)
		for _, e := range r.es {
			e.clocked = clockedLock
		}
		var lapsed atomic.Int64
		r.run(3, linearTarget(), func(c *linearClient) { leaseCycle(c, &lapsed) })
		slack := leaseSlack(s)
		r.check("lease", linear.Lease(slack))
		t.Logf("%s: %d releases or extensions refused to a holder whose lease had run out; the clocks' slack %d ms", s.Name, lapsed.Load(), slack)
		if lapsed.Load() == 0 && r.rec.Len() >= 10000 {
			t.Errorf("no lease ran out under its holder: the leases were not tried")
		}
	})
}

// clockedCall runs f with a context whose script is clocked, and returns
// the server's clock when it began (0: no answer said).
func clockedCall(f func(ctx context.Context) error) (at int64, err error) {
	err = f(withClock(context.Background(), &at))
	return at, err
}

// holdFor pauses a holder of a lease of ttl: short of its end, about at
// it, or past it.
func (c *linearClient) holdFor(ttl time.Duration) {
	switch rand.IntN(4) {
	case 0:
		time.Sleep(ttl - 20*time.Millisecond + rand.N(40*time.Millisecond))
	case 1:
		time.Sleep(ttl + rand.N(60*time.Millisecond))
	default:
		c.pause()
	}
}

func leaseCycle(c *linearClient, lapsed *atomic.Int64) {
	name := c.name("e")
	ttl := time.Duration(100+50*rand.IntN(2)) * time.Millisecond
	call := c.r.rec.Begin(c.id)
	var l *Lock
	at, err := clockedCall(func(ctx context.Context) (err error) {
		l, err = c.e.TryLock(ctx, name, LockOptions{TTL: ttl})
		return err
	})
	in := linear.LeaseIn{Op: linear.Acquire, Name: name, TTL: ttl.Milliseconds()}
	switch classify(err, true) {
	case granted:
		in.Token = l.Token()
		call.End(in, linear.LeaseOut{Result: linear.Ok, Fence: l.Fence(), At: at})
	case refused:
		call.End(in, linear.LeaseOut{Result: linear.No, At: at})
		return
	default:
		in.Token = c.newID()
		recordFailed(call, in, linear.LeaseIn{Op: linear.Abandon, Name: name, Token: in.Token},
			linear.LeaseOut{Result: linear.Unknown}, linear.LeaseOut{Result: linear.Ok}, classify(err, true) == failedLate)
		settle()
		return
	}
	c.holdFor(ttl)
	if rand.IntN(3) == 0 {
		ttl = 100 * time.Millisecond
		call := c.r.rec.Begin(c.id)
		at, err := clockedCall(func(ctx context.Context) error { return l.Extend(ctx, ttl) })
		res := releaseResult(err)
		if res == linear.No {
			lapsed.Add(1)
		}
		end(call, linear.LeaseIn{Op: linear.Extend, Name: name, Token: l.Token(), TTL: ttl.Milliseconds()}, linear.LeaseOut{Result: res, At: at}, res)
		if res != linear.Ok {
			return
		}
		c.holdFor(ttl)
	}
	call = c.r.rec.Begin(c.id)
	at, err = clockedCall(l.Unlock)
	res := releaseResult(err)
	if res == linear.No {
		lapsed.Add(1)
	}
	end(call, linear.LeaseIn{Op: linear.Release, Name: name, Token: l.Token()}, linear.LeaseOut{Result: res, At: at}, res)
}

// TestLinear_RW: readers (three in five) and writers, one try or a short
// wait, by 3 clients on each of 3 engines.
func TestLinear_RW(t *testing.T) {
	testserver.Parallel(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		r := newLinearRig(t, s, 3)
		r.window = rwWindow
		r.run(3, linearTarget(), rwCycle)
		r.check("rw", linear.RW())
		r.checkFIFO(linear.RW())
	})
}

func rwCycle(c *linearClient) {
	ctx, name := context.Background(), c.name("rw")
	o := LockOptions{TTL: linearLease, Wait: linearWait}
	try, reader := rand.IntN(2) == 0, rand.IntN(5) < 3
	op := linear.Acquire
	if reader {
		op = linear.Share
	}
	began := time.Now()
	call := c.r.rec.Begin(c.id)
	var l *Lock
	var err error
	switch {
	case try && reader:
		l, err = c.e.TryRLock(ctx, name, o)
	case reader:
		l, err = c.e.RLock(ctx, name, o)
	case try:
		l, err = c.e.TryWLock(ctx, name, o)
	default:
		l, err = c.e.WLock(ctx, name, o)
	}
	switch classify(err, try) {
	case granted:
		if l.late { // an earlier attempt of the call may have taken it, its reply lost
			call.End(linear.LockIn{Op: op, Name: name, Token: l.Token()}, linear.LockOut{Result: linear.Unknown})
		}
		call.End(linear.LockIn{Op: op, Name: name, Token: l.Token()}, linear.LockOut{Result: linear.Ok, Fence: l.Fence()})
		if !l.late { // a late grant's fence is its call's second
			c.r.mu.Lock()
			c.r.grants = append(c.r.grants, linear.Grant{Name: name, Token: l.Token(), Fence: l.Fence(), Began: began})
			c.r.mu.Unlock()
		}
	case refused:
		call.End(linear.LockIn{Op: op, Name: name}, linear.LockOut{Result: linear.No})
	default:
		g := c.newID()
		recordFailed(call, linear.LockIn{Op: op, Name: name, Token: g},
			linear.LockIn{Op: linear.Abandon, Name: name, Token: g}, linear.LockOut{Result: linear.Unknown}, linear.LockOut{Result: linear.Ok}, classify(err, try) == failedLate)
		settle()
		return
	}
	if l == nil {
		return
	}
	c.pause()
	call = c.r.rec.Begin(c.id)
	res := releaseResult(l.Unlock(ctx))
	end(call, linear.LockIn{Op: linear.Release, Name: name, Token: l.Token()}, linear.LockOut{Result: res}, res)
}

// TestLinear_Semaphore: weighted permits (1 or 2) of semaphores whose limit
// (2 to 4) SetSemaphoreLimit changes now and then, one try or a short
// wait, and SemaphoreHolders, by 3 clients on each of 3 engines.
func TestLinear_Semaphore(t *testing.T) {
	testserver.Parallel(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		r := newLinearRig(t, s, 3)
		var limited sync.Map // name -> *sync.Once: its first limit set
		r.run(3, linearTarget(), func(c *linearClient) { semCycle(c, &limited) })
		r.check("semaphore", linear.Semaphore())
		r.checkFIFO(linear.Semaphore())
	})
}

// setLimit calls SetSemaphoreLimit and records it; it reports whether the
// limit was surely set.
// noLimit reports whether err is the server's refusal of an acquisition
// for want of a stored limit.
func noLimit(err error) bool {
	return errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "no limit is stored")
}

func (c *linearClient) setLimit(name string, limit int) bool {
	call := c.r.rec.Begin(c.id)
	err := c.e.SetSemaphoreLimit(context.Background(), name, limit)
	res := linear.Ok
	if err != nil {
		res = linear.Unknown
	}
	end(call, linear.SemIn{Op: linear.SetLimit, Name: name, Limit: limit}, linear.SemOut{Result: res}, res)
	return err == nil
}

func semCycle(c *linearClient, limited *sync.Map) {
	ctx, name := context.Background(), c.name("s")
	once, _ := limited.LoadOrStore(name, &sync.Once{})
	once.(*sync.Once).Do(func() { // the model's semaphore has no limit until one is set
		for !c.setLimit(name, 2+rand.IntN(3)) {
			settle()
		}
	})
	if rand.IntN(10) == 0 {
		c.setLimit(name, 2+rand.IntN(3))
	}
	weight, try := 1+rand.IntN(2), rand.IntN(2) == 0
	o := SemaphoreOptions{TTL: linearLease, Wait: linearWait, Weight: weight}
	began := time.Now()
	call := c.r.rec.Begin(c.id)
	var p *Permit
	var err error
	if try {
		p, err = c.e.TryAcquireSemaphore(ctx, name, o)
	} else {
		p, err = c.e.AcquireSemaphore(ctx, name, o)
	}
	switch classify(err, try) {
	case granted:
		call.End(linear.SemIn{Op: linear.Acquire, Name: name, Token: p.Token(), Weight: weight}, linear.SemOut{Result: linear.Ok, Fence: p.Fence()})
		c.r.mu.Lock()
		c.r.grants = append(c.r.grants, linear.Grant{Name: name, Token: p.Token(), Fence: p.Fence(), Began: began})
		c.r.mu.Unlock()
	case refused:
		call.End(linear.SemIn{Op: linear.Acquire, Name: name, Weight: weight}, linear.SemOut{Result: linear.No})
	default:
		if noLimit(err) { // a restart lost the limit: set one again
			call.End(linear.SemIn{Op: linear.Acquire, Name: name, Weight: weight}, linear.SemOut{Result: linear.No, NoLimit: true})
			c.setLimit(name, 2+rand.IntN(3))
			return
		}
		g := c.newID()
		recordFailed(call, linear.SemIn{Op: linear.Acquire, Name: name, Token: g, Weight: weight},
			linear.SemIn{Op: linear.Abandon, Name: name, Token: g}, linear.SemOut{Result: linear.Unknown}, linear.SemOut{Result: linear.Ok}, classify(err, try) == failedLate)
		settle()
	}
	if rand.IntN(3) == 0 {
		call := c.r.rec.Begin(c.id)
		if n, err := c.e.SemaphoreHolders(ctx, name); err == nil {
			call.End(linear.SemIn{Op: linear.Read, Name: name}, linear.SemOut{Result: linear.Ok, Holders: n})
		}
	}
	if p == nil {
		return
	}
	c.pause()
	call = c.r.rec.Begin(c.id)
	res := releaseResult(p.Release(ctx))
	end(call, linear.SemIn{Op: linear.Release, Name: name, Token: p.Token()}, linear.SemOut{Result: res}, res)
}

// TestLinear_LockAll: TryLockAll over two or three names of a group of
// three, TryLock of one, IsLocked of one, by 3 clients on each of 3
// engines. TryLockAll is one script on a server that is not a cluster: a
// grant takes every name at one instant. MultiLock.Unlock releases each
// name on its own, so it is recorded as one release a name, each within
// the call. (LockAll's waiting path takes the names one after another, so
// it is not one step of this model either.)
func TestLinear_LockAll(t *testing.T) {
	testserver.Parallel(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		r := newLinearRig(t, s, 3)
		r.run(3, linearTarget(), multiCycle)
		r.check("lockall", linear.LockAll())
	})
}

func multiCycle(c *linearClient) {
	ctx, group := context.Background(), c.name("g")
	lockName := func(i int) string { return group + "." + string(rune('a'+i)) }
	var set uint8
	var names []string
	var idx []int
	if rand.IntN(3) == 0 {
		set = 1 << rand.IntN(linear.GroupSize)
	} else {
		set = [...]uint8{0b011, 0b101, 0b110, 0b111}[rand.IntN(4)]
	}
	for i := 0; i < linear.GroupSize; i++ {
		if set&(1<<i) != 0 {
			names, idx = append(names, lockName(i)), append(idx, i)
		}
	}
	if rand.IntN(4) == 0 {
		i := rand.IntN(linear.GroupSize)
		call := c.r.rec.Begin(c.id)
		if locked, err := c.e.IsLocked(ctx, lockName(i)); err == nil {
			call.End(linear.MultiIn{Op: linear.Read, Group: group, Names: 1 << i}, linear.MultiOut{Result: linear.Ok, Locked: locked})
		}
	}
	o := LockOptions{TTL: linearLease}
	tok := c.newID() // the model's one token for the group's holdings
	acq := linear.MultiIn{Op: linear.Acquire, Group: group, Names: set, Token: tok}
	call := c.r.rec.Begin(c.id)
	var locks []*Lock
	var multi *MultiLock
	var out linear.MultiOut
	var err error
	if len(names) == 1 {
		var l *Lock
		if l, err = c.e.TryLock(ctx, names[0], o); err == nil {
			locks = []*Lock{l}
		}
	} else if multi, err = c.e.TryLockAll(ctx, names, o); err == nil {
		locks = multi.Locks()
	}
	for j, l := range locks {
		out.Fences[idx[j]] = l.Fence()
	}
	switch oc := classify(err, true); oc {
	case granted:
		out.Result = linear.Ok
		call.End(acq, out)
	case refused:
		call.End(acq, linear.MultiOut{Result: linear.No})
	case failed, failedLate:
		unknown := linear.MultiOut{Result: linear.Unknown}
		abandon := func(i int) linear.MultiIn {
			return linear.MultiIn{Op: linear.Abandon, Group: group, Names: 1 << i, Token: tok}
		}
		if len(idx) == 1 {
			recordFailed(call, acq, abandon(idx[0]), unknown, linear.MultiOut{Result: linear.Ok}, oc == failedLate)
		} else { // TryLockAll abandons in the background, each name on its own
			call.Open(acq, unknown)
			for _, i := range idx {
				call.Open(abandon(i), unknown)
			}
		}
		settle()
	}
	if len(locks) == 0 {
		return
	}
	c.pause()
	call = c.r.rec.Begin(c.id)
	if multi == nil {
		res := releaseResult(locks[0].Unlock(ctx))
		end(call, linear.MultiIn{Op: linear.Release, Group: group, Names: set, Token: tok}, linear.MultiOut{Result: res}, res)
		return
	}
	// MultiLock.Unlock releases each name on its own, and its error joins
	// theirs, which says no longer which name's it was: on an error, each
	// release is Unknown.
	res := linear.Ok
	if multi.Unlock(ctx) != nil {
		res = linear.Unknown
	}
	for _, i := range idx {
		end(call, linear.MultiIn{Op: linear.Release, Group: group, Names: 1 << i, Token: tok}, linear.MultiOut{Result: res}, res)
	}
}

// TestLinear_Election: Campaign bounded by a short ctx, Leader, and resigns
// by Unlock, by 3 clients on each of 3 engines, while two engines Observe
// every other election. Each election's term counter is made before the
// run, as an earlier election would have left it: a new election's first
// term waits one lease, longer than the run.
func TestLinear_Election(t *testing.T) {
	testserver.Parallel(t)
	servers(t, func(t *testing.T, s *testserver.Server) {
		r := newLinearRig(t, s, 3)
		r.names = electionNames
		obs := &observers{seen: map[string][][]Leader{}}
		var cancel context.CancelFunc
		obs.ctx, cancel = context.WithCancel(context.Background())
		var counted sync.Map // name -> *sync.Once: its term counter made, its observers started
		r.run(3, linearTarget(), func(c *linearClient) { electionCycle(c, &counted, obs) })
		cancel()
		obs.wg.Wait()
		r.check("election", linear.Election())
		obs.check(t, r.rec.Operations())
	})
}

// observers are what each Observe of the run delivered, by election.
type observers struct {
	ctx  context.Context
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen map[string][][]Leader
}

// observe starts an observer of name on e.
func (o *observers) observe(e *Engine, name string) {
	ch := e.Election(name, ElectionOptions{}).Observe(o.ctx)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var got []Leader
		for l := range ch {
			got = append(got, l)
		}
		o.mu.Lock()
		o.seen[name] = append(o.seen[name], got)
		o.mu.Unlock()
	}()
}

// check holds each observer's sequence against the history: every leader
// delivered is one a campaign won, with that campaign's term (any term for
// a campaign that got no answer, whose term nobody saw), and an observer
// never delivers an older term after a newer one.
func (o *observers) check(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	terms := map[string]int64{} // value -> term; -1: unseen
	for _, op := range ops {
		in, out := op.Input.(linear.ElectionIn), op.Output.(linear.ElectionOut)
		switch {
		case in.Op == linear.Acquire && out.Result == linear.Ok:
			terms[in.Value] = out.Term
		case in.Op == linear.Acquire:
			terms[in.Value] = -1
		}
	}
	observers, delivered, bad := 0, 0, 0
	for name, seqs := range o.seen {
		observers += len(seqs)
		for _, seq := range seqs {
			last := int64(0)
			for _, l := range seq {
				delivered++
				if l == (Leader{}) {
					continue
				}
				term, ok := terms[l.Value]
				if !ok || term != -1 && term != l.Term || l.Term < last {
					bad++
					if bad <= 5 {
						t.Errorf("election %s: an observer delivered %q in term %d after term %d; the campaign of %q won term %d (-1: unseen; 0: none)", name, l.Value, l.Term, last, l.Value, term)
					}
				}
				last = max(last, l.Term)
			}
		}
	}
	t.Logf("%d observers delivered %d states, %d of them wrong", observers, delivered, bad)
	if delivered == 0 {
		t.Error("no observer delivered anything: the check proves nothing")
	}
}

func electionCycle(c *linearClient, counted *sync.Map, obs *observers) {
	name := c.name("e")
	once, _ := counted.LoadOrStore(name, &sync.Once{})
	once.(*sync.Once).Do(func() {
		c.r.s.Must(c.r.t, "SET", c.r.s.NS+"election:{"+name+"}:fence", 1)
		if n, _ := strconv.Atoi(name[1:]); n%2 == 0 { // as many observers as at 4 names a window
			obs.observe(c.e, name)
			obs.observe(c.r.es[(c.id+1)%len(c.r.es)], name)
		}
	})
	el := c.e.Election(name, ElectionOptions{TTL: linearLease})
	read := func() {
		call := c.r.rec.Begin(c.id)
		l, err := el.Leader(context.Background())
		switch {
		case err == nil:
			call.End(linear.ElectionIn{Op: linear.Read, Name: name}, linear.ElectionOut{Result: linear.Ok, Value: l.Value, Term: l.Term})
		case errors.Is(err, ErrNoLeader):
			call.End(linear.ElectionIn{Op: linear.Read, Name: name}, linear.ElectionOut{Result: linear.No})
		}
	}
	if rand.IntN(3) == 0 {
		read()
	}
	value := c.newID()
	ctx, cancel := context.WithTimeout(context.Background(), linearWait)
	call := c.r.rec.Begin(c.id)
	l, err := el.Campaign(ctx, value)
	cancel()
	if oc := classify(err, false); oc != granted {
		g := c.newID()
		recordFailed(call, linear.ElectionIn{Op: linear.Acquire, Name: name, Token: g, Value: value},
			linear.ElectionIn{Op: linear.Abandon, Name: name, Token: g}, linear.ElectionOut{Result: linear.Unknown}, linear.ElectionOut{Result: linear.Ok}, oc == failedLate)
		settle()
		return
	}
	call.End(linear.ElectionIn{Op: linear.Acquire, Name: name, Token: l.Token(), Value: value}, linear.ElectionOut{Result: linear.Ok, Term: l.Fence()})
	if c.r.guard != nil {
		c.r.guard(name, l.Fence(), l.Token())
	}
	if rand.IntN(2) == 0 {
		read()
	}
	c.pause()
	call = c.r.rec.Begin(c.id)
	res := releaseResult(l.Unlock(context.Background()))
	end(call, linear.ElectionIn{Op: linear.Release, Name: name, Token: l.Token()}, linear.ElectionOut{Result: res}, res)
}

// TestLinear_Restart: the lock, read-write lock, LockAll and semaphore
// workloads on a private redis-server that is killed and started again
// without persistence at a third and at two thirds of the run, each
// restart a model event: every holding is lost, fences go on above (the
// counters start again from the server's clock), a semaphore's limit is
// lost (acquisitions are refused for want of one until a client sets it
// again). Not the election, whose first term after the counter is lost
// waits a lease, longer than the run.
func TestLinear_Restart(t *testing.T) {
	testserver.Parallel(t)
	for _, w := range []struct {
		name  string
		model func() porcupine.Model
		cycle func(*linearClient)
	}{{"lock", linear.Lock, lockCycle}, {"rw", linear.RW, rwCycle}, {"lockall", linear.LockAll, multiCycle}, {"semaphore", linear.Semaphore, nil}} {
		t.Run(w.name, func(t *testing.T) {
			cycle := w.cycle
			if w.name == "semaphore" {
				var limited sync.Map
				cycle = func(c *linearClient) { semCycle(c, &limited) }
			}
			srv := testserver.PrivateRedis(t)
			s := testserver.On(t, "redis-server restarted", srv.Addr())
			r := newLinearRig(t, s, 3)
			if w.name == "rw" {
				r.window = rwWindow
			}
			const clients = 3
			target := linearTarget()
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, at := range []int{target / 3, 2 * target / 3} {
					for r.rec.Len() < at {
						select {
						case <-done:
							return
						case <-time.After(time.Millisecond):
						}
					}
					call := r.rec.Begin(clients * len(r.es)) // a client of its own in the visualization
					srv.Kill()
					if err := srv.Start(); err != nil {
						t.Errorf("restarting: %v", err)
						return
					}
					call.End(linear.LockIn{Op: linear.Restart}, linear.LockOut{Result: linear.Ok})
				}
			}()
			r.run(clients, target, cycle)
			close(done)
			wg.Wait()
			ops := r.rec.Operations()
			for i, op := range ops { // the same event, in the model's types
				if in, ok := op.Input.(linear.LockIn); ok && in.Op == linear.Restart {
					switch w.name {
					case "lockall":
						ops[i].Input, ops[i].Output = linear.MultiIn{Op: linear.Restart}, linear.MultiOut{Result: linear.Ok}
					case "semaphore":
						ops[i].Input, ops[i].Output = linear.SemIn{Op: linear.Restart}, linear.SemOut{Result: linear.Ok}
					}
				}
			}
			// A waiter may be handed it, then lose it in a restart.
			linear.Check(t, "restarts "+w.name, w.model(), linear.AcrossRestarts(ops), linearCheck)
			if w.name == "semaphore" {
				refused := 0
				for _, op := range ops {
					if out, ok := op.Output.(linear.SemOut); ok && out.NoLimit {
						refused++
					}
				}
				t.Logf("%d acquisitions refused for want of a limit (the restarts lost it)", refused)
				if refused == 0 {
					t.Error("no acquisition met a lost limit: the restarts did not bite, the check proves little")
				}
			}
			t.Logf("%d calls without an answer (%d of them open), %d connections cut", linear.Unknowns(ops), r.rec.Opened(), r.proxy.cuts.Load())
		})
	}
}
