package linear

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Op is what a call does.
type Op int8

const (
	Acquire  Op = iota // TryLock, Lock, WLock, a semaphore's acquire, TryLockAll, Campaign
	Share              // RLock, TryRLock
	Release            // Unlock, Release (an election's resign)
	Abandon            // the library's abandon of an acquisition that failed
	Read               // IsLocked, SemaphoreHolders, Leader
	SetLimit           // SetSemaphoreLimit
	Restart            // the server restarted without persistence: every holding is lost
	Failover           // a replica took over from its killed primary (Replicated)
	Sync               // the replicas had every write up to now (Replicated)
	Extend             // Extend: a new lease for a holding
)

var opNames = [...]string{"acquire", "share", "release", "abandon", "read", "setlimit", "restart", "failover", "sync", "extend"}

func (o Op) String() string { return opNames[o] }

// The models' states are comparable values (sets as sorted strings), so
// that porcupine compares and caches them with ==.

// LockIn is a call to an exclusive lock, or a read-write lock (Share: a
// reader). Token is the holding's token; an acquisition that failed has an
// id of its own there, which its Abandon names.
type LockIn struct {
	Op          Op
	Name, Token string
}

func (in LockIn) part() string { return in.Name }
func (in LockIn) op() Op       { return in.Op }

// LockOut is a lock call's answer: Fence for a grant, Locked for a read.
type LockOut struct {
	Result Result
	Fence  int64
	Locked bool
}

type lockState struct {
	holder string // "" when free
	// fence is the last fence granted, or, after a grant whose fence
	// nobody saw (an Unknown acquisition), a lower bound of it: the
	// next grant's must be above.
	fence int64
}

// Lock is the model of an exclusive lock with fences: at most one holder,
// each grant's fence above every earlier one's, a refusal only while it is
// held, a release by the holder's token only, and a read that says whether
// it is held. Leases do not run out in the model: the workloads' last
// longer than the run.
func Lock() porcupine.Model {
	return nondeterministic(lockState{}, lockStep, describeLock)
}

func lockStep(s lockState, in LockIn, out LockOut) []lockState {
	free := s.holder == ""
	switch in.Op {
	case Acquire:
		return grant(s, free, out.Result, out.Fence, func(fence int64) lockState { return lockState{in.Token, fence} })
	case Release, Abandon:
		return release(s, s.holder == in.Token, in.Op, out.Result, lockState{"", s.fence})
	case Read:
		if out.Result == Ok && out.Locked == !free {
			return []lockState{s}
		}
		return nil
	case Restart:
		return []lockState{{"", s.fence}} // fences go on above
	}
	return nil
}

// grant is the states an acquisition (res) may leave s in: taken with
// fence f (took builds that state) when it was free to take (fits) and f is
// above the last; s unchanged when refused while it did not fit; either if
// Unknown, the fence then unseen: one above the last at least.
func grant[S any](s S, fits bool, res Result, f int64, took func(fence int64) S) []S {
	last := fenceOf(s)
	switch res {
	case Ok:
		if fits && f > last {
			return []S{took(f)}
		}
		return nil
	case No:
		if !fits {
			return []S{s}
		}
		return nil
	}
	if fits {
		return []S{s, took(last + 1)}
	}
	return []S{s}
}

// release is the states a release or abandon (op, res) may leave s in:
// freed (what freed is) if mine. A release answered Ok freed it and so was
// the holder's; No says it was not. An abandon frees whatever the
// acquisition took, and Ok says only that it ran.
func release[S any](s S, mine bool, op Op, res Result, freed S) []S {
	switch {
	case res == Unknown && mine:
		return []S{s, freed}
	case res == Unknown:
		return []S{s}
	case mine && (res == Ok || op == Abandon):
		return []S{freed}
	case !mine && (res == No || op == Abandon):
		return []S{s}
	}
	return nil
}

func fenceOf(s any) int64 {
	switch s := s.(type) {
	case lockState:
		return s.fence
	case leaseState:
		return s.fence
	case rwState:
		return s.fence
	case semState:
		return s.fence
	case electionState:
		return s.term
	}
	panic(fmt.Sprintf("linear: no fence in %T", s))
}

func describeLock(in LockIn, out LockOut) string {
	switch {
	case in.Op == Restart:
		return "restart"
	case in.Op == Read:
		return fmt.Sprintf("%s read -> %s locked=%v", in.Name, out.Result, out.Locked)
	case out.Result == Ok && (in.Op == Acquire || in.Op == Share):
		return fmt.Sprintf("%s %s %s -> ok fence %d", in.Name, in.Op, in.Token, out.Fence)
	}
	return fmt.Sprintf("%s %s %s -> %s", in.Name, in.Op, in.Token, out.Result)
}

// rwState's readers is a sorted, space-separated set of tokens.
type rwState struct {
	writer, readers string
	fence           int64
}

// RW is the model of a read-write lock: one writer or many readers, fences
// above every earlier grant's across both, a refusal only while someone
// holds it (a reader may be refused by readers when a writer waits, and
// the model does not see the queue), release by token. A waiting call
// whose attempt was granted but whose reply was lost takes the hold up in
// its next attempt with a new fence (rw_acquire.lua): record such a call
// as an Unknown acquisition of its token too, and its grant then moves
// the fence of a hold it had already.
func RW() porcupine.Model {
	return nondeterministic(rwState{}, rwStep, describeLock)
}

func rwStep(s rwState, in LockIn, out LockOut) []rwState {
	mine := s.writer == in.Token || has(s.readers, in.Token)
	if (in.Op == Acquire || in.Op == Share) && out.Result == Ok && mine {
		// A grant whose reply was lost, taken up by the call's next
		// attempt with a new fence (the first never arrived).
		if out.Fence > s.fence {
			s.fence = out.Fence
			return []rwState{s}
		}
		return nil
	}
	switch in.Op {
	case Acquire:
		free := s.writer == "" && s.readers == ""
		return grant(s, free, out.Result, out.Fence, func(f int64) rwState { return rwState{in.Token, "", f} })
	case Share:
		fits := s.writer == ""
		if out.Result == No {
			fits = s.writer == "" && s.readers == "" // refused only while someone held it
		}
		return grant(s, fits, out.Result, out.Fence, func(f int64) rwState { return rwState{"", addTo(s.readers, in.Token), f} })
	case Release, Abandon:
		mine, freed := s.writer == in.Token, rwState{"", s.readers, s.fence}
		if !mine && has(s.readers, in.Token) {
			mine, freed = true, rwState{s.writer, removeFrom(s.readers, in.Token), s.fence}
		}
		return release(s, mine, in.Op, out.Result, freed)
	case Restart:
		return []rwState{{"", "", s.fence}}
	}
	return nil
}

// SemIn is a call to a weighted semaphore: an acquisition of Weight, a
// release, a read of how many permits are held, or SetLimit to Limit.
type SemIn struct {
	Op          Op
	Name, Token string
	Weight      int
	Limit       int
}

func (in SemIn) part() string { return in.Name }
func (in SemIn) op() Op       { return in.Op }

// SemOut is a semaphore call's answer: Fence for a grant, Holders for a
// read; NoLimit for an acquisition refused because no limit is stored (as
// after a restart, which loses it).
type SemOut struct {
	Result  Result
	Fence   int64
	Holders int
	NoLimit bool
}

// semState's holders is a sorted, space-separated set of "token:weight".
type semState struct {
	limit, used int
	holders     string
	fence       int64
}

// Semaphore is the model of a weighted semaphore: grants only while the
// weights held and the new one fit the limit in force (SetLimit changes it
// at once, taking back nothing), fences above every earlier grant's, a
// refusal only while some permit is held (an empty semaphore admits any
// weight that fits its limit; with holders, a queued waiter may make it
// refuse one that fits), release by token, a read that counts the permits.
// Its limit is set by a SetLimit before any acquisition, and again after a
// restart, which loses it with the permits (an acquisition is then
// refused, NoLimit, until one is set).
func Semaphore() porcupine.Model {
	return nondeterministic(semState{}, semStep, describeSem)
}

func semStep(s semState, in SemIn, out SemOut) []semState {
	switch in.Op {
	case SetLimit:
		set := s
		set.limit = in.Limit
		if out.Result == Unknown {
			return []semState{s, set}
		}
		return []semState{set}
	case Acquire:
		if out.NoLimit { // the server's refusal: no limit stored
			if out.Result == No && s.limit == 0 {
				return []semState{s}
			}
			return nil
		}
		fits := s.limit > 0 && s.used+in.Weight <= s.limit
		if out.Result == No {
			fits = s.used == 0
		}
		return grant(s, fits, out.Result, out.Fence, func(f int64) semState {
			return semState{s.limit, s.used + in.Weight, addTo(s.holders, in.Token+":"+strconv.Itoa(in.Weight)), f}
		})
	case Release, Abandon:
		for _, h := range strings.Fields(s.holders) {
			if tok, w, _ := strings.Cut(h, ":"); tok == in.Token {
				n, _ := strconv.Atoi(w)
				return release(s, true, in.Op, out.Result, semState{s.limit, s.used - n, removeFrom(s.holders, h), s.fence})
			}
		}
		return release(s, false, in.Op, out.Result, s)
	case Read:
		if out.Result == Ok && out.Holders == len(strings.Fields(s.holders)) {
			return []semState{s}
		}
		return nil
	case Restart: // the limit and the permits lost, fences going on above
		return []semState{{fence: s.fence}}
	}
	return nil
}

func describeSem(in SemIn, out SemOut) string {
	switch {
	case in.Op == SetLimit:
		return fmt.Sprintf("%s setlimit %d -> %s", in.Name, in.Limit, out.Result)
	case in.Op == Read:
		return fmt.Sprintf("%s read -> %s holders=%d", in.Name, out.Result, out.Holders)
	case in.Op == Acquire && out.Result == Ok:
		return fmt.Sprintf("%s acquire %s weight %d -> ok fence %d", in.Name, in.Token, in.Weight, out.Fence)
	case in.Op == Acquire && out.NoLimit:
		return fmt.Sprintf("%s acquire weight %d -> no limit stored", in.Name, in.Weight)
	case in.Op == Acquire:
		return fmt.Sprintf("%s acquire %s weight %d -> %s", in.Name, in.Token, in.Weight, out.Result)
	}
	return fmt.Sprintf("%s %s %s -> %s", in.Name, in.Op, in.Token, out.Result)
}

// GroupSize is how many names a LockAll group has.
const GroupSize = 3

// MultiIn is a call to some of a group's locks: Names is a bit set of the
// group's names (TryLock of one, TryLockAll of several, their Unlock, an
// IsLocked of one). A TryLockAll's holdings share one Token in the model.
type MultiIn struct {
	Op    Op
	Group string
	Names uint8
	Token string
}

func (in MultiIn) part() string { return in.Group }
func (in MultiIn) op() Op       { return in.Op }

// MultiOut is the answer: each name's fence for a grant, Locked for a read.
type MultiOut struct {
	Result Result
	Fences [GroupSize]int64
	Locked bool
}

type multiState struct {
	holders [GroupSize]string
	fences  [GroupSize]int64 // as lockState's fence
}

// LockAll is the model of a group of locks taken one at a time or
// several at once, all or none: each name as Lock's, a multi-name grant
// taking every name at one instant, a refusal only while one of the names
// is held (the workload queues no waiter on them), a release of several
// names freeing those the token held (MultiLock.Unlock releases each name
// on its own: record it as a release a name).
func LockAll() porcupine.Model {
	return nondeterministic(multiState{}, multiStep, describeMulti)
}

func multiStep(s multiState, in MultiIn, out MultiOut) []multiState {
	names := func(f func(i int)) {
		for i := 0; i < GroupSize; i++ {
			if in.Names&(1<<i) != 0 {
				f(i)
			}
		}
	}
	switch in.Op {
	case Acquire:
		free, above := true, true
		names(func(i int) {
			free = free && s.holders[i] == ""
			above = above && out.Fences[i] > s.fences[i]
		})
		take := func(fences *[GroupSize]int64) multiState {
			t := s
			names(func(i int) { t.holders[i], t.fences[i] = in.Token, fences[i] })
			return t
		}
		switch out.Result {
		case Ok:
			if free && above {
				return []multiState{take(&out.Fences)}
			}
			return nil
		case No:
			if !free {
				return []multiState{s}
			}
			return nil
		}
		if !free {
			return []multiState{s}
		}
		var next [GroupSize]int64
		names(func(i int) { next[i] = s.fences[i] + 1 })
		return []multiState{s, take(&next)}
	case Release, Abandon:
		var mine uint8
		names(func(i int) {
			if s.holders[i] == in.Token {
				mine |= 1 << i
			}
		})
		all := in.Names == mine
		freed := func(set uint8) multiState {
			f := s
			for i := 0; i < GroupSize; i++ {
				if set&(1<<i) != 0 {
					f.holders[i] = ""
				}
			}
			return f
		}
		switch {
		case out.Result == Unknown:
			// the release of each name may have landed or not
			var states []multiState
			for sub := mine; ; sub = (sub - 1) & mine {
				states = append(states, freed(sub))
				if sub == 0 {
					return states
				}
			}
		case in.Op == Abandon:
			return []multiState{freed(mine)}
		case out.Result == Ok && all:
			return []multiState{freed(mine)}
		case out.Result == No && !all:
			return []multiState{freed(mine)}
		}
		return nil
	case Read:
		if bits.OnesCount8(in.Names) != 1 || out.Result != Ok {
			return nil
		}
		i := bits.TrailingZeros8(in.Names)
		if out.Locked == (s.holders[i] != "") {
			return []multiState{s}
		}
		return nil
	case Restart:
		return []multiState{{fences: s.fences}}
	}
	return nil
}

func describeMulti(in MultiIn, out MultiOut) string {
	names := ""
	for i := 0; i < GroupSize; i++ {
		if in.Names&(1<<i) != 0 {
			names += string(rune('a' + i))
		}
	}
	switch {
	case in.Op == Read:
		return fmt.Sprintf("%s.%s read -> %s locked=%v", in.Group, names, out.Result, out.Locked)
	case in.Op == Acquire && out.Result == Ok:
		return fmt.Sprintf("%s.%s acquire %s -> ok fences %v", in.Group, names, in.Token, out.Fences)
	}
	return fmt.Sprintf("%s.%s %s %s -> %s", in.Group, names, in.Op, in.Token, out.Result)
}

// ElectionIn is a call to an election: Campaign (Acquire) with Value, a
// resign (Release: the leadership's Unlock), Leader (Read).
type ElectionIn struct {
	Op                 Op
	Name, Token, Value string
}

func (in ElectionIn) part() string { return in.Name }
func (in ElectionIn) op() Op       { return in.Op }

// ElectionOut is the answer: the term of a campaign won; the leader's
// value and term for a read (Result No: no leader).
type ElectionOut struct {
	Result Result
	Value  string
	Term   int64
}

type electionState struct {
	leader, value string
	// term is the leader's term, or the last; after a campaign whose term
	// nobody saw, a lower bound of it (exact false) until a read shows it.
	term  int64
	exact bool
}

// Election is the model of an election: at most one leader, each term
// above every earlier one's, Leader reading the leader's value and term,
// or no leader, and a resign by the leader's token only.
func Election() porcupine.Model {
	return nondeterministic(electionState{}, electionStep, describeElection)
}

func electionStep(s electionState, in ElectionIn, out ElectionOut) []electionState {
	free := s.leader == ""
	switch in.Op {
	case Acquire:
		if out.Result == No {
			return nil // a campaign ends won or failed: never refused
		}
		return grant(s, free, out.Result, out.Term, func(term int64) electionState {
			return electionState{in.Token, in.Value, term, out.Result == Ok}
		})
	case Release, Abandon:
		return release(s, s.leader == in.Token, in.Op, out.Result, electionState{"", "", s.term, s.exact})
	case Read:
		switch {
		case out.Result == No && free:
			return []electionState{s}
		case out.Result == Ok && !free && out.Value == s.value && (out.Term == s.term || !s.exact && out.Term >= s.term):
			s.term, s.exact = out.Term, true
			return []electionState{s}
		}
		return nil
	case Restart:
		return []electionState{{term: s.term, exact: s.exact}}
	}
	return nil
}

func describeElection(in ElectionIn, out ElectionOut) string {
	switch {
	case in.Op == Read && out.Result == Ok:
		return fmt.Sprintf("%s leader -> %s term %d", in.Name, out.Value, out.Term)
	case in.Op == Read:
		return fmt.Sprintf("%s leader -> %s", in.Name, out.Result)
	case in.Op == Acquire && out.Result == Ok:
		return fmt.Sprintf("%s campaign %s (%s) -> ok term %d", in.Name, in.Token, in.Value, out.Term)
	}
	return fmt.Sprintf("%s %s %s -> %s", in.Name, in.Op, in.Token, out.Result)
}

// addTo, removeFrom and has treat a sorted, space-separated string as a
// set of words.
func addTo(set, w string) string {
	ws := append(strings.Fields(set), w)
	sort.Strings(ws)
	return strings.Join(ws, " ")
}

func removeFrom(set, w string) string {
	ws := strings.Fields(set)
	out := ws[:0]
	for _, x := range ws {
		if x != w {
			out = append(out, x)
		}
	}
	return strings.Join(out, " ")
}

func has(set, w string) bool {
	for _, x := range strings.Fields(set) {
		if x == w {
			return true
		}
	}
	return false
}

// AcrossRestarts returns ops with, beside each acquisition answered (a
// grant or a refusal) whose call spans a restart (or a failover of its
// partition), an Unknown acquisition
// of its token (a token of its own for a refusal) from the call until the
// last restart it spans ended. A waiter may be handed the object by a
// release before the restart, lose it in the restart without knowing,
// and be granted it again after, or refused (a semaphore's limit lost):
// what it returns comes after, and the first grant held the object for a
// while (a one-try call refused then meets a holder the history does not
// otherwise show). The twin ends with the restart, which voids it: later
// it would only widen the checker's search.
func AcrossRestarts(ops []porcupine.Operation) []porcupine.Operation {
	var restarts []porcupine.Operation
	for _, op := range ops {
		if restarted(op.Input) {
			restarts = append(restarts, op)
		}
	}
	out := append([]porcupine.Operation(nil), ops...)
	for i, op := range ops {
		end := int64(-1) // the last spanned restart's return
		for _, r := range restarts {
			if p := r.Input.(Input).part(); p != "" && p != op.Input.(Input).part() {
				continue // a failover of another primary's names
			}
			if op.Call < r.Return && op.Return > r.Call {
				end = max(end, min(r.Return, op.Return))
			}
		}
		if end < 0 {
			continue
		}
		own := fmt.Sprintf("twin-%d", i) // a refused call's twin holds as nobody else
		var twin Input
		var unknown any
		switch in := op.Input.(type) {
		case LockIn:
			if o, ok := op.Output.(LockOut); ok && o.Result != Unknown && (in.Op == Acquire || in.Op == Share) {
				if in.Token == "" {
					in.Token = own
				}
				twin, unknown = in, LockOut{Result: Unknown}
			}
		case SemIn:
			if o, ok := op.Output.(SemOut); ok && o.Result != Unknown && in.Op == Acquire {
				if in.Token == "" {
					in.Token = own
				}
				twin, unknown = in, SemOut{Result: Unknown}
			}
		case MultiIn:
			if o, ok := op.Output.(MultiOut); ok && o.Result != Unknown && in.Op == Acquire {
				if in.Token == "" {
					in.Token = own
				}
				twin, unknown = in, MultiOut{Result: Unknown}
			}
		}
		if unknown != nil {
			out = append(out, porcupine.Operation{ClientId: op.ClientId, Input: twin, Call: op.Call, Output: unknown, Return: end})
		}
	}
	return out
}

func restarted(in any) bool {
	i, ok := in.(Input)
	return ok && (i.op() == Restart || i.op() == Failover)
}
