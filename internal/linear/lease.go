package linear

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// LeaseIn is a call to an exclusive lock whose leases run out: one try to
// take it (Acquire) for TTL ms, an Extend to TTL ms from now, a Release,
// or the library's Abandon of an acquisition that failed (Token: an id of
// its own, as LockIn's).
type LeaseIn struct {
	Op          Op
	Name, Token string
	TTL         int64 // ms: the lease an Acquire or Extend asked for
}

func (in LeaseIn) part() string { return in.Name }
func (in LeaseIn) op() Op       { return in.Op }

// LeaseOut is the answer: Fence for a grant, and At, the server's clock in
// ms when the call's script began (0 if unknown), which decides whether a
// lease had run out by then.
type LeaseOut struct {
	Result Result
	Fence  int64
	At     int64
}

// leaseState is a lock and its holder's lease, which ends at end by the
// server's clock (0: unknown, as after a grant or an extension nobody saw
// answered).
type leaseState struct {
	holder string // "" when free
	fence  int64
	end    int64
}

// Lease is the model of an exclusive lock whose leases run out by the
// server's clock: Lock's rules, with a holder that counts only while its
// lease runs (a grant to another and a refusal of its release or
// extension are right once it ended), and an extension that moves its end.
// slack is how far, in ms, the server's clock as a script reads it may
// differ from the one that expires its keys: within it of a lease's end, a
// call may find it ended or not.
func Lease(slack int64) porcupine.Model {
	return nondeterministic(leaseState{}, func(s leaseState, in LeaseIn, out LeaseOut) []leaseState {
		return leaseStep(s, in, out, slack)
	}, describeLease)
}

// lapses is what s may be at: the holder still in it (live), or, if its
// lease may have ended by at, the lock free.
func (s leaseState) lapses(at, slack int64) []leaseState {
	free := leaseState{"", s.fence, 0}
	switch {
	case s.holder == "":
		return []leaseState{s}
	case s.end == 0 || at == 0: // an end or a time nobody knows
		return []leaseState{s, free}
	case at < s.end-slack:
		return []leaseState{s}
	case at >= s.end+slack:
		return []leaseState{free}
	}
	return []leaseState{s, free}
}

func leaseStep(s leaseState, in LeaseIn, out LeaseOut, slack int64) []leaseState {
	var next []leaseState
	for _, l := range s.lapses(out.At, slack) {
		next = append(next, leaseAt(l, in, out)...)
	}
	return next
}

// leaseAt is where call in with answer out leaves l, the lock as it was
// when the call's script began.
func leaseAt(l leaseState, in LeaseIn, out LeaseOut) []leaseState {
	mine := l.holder != "" && l.holder == in.Token
	switch in.Op {
	case Acquire:
		end := int64(0)
		if out.At != 0 {
			end = out.At + in.TTL
		}
		return grant(l, l.holder == "", out.Result, out.Fence, func(f int64) leaseState { return leaseState{in.Token, f, end} })
	case Extend:
		extended := leaseState{l.holder, l.fence, 0}
		if out.Result != Unknown {
			extended.end = out.At + in.TTL
		}
		switch {
		case out.Result == Unknown && mine:
			return []leaseState{l, extended}
		case out.Result == Unknown || out.Result == No && !mine:
			return []leaseState{l}
		case out.Result == Ok && mine:
			return []leaseState{extended}
		}
		return nil
	case Release, Abandon:
		return release(l, mine, in.Op, out.Result, leaseState{"", l.fence, 0})
	case Restart:
		return []leaseState{{"", l.fence, 0}}
	}
	return nil
}

func describeLease(in LeaseIn, out LeaseOut) string {
	at := "at ?"
	if out.At != 0 {
		at = fmt.Sprintf("at %d", out.At%1000000)
	}
	switch {
	case in.Op == Restart:
		return "restart"
	case out.Result == Ok && in.Op == Acquire:
		return fmt.Sprintf("%s acquire %s ttl %d -> ok fence %d %s", in.Name, in.Token, in.TTL, out.Fence, at)
	case in.Op == Acquire || in.Op == Extend:
		return fmt.Sprintf("%s %s %s ttl %d -> %s %s", in.Name, in.Op, in.Token, in.TTL, out.Result, at)
	}
	return fmt.Sprintf("%s %s %s -> %s %s", in.Name, in.Op, in.Token, out.Result, at)
}
