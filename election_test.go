package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// next is the next state Observe sends, failing t after 2 s (before an
// observer reads again to renew its registration, at 3 s).
func next(t *testing.T, ch <-chan Leader) Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return l
	case <-time.After(2 * time.Second):
		t.Fatal("no state from Observe in 2 s")
	}
	return Leader{}
}

// A campaign leads, proclaims and resigns; the next candidate, queued,
// leads in a higher term; an observer on another engine sees each state in
// order, and Leader reads the same.
func TestElectionCampaignObserveResign(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t) // a new election's first term waits a lease
		a, b, ctx := engine(s), engine(s), ctxT(t)
		el := a.Election("boss", LockOptions{TTL: 400 * time.Millisecond})
		if _, err := el.Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Leader of a new election: %v, want ErrNoLeader", err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := b.Election("boss", LockOptions{}).Observe(octx)
		if l := next(t, seen); l != (Leader{}) {
			t.Fatalf("first state %+v, want none", l)
		}
		la, err := el.Campaign(ctx, "a:1")
		if err != nil {
			t.Fatal(err)
		}
		if l := next(t, seen); l.Value != "a:1" || l.Term != la.Fence() || l.TTL <= 0 {
			t.Fatalf("observed %+v, want a:1 in term %d", l, la.Fence())
		}
		if l, err := el.Leader(ctx); err != nil || l.Value != "a:1" || l.Term != la.Fence() {
			t.Fatalf("Leader: %+v, %v", l, err)
		}
		if err := la.SetOwner(ctx, "a:2"); err != nil {
			t.Fatal(err)
		}
		if l := next(t, seen); l.Value != "a:2" || l.Term != la.Fence() {
			t.Fatalf("after SetOwner: observed %+v, want a:2 in term %d", l, la.Fence())
		}
		got := make(chan *Lock, 1)
		go func() {
			lb, err := b.Election("boss", LockOptions{TTL: 400 * time.Millisecond}).Campaign(ctx, "b")
			if err != nil {
				t.Error(err)
			}
			got <- lb
		}()
		waitFor(t, func() bool {
			info, err := a.electionInfo(ctx, "boss")
			return err == nil && info.Waiting == 1
		})
		if err := la.Unlock(ctx); err != nil { // resign
			t.Fatal(err)
		}
		lb := <-got
		if lb == nil {
			return
		}
		if l := next(t, seen); l.Value != "b" || l.Term != lb.Fence() || l.Term <= la.Fence() {
			t.Fatalf("after a resigned: observed %+v, want b in term %d > %d", l, lb.Fence(), la.Fence())
		}
		if err := lb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if l := next(t, seen); l != (Leader{}) {
			t.Fatalf("after b resigned: observed %+v, want none", l)
		}
		if _, err := el.Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Leader after both resigned: %v, want ErrNoLeader", err)
		}
		stop()
		for range seen { // closed when ctx ends
		}
	})
}

// An election's keys never meet a lock's of the same name.
func TestElectionAndLockOfOneNameNeverMeet(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t) // a new election's first term waits a lease
		e, ctx := engine(s), ctxT(t)
		l, err := e.TryLock(ctx, "x", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		leader, err := e.Election("x", LockOptions{TTL: 300 * time.Millisecond}).Campaign(cctx, "v")
		if err != nil {
			t.Fatalf("Campaign on x while the lock x is held: %v", err)
		}
		defer leader.Unlock(ctx)
		if info := lockInfo(t, e, "x"); info.Token != l.Token() {
			t.Fatalf("the lock x: %+v, want its holder %s", info, l.Token())
		}
	})
}

// A leader whose lease runs out with no script (its engine can no longer
// reach Redis) is seen gone by an observer soon after its lease's end.
func TestElectionObserveSeesALeaseRunOut(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		proxy := startProxy(t, s.Addr, faults{})
		pool := newPool(t, proxy.addr())
		dying := New(pool, WithNamespace(s.NS))
		defer dying.Close(ctx)
		watcher := engine(s)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := watcher.Election("e", LockOptions{}).Observe(octx)
		next(t, seen)
		l, err := dying.Election("e", LockOptions{TTL: 300 * time.Millisecond}).Campaign(ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		if got := next(t, seen); got.Value != "d" {
			t.Fatalf("observed %+v, want d", got)
		}
		proxy.refuse.Store(true)
		proxy.cutAll()
		cut := time.Now()
		if got := next(t, seen); got != (Leader{}) {
			t.Fatalf("observed %+v, want none", got)
		}
		// The lease ran at most 300 ms after the cut: seen then, by the read
		// at the lease's end, not by the registration's renewal 3 s after
		// the last one (how soon: BenchmarkElectionObserve/lease-end).
		if took := time.Since(cut); took > 2*time.Second {
			t.Errorf("the lease's end was seen %v after the cut, want at the lease's end (300ms), long before 3 s", took)
		}
		<-l.Lost()
	})
}

// electionInfo is LockInfo for an election's lock.
func (e *Engine) electionInfo(ctx context.Context, name string) (LockInfo, error) {
	var info LockInfo
	obj, err := e.object(kindElection, name)
	if err != nil {
		return info, err
	}
	v, err := redis.Values(e.eval(ctx, obj, scriptLockInfo, obj.key(""), obj.key(":waiters")))
	if err != nil || len(v) != 5 {
		return info, fmt.Errorf("lock_info: %v, %w", v, err)
	}
	info.Token, _ = redis.String(v[0], nil)
	info.Waiting, _ = redis.Int(v[3], nil)
	return info, nil
}

// States are ordered by term, then, in one term, none after the leader,
// and the leader's values in the order it proclaimed them.
func TestElectionStatesInOrder(t *testing.T) {
	leader := func(term int64) electionState { return electionState{term: term, leads: true} }
	proclaimed := func(term, change int64) electionState {
		return electionState{term: term, leads: true, change: change}
	}
	none := func(term int64) electionState { return electionState{term: term} }
	for _, c := range []struct {
		st, prev electionState
		after    bool
	}{
		{leader(2), leader(1), true}, {leader(1), leader(2), false},
		{none(1), leader(1), true}, {leader(1), none(1), false},
		{leader(2), none(1), true}, {none(1), none(2), false},
		{leader(1), leader(1), true}, // the same leader, read later
		{proclaimed(1, 2), proclaimed(1, 1), true}, {proclaimed(1, 1), proclaimed(1, 2), false},
		{proclaimed(2, 0), proclaimed(1, 5), true},
	} {
		if got := c.st.after(c.prev); got != c.after {
			t.Errorf("%+v after %+v: %v, want %v", c.st, c.prev, got, c.after)
		}
	}
}

// A message published before a read was answered may reach an observer
// after the read: in one term, a value the leader proclaimed before the
// one read is not sent after it, and a lower term's "no leader" is not
// taken for the term read. The server numbers a leader's proclamations
// (lib/election.lua's el_proclaim). (Before, any reading of the term's
// leader counted as newer, and the observer sent the older value after
// the newer.) A read is the server's state: in its term it replaces even a
// later proclamation, which a failover may have lost.
func TestObserveKeepsAProclamationsOrder(t *testing.T) {
	o := &observer{out: make(chan Leader, 1)}
	sent := func() (Leader, bool) {
		select {
		case l := <-o.out:
			return l, true
		default:
			return Leader{}, false
		}
	}
	leader := func(term, change int64, value string) electionState {
		return electionState{term: term, leads: true, ttl: time.Second, change: change, value: value}
	}
	o.take(leader(7, 2, "b"), true)
	o.take(leader(7, 1, "a"), false) // published before the read ran
	if got, _ := sent(); got.Value != "b" {
		t.Errorf("Observe sent %+v first, want b", got)
	}
	if got, ok := sent(); ok {
		t.Errorf("Observe sent %+v after b, proclaimed before it", got)
	}
	o.take(leader(7, 3, "c"), false)
	if got, _ := sent(); got.Value != "c" {
		t.Errorf("Observe sent %+v after a third proclamation, want c", got)
	}
	o.take(leader(7, 2, "b"), true) // a failover lost c
	if got, _ := sent(); got.Value != "b" {
		t.Errorf("Observe sent %+v on reading b after c was lost, want b", got)
	}
	o.take(leader(8, 0, "d"), true)
	<-o.out
	o.leaseEnd = time.Now().Add(-time.Second) // the reader paused past d's lease
	o.take(electionState{term: 7}, false)     // term 7's leader resigned, before d led
	if got, ok := sent(); ok {
		t.Errorf("Observe sent %+v on a late message of term 7 under term 8", got)
	}
	o.take(electionState{term: 7}, true) // a read: term 8's counter is gone, and its lease over
	if got, ok := sent(); !ok || got != (Leader{}) {
		t.Errorf("Observe sent %+v, %v on reading no leader past term 8's lease, want no leader", got, ok)
	}

	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx, e := ctxT(t), engine(s)
		el := e.Election("proclaim", LockOptions{TTL: 300 * time.Millisecond}) // a new election waits a lease
		l, err := el.Campaign(ctx, "a b")                                      // a value may hold spaces
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		obj, err := el.object()
		if err != nil {
			t.Fatal(err)
		}
		for i, value := range []string{"a b", "c", "", "d d"} {
			if i > 0 {
				if err := l.SetOwner(ctx, value); err != nil {
					t.Fatal(err)
				}
			}
			st, err := e.electionState(ctx, obj, scriptElLeader, obj.key(""), obj.key(":fence"))
			if err != nil {
				t.Fatal(err)
			}
			if st.change != int64(i) || st.value != value || st.term != l.Fence() {
				t.Errorf("after %d proclamations of %q: change %d, value %q, term %d (the fence %d)", i, value, st.change, st.value, st.term, l.Fence())
			}
			if got, err := el.Leader(ctx); err != nil || got.Value != value {
				t.Errorf("Leader after proclaiming %q: %+v, %v", value, got, err)
			}
		}
		if l.Owner() != "d d" {
			t.Errorf("Owner() %q, want the value alone", l.Owner())
		}
	})
}

// A leader that held past the fence retention (its term counter expired
// meanwhile: extensions do not renew it) resigns: observers hear that
// nobody leads, in the resigning script's message (which names the
// leader's term as the last one handed out), and a read that finds no
// counter after the leader's lease ran out counts as no leader too. Before,
// Observe dropped both (term 0 ranked below the leader's) and read again
// at once, forever.
func TestObserveAResignAfterTheCounterExpired(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		a := engine(s, WithFenceRetention(300*time.Millisecond))
		b := engine(s)
		el := a.Election("long", LockOptions{TTL: 300 * time.Millisecond})
		l, err := el.Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := b.Election("long", LockOptions{}).Observe(octx)
		if got := next(t, seen); got.Value != "a" {
			t.Fatalf("first state %+v", got)
		}
		time.Sleep(600 * time.Millisecond) // the counter's retention runs out; the watchdog keeps the lease
		if n, err := redis.Int(s.Do("EXISTS", s.NS+"election:{long}:fence")); err != nil || n != 0 {
			t.Fatalf("the term counter still exists (%d, %v): the test needs it gone", n, err)
		}
		// The observer's own reads: one at the lease's end at most, and
		// one a registration, not one after another (counted on one
		// server: INFO on a cluster answers from any node).
		calls := func() int64 {
			if s.Mini != nil || s.Engines != nil {
				return 0
			}
			info, err := redis.String(s.Do("INFO", "commandstats"))
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, line := range strings.Split(info, "\r\n") {
				if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
					n, _ = strconv.ParseInt(rest[:strings.Index(rest, ",")], 10, 64)
				}
			}
			return n
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		start, before := time.Now(), calls()
		select {
		case got := <-seen:
			if got.Value != "" || got.Term != 0 {
				t.Errorf("after the resign Observe sent %+v, want no leader", got)
			}
			t.Logf("no leader heard %v after the resign", time.Since(start).Round(time.Millisecond))
		case <-time.After(2 * time.Second):
			t.Errorf("Observe sent nothing in 2 s after the resign")
		}
		time.Sleep(time.Until(start.Add(2 * time.Second)))
		if n := calls() - before; n > 100 {
			t.Errorf("%d script calls on the server in the 2 s after the resign, with nothing to do but observe", n)
		}
	})
}

// An election's scripts read every key they write, and the term counter
// the state they publish to observers reads, before their first write: a
// resign beside a counter of the wrong type, observed, fails with the lock
// still held (before, the release had deleted it), and a first campaign
// beside a queue of the wrong type fails with nothing written (before, its
// guard had written the lock and the counter).
func TestElectionScriptsFailCleanly(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		l, err := e.Election("wt", LockOptions{TTL: 300 * time.Millisecond}).Campaign(ctx, "a") // a new election waits a lease
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		next(t, e.Election("wt", LockOptions{}).Observe(octx)) // an observer, whom the resign would tell
		fence := s.NS + "election:{wt}:fence"
		s.Must(t, "DEL", fence)
		s.Must(t, "HSET", fence, "x", "y")
		// The watchdog may extend the lock (its value's extension number)
		// until Unlock stops it: the lock is held by its token after.
		lock := s.NS + "election:{wt}"
		before := s.Snapshot(t)
		delete(before, lock)
		err = l.Unlock(ctx)
		after := s.Snapshot(t)
		if v, _ := redis.String(s.Do("GET", lock)); !strings.HasPrefix(v, l.Token()+" ") {
			t.Errorf("a resign that failed (%v) left the lock %q, want it held by %s", err, v, l.Token())
		}
		if delete(after, lock); !maps.Equal(before, after) {
			t.Errorf("a resign that failed (%v) changed keys:\nbefore %v\nafter  %v", err, before, after)
		}
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("resign beside a hash for the counter: %v, want WRONGTYPE", err)
		}

		// A first campaign after a leader's placeholder ran out, beside a
		// hash for the counter: the guard would delete the placeholder.
		s.Must(t, "SET", s.NS+"election:{wg}", "- 1000 0")
		s.Must(t, "HSET", s.NS+"election:{wg}:fence", "x", "y")
		before = s.Snapshot(t)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = e.Election("wg", LockOptions{TTL: 5 * time.Second}).Campaign(cctx, "a")
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("a campaign that failed (%v) changed keys:\nbefore %v\nafter  %v", err, before, after)
		}
		if err == nil || !strings.Contains(err.Error(), "counter") && !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("campaign beside a hash for the counter: %v, want it refused", err)
		}

		s.Must(t, "SET", s.NS+"election:{wq}:queue", "not a zset")
		before = s.Snapshot(t)
		cctx, cancel = context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = e.Election("wq", LockOptions{TTL: 5 * time.Second}).Campaign(cctx, "a")
		if after := s.Snapshot(t); !maps.Equal(before, after) {
			t.Errorf("a campaign that failed (%v) changed keys:\nbefore %v\nafter  %v", err, before, after)
		}
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("campaign beside a string for the queue: %v, want WRONGTYPE", err)
		}
	})
}

// A new election's first term waits one lease; the term counter its
// guard starts is kept past that lease whatever the fence retention, so
// that the campaign's next attempt finds it. (Before, it was kept the
// retention alone: with a retention no longer than the lease, each attempt
// could find it gone and wait again; a campaign took up to 4.8 s with
// 300 ms of each, and 60 s, its test's limit, in CI.)
func TestCampaignOutlastsAShortRetention(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s, WithFenceRetention(100*time.Millisecond))
		done := make(chan error, 1)
		go func() {
			l, err := e.Election("short", LockOptions{TTL: time.Second}).Campaign(ctx, "a")
			if err == nil {
				err = l.Unlock(ctx)
			}
			done <- err
		}()
		key := s.NS + "election:{short}:fence"
		deadline := time.Now().Add(5 * time.Second)
		for {
			ms, err := redis.Int64(s.Do("PTTL", key))
			if err != nil {
				t.Fatal(err)
			}
			if ms > 0 {
				if ms <= 1000 {
					t.Errorf("the term counter the first term's wait started expires in %d ms, within the 1 s lease", ms)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no term counter 5 s into the campaign (PTTL %d)", ms)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := <-done; err != nil {
			t.Errorf("Campaign: %v", err)
		}
	})
}
