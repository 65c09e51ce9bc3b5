package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// A campaign leads, proclaims and resigns; the next candidate, queued,
// leads in a higher term; an observer on another engine sees each state in
// order, and Leader reads the same.
func TestElection_CampaignObserveResign(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t) // a new election's first term waits a lease
		a, b, ctx := engine(s), engine(s), ctxT(t)
		el := a.Election("boss", ElectionOptions{TTL: 400 * time.Millisecond})
		if _, err := el.Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Leader of a new election: %v, want ErrNoLeader", err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := b.Election("boss", ElectionOptions{}).Observe(octx)
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
			lb, err := b.Election("boss", ElectionOptions{TTL: 400 * time.Millisecond}).Campaign(ctx, "b")
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
func TestElection_AndLockOfOneNameNeverMeet(t *testing.T) {
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
		leader, err := e.Election("x", ElectionOptions{TTL: 300 * time.Millisecond}).Campaign(cctx, "v")
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
func TestElection_ObserveSeesALeaseRunOut(t *testing.T) {
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
		seen := watcher.Election("e", ElectionOptions{}).Observe(octx)
		next(t, seen)
		l, err := dying.Election("e", ElectionOptions{TTL: 300 * time.Millisecond}).Campaign(ctx, "d")
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
	obj, err := e.object(kindElection, name)
	if err != nil {
		return LockInfo{}, err
	}
	return e.lockInfoOf(ctx, obj)
}

// States are ordered by term, then, in one term, none after the leader,
// and the leader's values in the order it proclaimed them.
func TestElection_StatesInOrder(t *testing.T) {
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
func TestElection_ObserveKeepsAProclamationsOrder(t *testing.T) {
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
		el := e.Election("proclaim", ElectionOptions{TTL: 300 * time.Millisecond}) // a new election waits a lease
		l, err := el.Campaign(ctx, "a b")                                          // a value may hold spaces
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
func TestElection_ObserveAResignAfterTheCounterExpired(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		a := engine(s, WithFenceRetention(300*time.Millisecond))
		b, gets := engine(s), func() int64 { return 0 }
		if s.Engines == nil { // b's own script calls, one connection each
			p := &countingPool{Pool: s.Pool}
			b, gets = New(p, WithNamespace(s.NS)), p.gets.Load
			t.Cleanup(func() { b.Close(context.Background()) })
		}
		el := a.Election("long", ElectionOptions{TTL: 300 * time.Millisecond})
		l, err := el.Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := b.Election("long", ElectionOptions{}).Observe(octx)
		if got := next(t, seen); got.Value != "a" {
			t.Fatalf("first state %+v", got)
		}
		time.Sleep(600 * time.Millisecond) // the counter's retention runs out; the watchdog keeps the lease
		if n, err := redis.Int(s.Do("EXISTS", s.NS+"election:{long}:fence")); err != nil || n != 0 {
			t.Fatalf("the term counter still exists (%d, %v): the test needs it gone", n, err)
		}
		// The observer's own reads: one at the lease's end at most, and
		// one a registration, not one after another: the connections
		// its engine takes, one a script call (on a cluster, not counted).
		calls := gets
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
		n := calls() - before
		t.Logf("%d script calls by the observer's engine in the 2 s after the resign", n)
		if n > 100 {
			t.Errorf("%d script calls by the observer's engine in the 2 s after the resign, with nothing to do but observe", n)
		}
	})
}

// An election's scripts read every key they write, and the term counter
// the state they publish to observers reads, before their first write: a
// resign beside a counter of the wrong type, observed, fails with the lock
// still held (before, the release had deleted it), and a first campaign
// beside a queue of the wrong type fails with nothing written (before, its
// guard had written the lock and the counter).
func TestElection_ScriptsFailCleanly(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s)
		l, err := e.Election("wt", ElectionOptions{TTL: 300 * time.Millisecond}).Campaign(ctx, "a") // a new election waits a lease
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		next(t, e.Election("wt", ElectionOptions{}).Observe(octx)) // an observer, whom the resign would tell
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
		_, err = e.Election("wg", ElectionOptions{TTL: 5 * time.Second}).Campaign(cctx, "a")
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
		_, err = e.Election("wq", ElectionOptions{TTL: 5 * time.Second}).Campaign(cctx, "a")
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
func TestElection_CampaignOutlastsAShortRetention(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t)
		ctx := ctxT(t)
		e := engine(s, WithFenceRetention(100*time.Millisecond))
		done := make(chan error, 1)
		go func() {
			l, err := e.Election("short", ElectionOptions{TTL: time.Second}).Campaign(ctx, "a")
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

// termStore is a store that applies the (term, token) rule: a write is
// admitted if its term is above the highest it has admitted, or equal with
// the same token.
type termStore struct {
	mu       sync.Mutex
	term     int64
	token    string
	admitted int
	refused  int
}

func (s *termStore) write(term int64, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if term < s.term || term == s.term && token != s.token {
		s.refused++
		return false
	}
	s.term, s.token = term, token
	s.admitted++
	return true
}

// leadership is one candidate's time as leader, by this process's clock:
// from Campaign's return to the end of the leadership's Context.
type leadership struct {
	start, end  time.Time
	term        int64
	value       string
	deposedWrit int // writes it made after a later leader's first write that the store admitted
}

// Candidates on four engines campaign on one election through a proxy
// that delays and cuts connections, while the server restarts (losing
// everything) and the engines' wake subscriptions are killed again and
// again. On this process's clock no two leaderships' Contexts are live at
// once; terms grow with every leader; the (term, token) store admits no
// write of a deposed leader; and two observers never see an older state
// after a newer, nor a leader that was not one.
func TestElection_UnderFaults(t *testing.T) {
	testserver.Parallel(t)
	r := testserver.PrivateRedis(t)
	// It runs until enough terms have passed (the restart after half of
	// them), or for a minute on a machine too busy for that.
	terms := 16
	if testing.Short() {
		terms = 4
	}
	const run = time.Minute
	const candidates = 4
	lease := time.Second
	proxy := startProxy(t, r.Addr(), faults{delayP: 0.2, maxDelay: 20 * time.Millisecond})
	pool := newPool(t, proxy.addr())
	pool.MaxIdle = 32
	ns := testserver.Namespace()
	es := make([]*Engine, candidates+2)
	for i := range es {
		es[i] = New(pool, WithNamespace(ns))
	}
	defer func() {
		for _, e := range es {
			e.Close(context.Background())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	began := time.Now()

	var (
		mu      sync.Mutex
		leaders []leadership
		store   termStore
		values  = map[string]int64{} // value -> term, of every leadership
		failed  = map[string]bool{}  // values whose Campaign returned an error
	)
	// Observers, on engines of their own.
	type observed struct{ states []Leader }
	obs := make([]*observed, 2)
	var owg sync.WaitGroup
	for i := range obs {
		obs[i] = &observed{}
		ch := es[candidates+i].Election("el", ElectionOptions{}).Observe(ctx)
		owg.Add(1)
		go func(o *observed) {
			defer owg.Done()
			for l := range ch {
				o.states = append(o.states, l)
			}
		}(obs[i])
	}

	var wg sync.WaitGroup
	var n, elected atomic.Int64
	for c := 0; c < candidates; c++ {
		wg.Add(1)
		go func(e *Engine) {
			defer wg.Done()
			el := e.Election("el", ElectionOptions{TTL: lease})
			for ctx.Err() == nil {
				value := fmt.Sprintf("c%d", n.Add(1))
				l, err := el.Campaign(ctx, value)
				if err != nil {
					// A grant whose reply was cut led on the server until
					// its abandon handed it on: observers may see it.
					mu.Lock()
					failed[value] = true
					mu.Unlock()
					continue
				}
				elected.Add(1)
				start := time.Now()
				lctx, stop := l.Context(context.Background())
				mu.Lock()
				values[value] = l.Fence()
				mu.Unlock()
				var writes, deposed int
				hold := time.After(time.Duration(rand.IntN(int(lease)))) // shorter, or longer than a watchdog extension
			holding:
				for {
					select {
					case <-lctx.Done():
						break holding
					case <-hold:
						break holding
					case <-time.After(5 * time.Millisecond):
						if lctx.Err() == nil {
							writes++
							if !store.write(l.Fence(), l.Token()) {
								deposed++
							}
						}
					}
				}
				end := time.Now() // on a loss, a little after its Context ended
				stop()
				l.Unlock(context.Background())
				mu.Lock()
				leaders = append(leaders, leadership{start: start, end: end, term: l.Fence(), value: value, deposedWrit: deposed})
				mu.Unlock()
			}
		}(es[c])
	}

	// Faults: cuts, subscription kills, one restart.
	stopChaos := proxy.chaos()
	var kills, restarts int
	tick := time.NewTicker(300 * time.Millisecond)
faults:
	for {
		select {
		case <-ctx.Done():
			break faults
		case <-tick.C:
			if restarts > 0 && elected.Load() >= int64(terms) {
				cancel()
				break faults
			}
			if restarts == 0 && elected.Load() >= int64(terms/2) {
				r.Kill()
				if err := r.Start(); err != nil {
					t.Errorf("restart: %v", err)
				}
				restarts++
				continue
			}
			if _, err := r.Do("CLIENT", "KILL", "TYPE", "pubsub"); err == nil {
				kills++
			}
		}
	}
	tick.Stop()
	stopChaos()
	wg.Wait()
	owg.Wait()

	sort.Slice(leaders, func(i, j int) bool { return leaders[i].start.Before(leaders[j].start) })
	overlaps, deposedWrites := 0, 0
	for i, l := range leaders {
		deposedWrites += l.deposedWrit
		if i == 0 {
			continue
		}
		prev := leaders[i-1]
		if l.start.Before(prev.end) {
			overlaps++
			t.Errorf("leaderships overlap: term %d %v–%v and term %d from %v", prev.term, prev.start.Format("15:04:05.000"), prev.end.Format("15:04:05.000"), l.term, l.start.Format("15:04:05.000"))
		}
		if l.term <= prev.term {
			t.Errorf("term %d (%s) after term %d (%s): terms must grow", l.term, l.value, prev.term, prev.value)
		}
	}
	backwards, unknown := 0, 0
	for i, o := range obs {
		for j, s := range o.states {
			if s.Term != 0 && values[s.Value] != s.Term && !(failed[s.Value] && values[s.Value] == 0) {
				unknown++
				t.Errorf("observer %d saw %+v, which never led", i, s)
			}
			if j == 0 || s.Term == 0 {
				continue
			}
			for k := j - 1; k >= 0; k-- { // the last leader seen before it
				if p := o.states[k]; p.Term != 0 {
					if s.Term < p.Term {
						backwards++
						t.Errorf("observer %d saw term %d after term %d", i, s.Term, p.Term)
					}
					break
				}
			}
		}
	}
	if deposedWrites != 0 {
		t.Errorf("the store refused %d writes of leaders whose Context was live: a deposed leader kept writing", deposedWrites)
	}
	t.Logf("%d terms in %v on %d candidates; %d connections cut, %d wake subscriptions killed, %d server restarts; store: %d writes admitted, %d refused; observers saw %d and %d states; %d overlaps, %d states out of order, %d unknown leaders",
		len(leaders), time.Since(began).Round(time.Millisecond), candidates, proxy.cuts.Load(), kills, restarts, store.admitted, store.refused,
		len(obs[0].states), len(obs[1].states), overlaps, backwards, unknown)
	if len(leaders) < terms || restarts == 0 {
		t.Errorf("too little happened to judge in %v: %d terms (want %d), %d restarts", run, len(leaders), terms, restarts)
	}
}

// A campaign whose ctx has no deadline waits until it leads, however long:
// past DefaultWait, which bounds a Lock's wait, not a campaign's.
func TestElection_CampaignWaitsPastDefaultWait(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits past DefaultWait (10 s)")
	}
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		s.Realtime(t) // a new election's first term waits a lease
		a, b, ctx := engine(s), engine(s), ctxT(t)
		o := ElectionOptions{TTL: 300 * time.Millisecond}
		lead, err := a.Election("patient", o).Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := lead.Extend(ctx, time.Minute); err != nil { // a lease no busy machine lets lapse
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(context.Background()) // no deadline
		defer cancel()
		type result struct {
			l   *Lock
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := b.Election("patient", o).Campaign(cctx, "b")
			got <- result{l, err}
		}()
		select {
		case r := <-got:
			t.Fatalf("Campaign returned while another led: %v, %v", r.l, r.err)
		case <-time.After(DefaultWait + time.Second):
		}
		if err := lead.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("Campaign after the leader resigned: %v", r.err)
			}
			if err := r.l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Campaign did not lead in 10 s after the leader resigned")
		}
	})
}

// An Observe that ended leaves its engine's registration to expire: the
// observers key lives at most two registrations' lengths, so an election
// nobody observes leaves nothing behind.
func TestElection_ObserverRegistrationExpires(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, s *testserver.Server) {
		e, ctx := engine(s), ctxT(t)
		octx, stop := context.WithCancel(ctx)
		seen := e.Election("watched", ElectionOptions{}).Observe(octx)
		if l := next(t, seen); l != (Leader{}) {
			t.Fatalf("first state %+v, want none", l)
		}
		stop()
		for range seen { // closed when ctx ends
		}
		key := object{kind: kindElection, name: "watched", ns: s.NS}.key(":observers")
		if pttl := s.PTTL(t, key); pttl <= 0 || pttl > 2*observerRegistration {
			t.Fatalf("the observers key expires in %v, want in at most %v", pttl, 2*observerRegistration)
		}
		if s.Mini != nil {
			s.Advance(2 * observerRegistration)
			if keys := s.Keys(t); len(keys) != 0 {
				t.Fatalf("keys left after the registration ran out: %q", keys)
			}
		}
	})
}

// heldReplyPool holds back the replies of one script (by hash) while hold
// is set: each such call has run on the server when it signals started,
// and returns its reply only once release is closed.
type heldReplyPool struct {
	p       Pool
	hash    string
	hold    atomic.Bool
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

// newHeldReplyPool holds back s's replies on p until free is called, or
// the test ends.
func newHeldReplyPool(t *testing.T, p Pool, s *script) *heldReplyPool {
	hp := &heldReplyPool{p: p, hash: s.Hash(), started: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(hp.free)
	return hp
}

// free stops holding replies back and returns those held.
func (p *heldReplyPool) free() {
	p.once.Do(func() {
		p.hold.Store(false)
		close(p.release)
	})
}

func (p *heldReplyPool) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := p.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	return &heldReplyConn{Conn: c, p: p}, nil
}

type heldReplyConn struct {
	redis.Conn
	p *heldReplyPool
}

func (c *heldReplyConn) Do(cmd string, args ...any) (any, error) {
	v, err := c.Conn.Do(cmd, args...)
	if c.p.hold.Load() && cmd == "EVALSHA" && len(args) > 0 && args[0] == c.p.hash {
		select {
		case c.p.started <- struct{}{}:
		default:
		}
		<-c.p.release
	}
	return v, err
}

// heldRead makes the observer's next read of the election hold back its
// reply, and returns once that read has run on the server.
func heldRead(t *testing.T, p *heldReplyPool) {
	t.Helper()
	p.hold.Store(true)
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer did not read the election in 10 s")
	}
}

// A read that was answered before a newer state reached the observer
// (here a proclamation published while the read's reply was held back) is
// not sent after it: Observe never sends an older value after a newer.
func TestElection_ObserveDropsAReadOvertaken(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t) // a new election's first term waits a lease
		a, ctx := engine(s), ctxT(t)
		lead, err := a.Election("slow", ElectionOptions{TTL: time.Second}).Campaign(ctx, "v1")
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Unlock(ctx)
		hp := newHeldReplyPool(t, s.Pool, scriptElObserve)
		b := New(hp, WithNamespace(s.NS))
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := b.Election("slow", ElectionOptions{}).Observe(octx)
		if got := next(t, seen); got.Value != "v1" {
			t.Fatalf("first state %+v, want v1", got)
		}
		heldRead(t, hp) // it read v1, at the leader's lease's end
		if err := lead.SetOwner(ctx, "v2"); err != nil {
			t.Fatal(err)
		}
		if got := next(t, seen); got.Value != "v2" {
			t.Fatalf("after SetOwner: %+v, want v2", got)
		}
		hp.free() // the read of v1 returns now
		select {
		case got := <-seen:
			if got.Value == "v1" {
				t.Fatalf("Observe sent %+v after v2: an older value after a newer", got)
			}
		case <-time.After(time.Second):
		}
		stop()
		for range seen {
		}
		b.Close(ctx)
	})
}

// A leader that held past the fence retention (its term counter expired)
// resigns: its resigning script's message tells observers at once that
// nobody leads, without a read of their own (held back here until the
// message came). Before, the message named term 0, which Observe dropped,
// and it heard of the resign only at its next read.
func TestElection_ResignAfterTheCounterExpiredReachesObserversAtOnce(t *testing.T) {
	testserver.Parallel(t) // waits, mostly
	servers(t, func(t *testing.T, s *testserver.Server) {
		needsOneAddress(t, s)
		s.Realtime(t)
		ctx := ctxT(t)
		a := engine(s, WithFenceRetention(300*time.Millisecond))
		lead, err := a.Election("gone", ElectionOptions{TTL: 300 * time.Millisecond}).Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := lead.Extend(ctx, time.Minute); err != nil { // a lease no busy machine lets lapse
			t.Fatal(err)
		}
		hp := newHeldReplyPool(t, s.Pool, scriptElObserve)
		b := New(hp, WithNamespace(s.NS))
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := b.Election("gone", ElectionOptions{}).Observe(octx)
		if got := next(t, seen); got.Value != "a" {
			t.Fatalf("first state %+v, want a", got)
		}
		time.Sleep(600 * time.Millisecond) // the counter's retention runs out
		if n, err := redis.Int(s.Do("EXISTS", s.NS+"election:{gone}:fence")); err != nil || n != 0 {
			t.Fatalf("the term counter still exists (%d, %v): the test needs it gone", n, err)
		}
		heldRead(t, hp)
		if err := lead.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case got, ok := <-seen:
			if !ok || got != (Leader{}) {
				t.Errorf("after the resign Observe sent %+v (open %v), want no leader", got, ok)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Observe sent nothing in 5 s after the resign, its own read held back")
		}
		hp.free()
		stop()
		for range seen {
		}
		b.Close(ctx)
	})
}
