package linear

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/anishathalye/porcupine"
)

// Acks is which writes a replica acknowledged before their callers were
// answered, as a model of failovers sees them.
type Acks int8

const (
	// NoneAcked: replication is asynchronous, and a failover may lose any
	// write made since the last Sync.
	NoneAcked Acks = iota
	// GrantsAcked: WithReplicaAck; a failover may lose a write made since
	// the last Sync or acquisition answered Ok (its WAIT saw it on a
	// replica, with every write before it), not one before.
	GrantsAcked
	// AnsweredAcked: a failover may lose only a write whose caller was
	// told nothing (an acquisition that got no answer, an abandon): no
	// grant, release or limit answered Ok comes undone.
	AnsweredAcked
	// AllAcked: a failover loses nothing; the object behaves as if its
	// server had never failed.
	AllAcked
)

func (a Acks) String() string {
	return [...]string{"none acknowledged", "grants acknowledged", "answered writes kept", "nothing lost"}[a]
}

// acked reports whether a replica had in (answered out), and every write
// before it, when its caller was answered.
func (a Acks) acked(in Input, out any) bool {
	switch a {
	case AllAcked:
		return true
	case AnsweredAcked:
		return in.op() != Read && in.op() != Abandon && resultOf(out) == Ok
	case GrantsAcked:
		return (in.op() == Acquire || in.op() == Share) && resultOf(out) == Ok
	}
	return false
}

// LockReplicated, SemaphoreReplicated and ElectionReplicated are the
// models Lock, Semaphore and Election of an object whose primary may fail
// over to a replica (a Failover event in its partition, at most one): the
// replica has the primary's writes up to some instant, so the object
// comes back in a state it was in at that instant, at or after the last
// write a replica acknowledged (acks says which were) or a Sync event
// (the replicas had every write up to it). Holdings, releases, fences and
// terms go back with it: a fence may be handed out again. Record a
// Failover from the kill until the replica serves, and a Sync as a call
// that spans a write the replica then acknowledged; Spread gives each of
// the primary's names its copy.
func LockReplicated(acks Acks) porcupine.Model {
	return replicatedModel(lockState{}, lockStep, describeLock, acks)
}

// SemaphoreReplicated is Semaphore across a failover (LockReplicated).
func SemaphoreReplicated(acks Acks) porcupine.Model {
	return replicatedModel(semState{}, semStep, describeSem, acks)
}

// ElectionReplicated is Election across a failover (LockReplicated).
func ElectionReplicated(acks Acks) porcupine.Model {
	return replicatedModel(electionState{}, electionStep, describeElection, acks)
}

// replicated is a state and the states a failover may bring back: ids
// of interned states, sorted ("" once the failover happened: no other
// follows it).
type replicated[S comparable] struct {
	cur  S
	back string
	over bool
}

// interned numbers states, so that a set of them is a comparable string.
type interned[S comparable] struct {
	mu  sync.Mutex
	ids map[S]int
	all []S
}

func (t *interned[S]) id(s S) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.ids[s]
	if !ok {
		i = len(t.all)
		t.ids[s] = i
		t.all = append(t.all, s)
	}
	return strconv.Itoa(i)
}

func (t *interned[S]) state(id string) S {
	i, _ := strconv.Atoi(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.all[i]
}

func replicatedModel[S comparable, I Input, O any](init S, step func(S, I, O) []S, describe func(I, O) string, acks Acks) porcupine.Model {
	t := &interned[S]{ids: map[S]int{}}
	return nondeterministic(replicated[S]{cur: init, back: t.id(init)}, func(s replicated[S], in I, out O) []replicated[S] {
		switch in.op() {
		case Failover:
			if s.over {
				return []replicated[S]{s}
			}
			var next []replicated[S]
			for _, id := range strings.Fields(s.back) {
				next = append(next, replicated[S]{cur: t.state(id), over: true})
			}
			return next
		case Sync:
			if !s.over {
				s.back = t.id(s.cur)
			}
			return []replicated[S]{s}
		}
		acked := acks.acked(in, out)
		var next []replicated[S]
		for _, n := range step(s.cur, in, out) {
			r := replicated[S]{cur: n, over: s.over}
			switch {
			case s.over:
			case acked:
				r.back = t.id(n)
			default:
				r.back = addID(s.back, t.id(n))
			}
			next = append(next, r)
		}
		return next
	}, describe)
}

// addID adds id to a sorted set of ids.
func addID(set, id string) string {
	if has(set, id) {
		return set
	}
	ws := append(strings.Fields(set), id)
	sort.Strings(ws)
	return strings.Join(ws, " ")
}

func resultOf(out any) Result {
	switch out := out.(type) {
	case LockOut:
		return out.Result
	case SemOut:
		return out.Result
	case LeaseOut:
		return out.Result
	case MultiOut:
		return out.Result
	case ElectionOut:
		return out.Result
	}
	panic(fmt.Sprintf("linear: no result in %T", out))
}

// Spread returns ops with each event of every partition (a Failover or
// Sync recorded with no name) replaced by a copy in each partition of ops
// that mine holds (the names of the primary it happened to); a Sync that
// returned before a partition's first call began is left out of it (it
// would change nothing there).
func Spread(ops []porcupine.Operation, mine func(part string) bool) []porcupine.Operation {
	first := map[string]int64{}
	for _, op := range ops {
		if p := op.Input.(Input).part(); p != "" && mine(p) {
			if f, ok := first[p]; !ok || op.Call < f {
				first[p] = op.Call
			}
		}
	}
	parts := first
	names := make([]string, 0, len(parts))
	for p := range parts {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []porcupine.Operation
	for _, op := range ops {
		in := op.Input.(Input)
		if in.part() != "" || in.op() != Failover && in.op() != Sync {
			out = append(out, op)
			continue
		}
		for _, n := range names {
			if in.op() == Sync && op.Return < first[n] {
				continue
			}
			c := op
			switch in := in.(type) {
			case LockIn:
				in.Name = n
				c.Input = in
			case SemIn:
				in.Name = n
				c.Input = in
			case MultiIn:
				in.Group = n
				c.Input = in
			case ElectionIn:
				in.Name = n
				c.Input = in
			}
			out = append(out, c)
		}
	}
	return out
}

// ReopenAbandoned returns ops with each acquisition that got no answer
// left open (its return after every other event) when its abandon,
// answered Ok, may have been lost in a failover of its partition: it
// began before the failover did (record the Failover from the moment the
// primary is dead) and had not returned when the partition's last Sync
// before the failover began. The abandon (the waiter leaving the queue)
// is lost as any write no replica had: the queue entry comes back, and
// the object may be handed to the waiter that gave up, at any time after.
func ReopenAbandoned(ops []porcupine.Operation) []porcupine.Operation {
	failedOver := map[string]int64{} // partition -> its failover's call
	end := int64(0)
	for _, op := range ops {
		end = max(end, op.Return)
		if in := op.Input.(Input); in.op() == Failover {
			failedOver[in.part()] = op.Call
		}
	}
	synced := map[string]int64{} // partition -> its last Sync's call before the failover
	for _, op := range ops {
		in := op.Input.(Input)
		if f, ok := failedOver[in.part()]; ok && in.op() == Sync && op.Return < f {
			synced[in.part()] = max(synced[in.part()], op.Call)
		}
	}
	type key struct{ part, token string }
	lost := map[key]bool{}
	for _, op := range ops {
		in := op.Input.(Input)
		if f, ok := failedOver[in.part()]; ok && in.op() == Abandon && resultOf(op.Output) == Ok && op.Call < f && op.Return > synced[in.part()] {
			lost[key{in.part(), tokenOf(in)}] = true
		}
	}
	out := append([]porcupine.Operation(nil), ops...)
	for i, op := range out {
		in := op.Input.(Input)
		if (in.op() == Acquire || in.op() == Share) && resultOf(op.Output) == Unknown && lost[key{in.part(), tokenOf(in)}] {
			out[i].Return = end + 1
		}
	}
	return out
}

func tokenOf(in Input) string {
	switch in := in.(type) {
	case LockIn:
		return in.Token
	case SemIn:
		return in.Token
	case MultiIn:
		return in.Token
	case ElectionIn:
		return in.Token
	}
	return ""
}
