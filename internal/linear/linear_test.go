package linear

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// history builds a history by hand: each call one tick after the last,
// each returning one tick after it began unless open.
type history struct {
	ops  []porcupine.Operation
	tick int64
}

// seq adds a call that returns before the next begins.
func (h *history) seq(client int, in Input, out any) *history {
	h.tick += 2
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: h.tick, Output: out, Return: h.tick + 1})
	return h
}

// open adds a call that begins now and returns after everything.
func (h *history) open(client int, in Input, out any) *history {
	h.tick += 2
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: h.tick, Output: out, Return: 1 << 40})
	return h
}

func verdict(t *testing.T, m porcupine.Model, h *history) porcupine.CheckResult {
	t.Helper()
	res, _ := Verdict(m, h.ops, 10*time.Second)
	return res
}

// expect fails t unless the good history is Ok and the bad one Illegal.
func expect(t *testing.T, m porcupine.Model, good, bad *history) {
	t.Helper()
	if res := verdict(t, m, good); res != porcupine.Ok {
		t.Errorf("the good history: %s, want Ok", res)
	}
	if res := verdict(t, m, bad); res != porcupine.Illegal {
		t.Errorf("the planted bug: %s, want Illegal", res)
	}
}

func lk(op Op, tok string) LockIn { return LockIn{Op: op, Name: "x", Token: tok} }

// A release that ignores the token frees another's lock: the next grant
// then meets the first holder.
func TestChecker_LockReleaseIgnoringTheToken(t *testing.T) {
	build := func(stale Result) *history {
		return new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
			seq(1, lk(Release, "B"), LockOut{Result: stale}).
			seq(2, lk(Acquire, "C"), LockOut{Result: No}).
			seq(0, lk(Release, "A"), LockOut{Result: Ok})
	}
	expect(t, Lock(), build(No), build(Ok))
	// The lock freed behind its holder's back lets another in.
	bad := new(history).
		seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
		seq(2, lk(Acquire, "C"), LockOut{Result: Ok, Fence: 2})
	if res := verdict(t, Lock(), bad); res != porcupine.Illegal {
		t.Errorf("two holders: %s, want Illegal", res)
	}
}

// Fences grow with every grant, and a read sees the holder.
func TestChecker_LockFencesAndReads(t *testing.T) {
	build := func(second int64, read bool) *history {
		return new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 7}).
			seq(0, lk(Release, "A"), LockOut{Result: Ok}).
			seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: read}).
			seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: second})
	}
	expect(t, Lock(), build(8, false), build(7, false))
	if res := verdict(t, Lock(), build(8, true)); res != porcupine.Illegal {
		t.Errorf("a read of a held lock with nobody holding: %s, want Illegal", res)
	}
}

// An acquisition without an answer may have taken the lock: a refusal
// after it is legal, until its abandon lands; a later grant's fence is
// above the unseen one.
func TestChecker_LockUnknownAcquisition(t *testing.T) {
	good := new(history).
		open(0, lk(Acquire, "g1"), LockOut{Result: Unknown}).
		seq(1, lk(Acquire, "B"), LockOut{Result: No}).
		seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: true}).
		open(0, lk(Abandon, "g1"), LockOut{Result: Unknown}).
		seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: 2})
	bad := new(history).
		seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
		seq(0, lk(Release, "A"), LockOut{Result: Ok}).
		seq(0, lk(Acquire, "g1"), LockOut{Result: Unknown}).
		seq(1, lk(Acquire, "B"), LockOut{Result: No}). // so g1 took fence 2 at least
		seq(0, lk(Abandon, "g1"), LockOut{Result: Ok}).
		seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: 2})
	expect(t, Lock(), good, bad)
}

// A restart loses every holding; fences go on above.
func TestChecker_LockRestart(t *testing.T) {
	build := func(fence int64) *history {
		return new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 3}).
			seq(9, LockIn{Op: Restart}, LockOut{Result: Ok}).
			seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: fence}).
			seq(0, lk(Release, "A"), LockOut{Result: No})
	}
	expect(t, Lock(), build(1e6), build(1))
}

// A restart loses a semaphore's permits and its limit: an acquisition is
// refused for want of one until a limit is set again, and one admitted
// with no limit stored is a bug.
func TestChecker_SemaphoreRestart(t *testing.T) {
	build := func(setAgain bool) *history {
		h := new(history).
			seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 2}, SemOut{Result: Ok}).
			seq(0, sem(Acquire, "A", 2), SemOut{Result: Ok, Fence: 5}).
			seq(8, SemIn{Op: Restart}, SemOut{Result: Ok}).
			seq(1, sem(Acquire, "", 1), SemOut{Result: No, NoLimit: true})
		if setAgain {
			h.seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 2}, SemOut{Result: Ok})
		}
		return h.seq(1, sem(Acquire, "B", 2), SemOut{Result: Ok, Fence: 1e6}).
			seq(0, sem(Release, "A", 0), SemOut{Result: No})
	}
	expect(t, Semaphore(), build(true), build(false))
	// Refused for want of a limit while one is stored: a bug too.
	stored := new(history).
		seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 2}, SemOut{Result: Ok}).
		seq(1, sem(Acquire, "", 1), SemOut{Result: No, NoLimit: true})
	if res := verdict(t, Semaphore(), stored); res != porcupine.Illegal {
		t.Errorf("a refusal for want of a stored limit: %s, want Illegal", res)
	}
}

func TestChecker_RWWriterBesideReaders(t *testing.T) {
	build := func(w Result) *history {
		return new(history).
			seq(0, lk(Share, "R1"), LockOut{Result: Ok, Fence: 1}).
			seq(1, lk(Share, "R2"), LockOut{Result: Ok, Fence: 2}).
			seq(2, lk(Acquire, "W"), LockOut{Result: w, Fence: 3}).
			seq(0, lk(Release, "R1"), LockOut{Result: Ok}).
			seq(1, lk(Release, "R2"), LockOut{Result: Ok}).
			seq(3, lk(Share, "R3"), LockOut{Result: Ok, Fence: 4})
	}
	expect(t, RW(), build(No), build(Ok))
}

func sem(op Op, tok string, weight int) SemIn {
	return SemIn{Op: op, Name: "s", Token: tok, Weight: weight}
}

// An admission past the limit; a raised limit admits it.
func TestChecker_SemaphoreAdmissionPastTheLimit(t *testing.T) {
	build := func(limit int) *history {
		return new(history).
			seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 3}, SemOut{Result: Ok}).
			seq(0, sem(Acquire, "A", 2), SemOut{Result: Ok, Fence: 1}).
			seq(9, SemIn{Op: SetLimit, Name: "s", Limit: limit}, SemOut{Result: Ok}).
			seq(1, sem(Acquire, "B", 2), SemOut{Result: Ok, Fence: 2}).
			seq(2, sem(Read, "", 0), SemOut{Result: Ok, Holders: 2}).
			seq(1, sem(Release, "B", 0), SemOut{Result: Ok}).
			seq(0, sem(Release, "A", 0), SemOut{Result: Ok}).
			seq(2, sem(Acquire, "C", 1), SemOut{Result: Ok, Fence: 3})
	}
	expect(t, Semaphore(), build(4), build(3))
	// Lowered under its holders, it takes none back and admits none.
	lowered := new(history).
		seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 3}, SemOut{Result: Ok}).
		seq(0, sem(Acquire, "A", 2), SemOut{Result: Ok, Fence: 1}).
		seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 1}, SemOut{Result: Ok}).
		seq(1, sem(Acquire, "B", 1), SemOut{Result: Ok, Fence: 2})
	if res := verdict(t, Semaphore(), lowered); res != porcupine.Illegal {
		t.Errorf("an admission under a lowered limit: %s, want Illegal", res)
	}
}

func multi(op Op, names uint8, tok string) MultiIn {
	return MultiIn{Op: op, Group: "g", Names: names, Token: tok}
}

// A LockAll that keeps one name after failing: the name reads as held
// with nobody holding it.
func TestChecker_LockAllKeepsANameAfterFailing(t *testing.T) {
	build := func(kept bool) *history {
		return new(history).
			seq(0, multi(Acquire, 0b001, "A"), MultiOut{Result: Ok, Fences: [GroupSize]int64{1}}).
			seq(1, multi(Acquire, 0b011, "B"), MultiOut{Result: No}).
			seq(0, multi(Release, 0b001, "A"), MultiOut{Result: Ok}).
			seq(2, multi(Read, 0b010, ""), MultiOut{Result: Ok, Locked: kept}).
			seq(2, multi(Acquire, 0b111, "C"), MultiOut{Result: Ok, Fences: [GroupSize]int64{2, 1, 1}})
	}
	expect(t, LockAll(), build(false), build(true))
	// Nor may a multi-name grant skip a held name.
	bad := new(history).
		seq(0, multi(Acquire, 0b010, "A"), MultiOut{Result: Ok, Fences: [GroupSize]int64{0, 1}}).
		seq(1, multi(Acquire, 0b011, "B"), MultiOut{Result: Ok, Fences: [GroupSize]int64{1, 2}})
	if res := verdict(t, LockAll(), bad); res != porcupine.Illegal {
		t.Errorf("a LockAll over a held name: %s, want Illegal", res)
	}
}

func el(op Op, tok, value string) ElectionIn {
	return ElectionIn{Op: op, Name: "e", Token: tok, Value: value}
}

// A second leader in one term, and a second leader while the first leads.
func TestChecker_ElectionSecondLeaderInOneTerm(t *testing.T) {
	build := func(term int64) *history {
		return new(history).
			seq(0, el(Acquire, "A", "a"), ElectionOut{Result: Ok, Term: 5}).
			seq(2, el(Read, "", ""), ElectionOut{Result: Ok, Value: "a", Term: 5}).
			seq(0, el(Release, "A", ""), ElectionOut{Result: Ok}).
			seq(2, el(Read, "", ""), ElectionOut{Result: No}).
			seq(1, el(Acquire, "B", "b"), ElectionOut{Result: Ok, Term: term})
	}
	expect(t, Election(), build(6), build(5))
	bad := new(history).
		seq(0, el(Acquire, "A", "a"), ElectionOut{Result: Ok, Term: 5}).
		seq(1, el(Acquire, "B", "b"), ElectionOut{Result: Ok, Term: 6})
	if res := verdict(t, Election(), bad); res != porcupine.Illegal {
		t.Errorf("two leaders at once: %s, want Illegal", res)
	}
}

// A failing check writes porcupine's visualization, and names the failing
// partition.
func TestChecker_FailureIsShown(t *testing.T) {
	bad := new(history).
		seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
		seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: 2})
	rec := &recording{TB: t}
	Check(rec, "planted", Lock(), bad.ops, 10*time.Second)
	if !rec.failed {
		t.Fatal("Check passed an illegal history")
	}
	logs := strings.Join(rec.logs, "\n")
	_, path, ok := strings.Cut(logs, "porcupine's visualization: ")
	path, _, _ = strings.Cut(path, "\n")
	if !ok {
		t.Fatalf("no visualization path in:\n%s", logs)
	}
	defer os.Remove(path)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("visualization %s: %v", path, err)
	}
	if !strings.Contains(logs, "x acquire B -> ok fence 2") {
		t.Errorf("the failing partition is not shown:\n%s", logs)
	}
}

// recording is a testing.TB that keeps what a check says instead of
// failing the test.
type recording struct {
	testing.TB
	failed bool
	logs   []string
}

func (r *recording) Helper() {}
func (r *recording) Errorf(format string, args ...any) {
	r.failed = true
	r.Logf(format, args...)
}
func (r *recording) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

// A waiting reader granted by an attempt whose reply was lost holds from
// that grant on, and its next attempt takes the hold up with a new fence,
// above those of readers granted meanwhile: a writer refused meanwhile is
// refused by it. Recorded with the Unknown acquisition of its token, the
// history is Ok; without it, Illegal.
func TestChecker_RWGrantRefencedAfterALostReply(t *testing.T) {
	at := func(client int, call, ret int64, in Input, out any) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	ops := []porcupine.Operation{
		at(0, 0, 1, lk(Acquire, "W1"), LockOut{Result: Ok, Fence: 1}),
		at(0, 2, 3, lk(Release, "W1"), LockOut{Result: Ok}),
		at(1, 4, 20, lk(Share, "R2"), LockOut{Result: Ok, Fence: 5}), // its first grant, fence 2, never arrived
		at(2, 6, 7, lk(Acquire, "W3"), LockOut{Result: No}),
		at(3, 8, 9, lk(Share, "R4"), LockOut{Result: Ok, Fence: 3}),
		at(3, 10, 11, lk(Share, "R5"), LockOut{Result: Ok, Fence: 4}),
	}
	if res, _ := Verdict(RW(), ops, 10*time.Second); res != porcupine.Illegal {
		t.Errorf("without the Unknown acquisition: %s, want Illegal", res)
	}
	ops = append(ops, at(1, 4, 20, lk(Share, "R2"), LockOut{Result: Unknown}))
	if res, _ := Verdict(RW(), ops, 10*time.Second); res != porcupine.Ok {
		t.Errorf("with it: %s, want Ok", res)
	}
}

// A handoff that skips the head of the queue, and a call that jumps it,
// break FIFO; grants in the order the waiters were queued, and a call that
// began before the waiter was queued, do not.
func TestChecker_FIFOHandoffPastTheHead(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	good := []Grant{
		{Name: "x", Token: "H", Fence: 1, Began: at(0)},
		{Name: "x", Token: "A", Fence: 2, Began: at(1), Joined: at(2)},
		{Name: "x", Token: "B", Fence: 3, Began: at(3), Joined: at(4)},
		{Name: "y", Token: "C", Fence: 1, Began: at(1)}, // began before A2 was queued: may have come first
		{Name: "y", Token: "A2", Fence: 2, Began: at(0), Joined: at(2)},
	}
	if got := FIFO(good); len(got) != 0 {
		t.Errorf("grants in order: %q", got)
	}
	skipped := append(good[:0:0], good[:3]...)
	skipped[1].Fence, skipped[2].Fence = 3, 2 // B handed it before A, queued ahead
	if got := FIFO(skipped); len(got) != 1 || !strings.Contains(got[0], "B began 1ms after A") {
		t.Errorf("a handoff past the head: %q", got)
	}
	jumped := append(good[:0:0], good[:2]...)
	jumped = append(jumped, Grant{Name: "x", Token: "T", Fence: 2, Began: at(5)}) // a TryLock after A queued
	jumped[1].Fence = 3
	if got := FIFO(jumped); len(got) != 1 || !strings.Contains(got[0], "T began 3ms after A") {
		t.Errorf("a call that jumped the queue: %q", got)
	}
}

// The server's order between waiters: a waiter granted before one the
// server numbered earlier breaks FIFO, even when the clients' clocks cannot
// tell (its call began before the other was told it was queued); grants in
// the numbers' order, across a queue that emptied between them, do not.
func TestChecker_FIFOByServerOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	good := []Grant{
		{Name: "x", Token: "A", Fence: 2, Began: at(0), Joined: at(3), Arrival: 1000000},
		{Name: "x", Token: "B", Fence: 3, Began: at(1), Joined: at(2), Arrival: 1000001},
		{Name: "x", Token: "C", Fence: 4, Began: at(9), Joined: at(9), Arrival: 1000050}, // the queue emptied before
	}
	if got := FIFO(good); len(got) != 0 {
		t.Errorf("grants in the server's order: %q", got)
	}
	skipped := append(good[:0:0], good...)
	skipped[0].Fence, skipped[1].Fence = 3, 2 // B handed it before A, numbered ahead
	if got := FIFO(skipped); len(got) != 1 || !strings.Contains(got[0], "B arrived after A (the server's numbers 1000001, 1000000)") {
		t.Errorf("a handoff past the head, which the clients' clocks miss: %q", got)
	}
}

// A waiter handed the lock just before a restart loses it there unaware
// and is granted it again after: a one-try call between the handoff and
// the restart is refused by a holder the calls do not show. The grant
// across the restart, with its Unknown twin (AcrossRestarts), explains it;
// without the twin the history is Illegal (CI's run of 2 December 2026,
// TestLinear_Restart/lock on miniredis).
func TestChecker_HandoffLostInARestart(t *testing.T) {
	build := func(second bool) []porcupine.Operation {
		h := new(history).seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 5})
		h.tick += 2
		waiter := porcupine.Operation{ClientId: 1, Input: lk(Acquire, "W"), Call: h.tick, Output: LockOut{Result: Ok, Fence: 1e6}}
		h.seq(0, lk(Release, "A"), LockOut{Result: Ok}) // handed to W
		h.seq(2, lk(Acquire, ""), LockOut{Result: No})
		h.seq(9, LockIn{Op: Restart}, LockOut{Result: Ok})
		h.tick += 2
		waiter.Return = h.tick
		h.ops = append(h.ops, waiter)
		if second { // a second holder while W holds
			h.seq(2, lk(Acquire, "B"), LockOut{Result: Ok, Fence: 2e6})
		}
		h.seq(1, lk(Release, "W"), LockOut{Result: Ok})
		return h.ops
	}
	if res, _ := Verdict(Lock(), build(false), 10*time.Second); res != porcupine.Illegal {
		t.Errorf("without the twin: %s, want Illegal", res)
	}
	if res, _ := Verdict(Lock(), AcrossRestarts(build(false)), 10*time.Second); res != porcupine.Ok {
		t.Errorf("with the grant's Unknown twin: %s, want Ok", res)
	}
	if res, _ := Verdict(Lock(), AcrossRestarts(build(true)), 10*time.Second); res != porcupine.Illegal {
		t.Errorf("a grant while W holds, with the twin: %s, want Illegal", res)
	}
}

// The same for a semaphore's waiter whose call, spanning the restart, ends
// refused for want of a limit: it held the permits it was handed before
// the restart, and a one-try call was refused then.
func TestChecker_SemaphoreHandoffLostInARestart(t *testing.T) {
	h := new(history).
		seq(9, SemIn{Op: SetLimit, Name: "s", Limit: 2}, SemOut{Result: Ok}).
		seq(0, sem(Acquire, "A", 2), SemOut{Result: Ok, Fence: 5})
	h.tick += 2
	waiter := porcupine.Operation{ClientId: 1, Input: sem(Acquire, "", 2), Call: h.tick, Output: SemOut{Result: No, NoLimit: true}}
	h.seq(0, sem(Release, "A", 0), SemOut{Result: Ok}) // handed to the waiter
	h.seq(2, sem(Acquire, "", 2), SemOut{Result: No})
	h.seq(8, SemIn{Op: Restart}, SemOut{Result: Ok})
	h.tick += 2
	waiter.Return = h.tick
	h.ops = append(h.ops, waiter)
	if res, _ := Verdict(Semaphore(), h.ops, 10*time.Second); res != porcupine.Illegal {
		t.Errorf("without the twin: %s, want Illegal", res)
	}
	if res, _ := Verdict(Semaphore(), AcrossRestarts(h.ops), 10*time.Second); res != porcupine.Ok {
		t.Errorf("with the refused call's Unknown twin: %s, want Ok", res)
	}
}

func ls(op Op, tok string, ttl int64) LeaseIn {
	return LeaseIn{Op: op, Name: "x", Token: tok, TTL: ttl}
}

// A lease runs out by the server's clock: another may take the lock once it
// ended, and the holder's release or extension is refused then; before
// it ended, neither. Planted: a lease honoured after its end (a release
// answered Ok 100 ms after it), a lock granted while the lease runs, an
// extension that did not move the end, each Illegal.
func TestChecker_LeaseRunsOutByTheServersClock(t *testing.T) {
	const slack = 5
	good := new(history).
		seq(0, ls(Acquire, "A", 100), LeaseOut{Result: Ok, Fence: 1, At: 1000}).
		seq(1, ls(Acquire, "B", 100), LeaseOut{Result: No, At: 1050}).
		seq(0, ls(Extend, "A", 100), LeaseOut{Result: Ok, At: 1090}).
		seq(1, ls(Acquire, "B", 100), LeaseOut{Result: No, At: 1150}). // the extension holds it
		seq(1, ls(Acquire, "B", 100), LeaseOut{Result: Ok, Fence: 2, At: 1200}).
		seq(0, ls(Release, "A", 0), LeaseOut{Result: No, At: 1210}).
		seq(1, ls(Release, "B", 0), LeaseOut{Result: Ok, At: 1250})
	if res := verdict(t, Lease(slack), good); res != porcupine.Ok {
		t.Errorf("leases kept and run out: %s, want Ok", res)
	}
	for _, c := range []struct {
		what string
		bad  *history
	}{
		{"a release answered Ok after the lease ended", new(history).
			seq(0, ls(Acquire, "A", 100), LeaseOut{Result: Ok, Fence: 1, At: 1000}).
			seq(0, ls(Release, "A", 0), LeaseOut{Result: Ok, At: 1200})},
		{"a grant while the lease runs", new(history).
			seq(0, ls(Acquire, "A", 100), LeaseOut{Result: Ok, Fence: 1, At: 1000}).
			seq(1, ls(Acquire, "B", 100), LeaseOut{Result: Ok, Fence: 2, At: 1080})},
		{"a refusal after the lease ended", new(history).
			seq(0, ls(Acquire, "A", 100), LeaseOut{Result: Ok, Fence: 1, At: 1000}).
			seq(1, ls(Acquire, "B", 100), LeaseOut{Result: No, At: 1120})},
		{"an extension that did not move the end", new(history).
			seq(0, ls(Acquire, "A", 100), LeaseOut{Result: Ok, Fence: 1, At: 1000}).
			seq(0, ls(Extend, "A", 100), LeaseOut{Result: Ok, At: 1090}).
			seq(1, ls(Acquire, "B", 100), LeaseOut{Result: Ok, Fence: 2, At: 1150})},
	} {
		if res := verdict(t, Lease(slack), c.bad); res != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal", c.what, res)
		}
	}
	// Within the slack of the end, either answer is right; an answer nobody
	// saw leaves the end unknown.
	edge := new(history).
		seq(0, ls(Acquire, "A", 100), LeaseOut{Result: Ok, Fence: 1, At: 1000}).
		seq(1, ls(Acquire, "B", 100), LeaseOut{Result: No, At: 1103}).
		seq(0, ls(Extend, "A", 100), LeaseOut{Result: Unknown}).
		seq(1, ls(Acquire, "B", 100), LeaseOut{Result: Ok, Fence: 2, At: 1150})
	if res := verdict(t, Lease(slack), edge); res != porcupine.Ok {
		t.Errorf("within the slack, and after an extension with no answer: %s, want Ok", res)
	}
}
