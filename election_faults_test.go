package atomicredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

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
func TestElectionUnderFaults(t *testing.T) {
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
		ch := es[candidates+i].Election("el", LockOptions{}).Observe(ctx)
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
			el := e.Election("el", LockOptions{TTL: lease})
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
