package linear

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// what a failover may and may not bring back, under each Acks.
func TestChecker_LockFailover(t *testing.T) {
	failover := LockIn{Op: Failover, Name: "x"}
	sync := LockIn{Op: Sync, Name: "x"}
	cases := []struct {
		what string
		h    *history
		want [4]porcupine.CheckResult // NoneAcked, GrantsAcked, AnsweredAcked, AllAcked
	}{{
		"an Unlock that returned comes back as held",
		new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
			seq(0, lk(Release, "A"), LockOut{Result: Ok}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: true}),
		[4]porcupine.CheckResult{porcupine.Ok, porcupine.Ok, porcupine.Illegal, porcupine.Illegal},
	}, {
		"... not past a Sync",
		new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
			seq(0, lk(Release, "A"), LockOut{Result: Ok}).
			seq(8, sync, LockOut{Result: Ok}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: true}),
		[4]porcupine.CheckResult{porcupine.Illegal, porcupine.Illegal, porcupine.Illegal, porcupine.Illegal},
	}, {
		"a grant lost, its fence handed out again",
		new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: 1}),
		[4]porcupine.CheckResult{porcupine.Ok, porcupine.Illegal, porcupine.Illegal, porcupine.Illegal},
	}, {
		"a release lost, a later grant's fence handed out again",
		new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
			seq(0, lk(Release, "A"), LockOut{Result: Ok}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(1, lk(Acquire, "B"), LockOut{Result: No}),
		[4]porcupine.CheckResult{porcupine.Ok, porcupine.Ok, porcupine.Illegal, porcupine.Illegal},
	}, {
		"a grant nobody was told of lost, its fence handed out again",
		new(history).
			open(0, lk(Acquire, "A"), LockOut{Result: Unknown}).
			open(0, lk(Abandon, "A"), LockOut{Result: Unknown}).
			seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: true}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: false}).
			seq(1, lk(Acquire, "B"), LockOut{Result: Ok, Fence: 1}),
		[4]porcupine.CheckResult{porcupine.Ok, porcupine.Ok, porcupine.Ok, porcupine.Illegal},
	}, {
		"after the failover, no other",
		new(history).
			seq(0, lk(Acquire, "A"), LockOut{Result: Ok, Fence: 1}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(0, lk(Release, "A"), LockOut{Result: Ok}).
			seq(9, failover, LockOut{Result: Ok}).
			seq(1, lk(Read, ""), LockOut{Result: Ok, Locked: true}),
		[4]porcupine.CheckResult{porcupine.Illegal, porcupine.Illegal, porcupine.Illegal, porcupine.Illegal},
	}}
	for _, c := range cases {
		for a, want := range c.want {
			if res := verdict(t, LockReplicated(Acks(a)), c.h); res != want {
				t.Errorf("%s, %s: %s, want %s", c.what, Acks(a), res, want)
			}
		}
	}
}

// Spread copies a failover into the named partitions only.
func TestChecker_Spread(t *testing.T) {
	ops := new(history).
		seq(0, LockIn{Op: Acquire, Name: "a", Token: "A"}, LockOut{Result: Ok, Fence: 1}).
		seq(0, LockIn{Op: Acquire, Name: "b", Token: "B"}, LockOut{Result: Ok, Fence: 1}).
		seq(9, LockIn{Op: Failover}, LockOut{Result: Ok}).ops
	got := Spread(ops, func(p string) bool { return p == "a" })
	if len(got) != 3 || got[2].Input.(LockIn).Name != "a" {
		t.Errorf("Spread: %+v", got)
	}
}

// An abandon that a Sync covers stays; one after the last Sync, before
// the failover, reopens its acquisition; one after the kill does not.
func TestChecker_ReopenAbandoned(t *testing.T) {
	h := new(history).
		seq(0, lk(Acquire, "a"), LockOut{Result: Unknown}).
		seq(0, lk(Abandon, "a"), LockOut{Result: Ok}).
		seq(9, LockIn{Op: Sync, Name: "x"}, LockOut{Result: Ok}).
		seq(1, lk(Acquire, "b"), LockOut{Result: Unknown}).
		seq(1, lk(Abandon, "b"), LockOut{Result: Ok}).
		seq(9, LockIn{Op: Failover, Name: "x"}, LockOut{Result: Ok}).
		seq(2, lk(Acquire, "c"), LockOut{Result: Unknown}).
		seq(2, lk(Abandon, "c"), LockOut{Result: Ok})
	out := ReopenAbandoned(h.ops)
	for i, want := range map[int]bool{0: false, 3: true, 6: false} {
		if got := out[i].Return > h.tick+1; got != want {
			t.Errorf("%s reopened: %v, want %v", Describe(Lock(), out[i:i+1]), got, want)
		}
	}
}
