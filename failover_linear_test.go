package atomicredis

// Histories checked across a failover: the lock, semaphore and election
// workloads of linear_test.go on a private 3+3 cluster while one primary
// is killed (kill -9) under them, with and without WithReplicaAck. The
// killed primary's names see the failover as a model event of
// linear.LockReplicated and its siblings: the object comes back as it was
// at some instant no earlier than the last write a replica is known to
// have had (a grant, with the ack on, or a Sync: a write of the test's own
// that WAIT saw on the replica). Each history must be linearizable under
// that model; each of the killed primary's names is checked again under
// one where a failover loses nothing and one where it loses only what
// nobody was told of: what fails there is what the failover lost, counted
// and shown. Beside them, every lock and leadership granted writes to a
// store that admits only by the (fence, token) rule. docs/failover.md has
// the figures.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/atomicredis/atomicredis/internal/linear"
	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// failoverRuns is how many runs (one failover each) each variant makes:
// 20 with ATOMICREDIS_FAILOVER_LONG=1, else 1.
func failoverRuns() int {
	if os.Getenv("ATOMICREDIS_FAILOVER_LONG") == "1" {
		return 20
	}
	return 1
}

// guardedStore is a store that admits a holder's write by the (fence,
// token) rule, per name.
type guardedStore struct {
	mu                                sync.Mutex
	guards                            map[string]*pairGuard
	last                              map[string][2]any // name -> the last admitted (fence, token)
	writes, refused, fenceOnly, stale int
}

func newGuardedStore() *guardedStore {
	return &guardedStore{guards: map[string]*pairGuard{}, last: map[string][2]any{}}
}

// write is a holder's write. A stale write is one admitted after a write
// of another holder with the same fence or a higher one.
func (g *guardedStore) write(name string, fence int64, token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pg := g.guards[name]
	if pg == nil {
		pg = &pairGuard{}
		g.guards[name] = pg
	}
	g.writes++
	ok, fenceOnly := pg.enter(fence, token)
	if !ok {
		g.refused++
		if fenceOnly {
			g.fenceOnly++
		}
		return
	}
	if l, seen := g.last[name]; seen && (l[0].(int64) > fence || l[0].(int64) == fence && l[1].(string) != token) {
		g.stale++
	}
	g.last[name] = [2]any{fence, token}
}

// failoverModel is one workload of a run: its rig, its cycle and its
// models.
type failoverModel struct {
	name    string
	rig     *linearRig
	cycle   func(*linearClient)
	model   func(linear.Acks) porcupine.Model
	restart func() porcupine.Model // the model a restart would be (nil: not tried; a semaphore's restart loses its limit too)
	event   func(op linear.Op) (linear.Input, any)
}

// failoverTally is what the runs of one variant add up to.
type failoverTally struct {
	runs, ops, lossy, lossyNames, told, toldNames, restartNames, victimNames, doubles int
	checked                                                                           time.Duration
	store                                                                             *guardedStore
}

// TestFailover_KillHistories: each run records the lock, semaphore and
// election workloads (3 engines, 2 clients each a workload) on a private
// 3+3 cluster; after 1.5 s their names stop moving on and half the
// holdings last up to 6 s, and 0.3 s later the primary of a name is
// killed with kill -9; in every other run (the first included) its
// replica first misses the last 300 ms (stopped, its link cut). The run
// goes on until traffic has resumed on the killed primary's names for
// 1.5 s (with the ack, after the killed node is back as a replica: until
// then its slots grant nothing). Every history must be linearizable under
// the model of a failover that loses only what no replica acknowledged,
// and the guarded store must admit no stale write; what stricter models
// reject, fences handed out twice and what the store turned away are
// counted and logged. One run a variant; 20 with
// ATOMICREDIS_FAILOVER_LONG=1.
func TestFailover_KillHistories(t *testing.T) {
	pc := startPrivateCluster(t)
	measureAck(t, pc)
	for _, v := range []struct {
		name string
		acks linear.Acks
		opts []Option
	}{
		{"WithReplicaAck", linear.GrantsAcked, []Option{WithReplicaAck(1, 500*time.Millisecond)}},
		{"no ack", linear.NoneAcked, nil},
	} {
		t.Run(v.name, func(t *testing.T) {
			var tallies [2]*failoverTally // plain kill, link cut first
			for i := range tallies {
				tallies[i] = &failoverTally{store: newGuardedStore()}
			}
			for i := 0; i < failoverRuns(); i++ {
				cut := i%2 == 0
				killHistoriesRun(t, pc, v.acks, v.opts, cut, tallies[b2i(cut)])
				if t.Failed() {
					break
				}
			}
			for i, tally := range tallies {
				if tally.runs == 0 {
					continue
				}
				kind := [...]string{"kill", "link cut, then kill"}[i]
				s := tally.store
				t.Logf("%s, %s: %d runs (a failover each), %d operations, linearizable across the failover (%s) in %v of checking; of %d names on a killed primary, %d had a history a failover that loses nothing would not explain (in %d of %d workload histories), %d one that loses only what nobody was told of would not (in %d); the restart model (every holding lost) rejected %d (locks and elections); %d fences or terms handed to two tokens; guarded store: %d writes, %d turned away (a fence-only store would have admitted %d), %d stale",
					v.name, kind, tally.runs, tally.ops, v.acks, tally.checked.Round(time.Millisecond), tally.victimNames, tally.lossyNames, tally.lossy, 3*tally.runs, tally.toldNames, tally.told, tally.restartNames, tally.doubles, s.writes, s.refused, s.fenceOnly, s.stale)
				if s.stale != 0 {
					t.Errorf("%s: %d stale writes admitted by the guarded store", kind, s.stale)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// measureAck logs what WithReplicaAck costs on the healthy cluster: a
// TryLock and its Unlock, one after another on one goroutine, p50 and
// p99, with and without the ack.
func measureAck(t *testing.T, pc *privateCluster) {
	pc.waitHealthy(t, 60*time.Second)
	ctx := ctxT(t)
	for _, v := range []struct {
		name string
		opts []Option
	}{{"no ack", nil}, {"WithReplicaAck(1, 500ms)", []Option{WithReplicaAck(1, 500*time.Millisecond)}}} {
		e := failoverEngine(t, pc, testNamespace(), v.opts...)
		var acq, rel []time.Duration
		for i := 0; i < 1100; i++ {
			name := "cost" + strconv.Itoa(i%64)
			start := time.Now()
			l, err := e.TryLock(ctx, name, LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mid := time.Now()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if i >= 100 { // warm
				acq, rel = append(acq, mid.Sub(start)), append(rel, time.Since(mid))
			}
		}
		p := func(ds []time.Duration, q float64) int64 {
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			return ds[int(q*float64(len(ds)-1))].Microseconds()
		}
		t.Logf("ack cost, %s: TryLock p50 %d µs, p99 %d µs; Unlock p50 %d µs (%d of each)", v.name, p(acq, 0.5), p(acq, 0.99), p(rel, 0.5), len(acq))
	}
}

// killHistoriesRun is one run: one failover.
func killHistoriesRun(t *testing.T, pc *privateCluster, acks linear.Acks, opts []Option, cut bool, tally *failoverTally) {
	began := time.Now()
	pc.waitHealthy(t, 60*time.Second)
	t.Logf("cluster healthy in %v", time.Since(began).Round(time.Millisecond))
	ns := testNamespace()
	rig := failoverRigs(t, pc, ns, opts, tally.store)
	workloads, stopObservers := failoverWorkloads(rig)
	defer stopObservers()

	victim, _, ok := pc.owner(int(keySlot("l0")))
	if !ok {
		t.Fatal("no agreed owner of the first name's slot")
	}
	replica := pc.replicaOf(victim)
	onVictim := victimSlots(t, victim)
	syncKey := ""
	for i := 0; syncKey == ""; i++ {
		if k := fmt.Sprint(ns, "sync", i); onVictim[keySlot(k)] {
			syncKey = k
		}
	}

	stopSync, syncs := recordSyncs(victim, syncKey, workloads)

	stopClients := startClients(workloads)

	time.Sleep(1500 * time.Millisecond)
	// From here until traffic has resumed on the killed primary's names,
	// the names stay those of the current windows, and half the holdings
	// last up to 6 s: some are taken before the failover and released
	// after it.
	for _, w := range workloads {
		cycles := int64(linearCycles)
		if w.rig.window != 0 {
			cycles = w.rig.window
		}
		w.rig.freeze.Store(w.rig.cycles.Load()/cycles + 1)
		w.rig.long.Store(true)
	}
	time.Sleep(300 * time.Millisecond)
	stopSync() // the last Syncs: from here a write may be lost
	if cut {
		// The replica stops reading (SIGSTOP), and its link is cut, so that
		// it cannot reconnect: it misses what the primary writes from now
		// until the kill, as a replica cut off by the network would.
		if err := replica.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer replica.Signal(syscall.SIGCONT)
		if _, err := victim.Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	connected, _ := redis.String(victim.Do("INFO", "replication"))
	connected, _ = testserver.InfoField(connected, "connected_slaves")
	killed := time.Now()
	victim.Kill()
	// The Failover begins once the primary is dead, so that a call that
	// began after it never ran there; it takes effect when the replica
	// serves.
	calls := make([]linear.Call, len(workloads))
	for i, w := range workloads {
		calls[i] = w.rig.rec.Begin(1001)
	}
	if cut {
		if err := replica.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	promoted := pc.waitOwner(int(keySlot("l0")), victim, 20*time.Second)
	for i, w := range workloads {
		in, out := w.event(linear.Failover)
		calls[i].End(in, out)
	}
	promotedAfter := time.Since(killed)
	if acks == linear.GrantsAcked { // nothing on its slots is granted until it has a replica
		time.Sleep(time.Second)
		pc.restart(victim)
		pc.waitHealthy(t, 60*time.Second)
	}
	resumed := time.Since(killed)
	time.Sleep(500 * time.Millisecond)
	for _, w := range workloads {
		w.rig.freeze.Store(0)
		w.rig.long.Store(false)
	}
	time.Sleep(time.Second)
	stopped := time.Now()
	stopClients()
	stopObservers()
	t.Logf("clients and observers stopped in %v", time.Since(stopped).Round(time.Millisecond))
	if acks != linear.GrantsAcked {
		pc.restart(victim) // rejoins as the promoted node's replica
	}
	t.Logf("run (link cut first: %v): killed %s (replicas connected at the kill: %s) after %d syncs; its replica %s promoted %v after the kill (%s); traffic on its slots again %v after it",
		cut, victim.Addr(), connected, syncs.Load(), replica.Addr(), promotedAfter.Round(time.Millisecond), promoted.Addr(), resumed.Round(time.Millisecond))

	tally.add(t, acks, workloads, func(name string) bool { return onVictim[keySlot(name)] })
}

// failoverRigs makes a run's three engines on pc, in namespace ns, and
// returns a func that makes a rig on them whose grants write to store.
func failoverRigs(t *testing.T, pc *privateCluster, ns string, opts []Option, store *guardedStore) func() *linearRig {
	rc := testcluster.Client(t, pc.addrs())
	// The test's own commands (an election's term counter) ride out the
	// failover.
	s := &testserver.Server{Name: "3+3 cluster", NS: ns, T: t, DoFunc: func(cmd string, args ...any) (any, error) {
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			c := rc.Get()
			var v any
			v, err = c.Do(cmd, args...)
			c.Close()
			if err == nil {
				return v, nil
			}
		}
		return nil, err
	}}
	var es []*Engine
	for i := 0; i < 3; i++ {
		e := failoverEngine(t, pc, ns, opts...)
		e.queueTTL = linearLease
		es = append(es, e)
	}
	return func() *linearRig {
		return &linearRig{t: t, s: s, rec: linear.NewRecorder(), t0: time.Now(), es: es, guard: func(name string, fence int64, token string) {
			store.write(ns+name, fence, token) // a run's names are its own
		}}
	}
}

// add checks a run's histories (mine: the killed primary's names) and
// adds up what they show.
func (tally *failoverTally) add(t *testing.T, acks linear.Acks, workloads []*failoverModel, mine func(string) bool) {
	tally.runs++
	for _, w := range workloads {
		ops := linear.AcrossRestarts(linear.Spread(w.rig.rec.Operations(), mine))
		tally.ops += len(ops)
		start := time.Now()
		linear.Check(t, w.name+" across a failover ("+acks.String()+")", w.model(acks), linear.ReopenAbandoned(ops), linearCheck)
		tally.checked += time.Since(start)
		lossy, told, names := lostInFailover(t, w, ops, mine)
		tally.victimNames += names
		tally.lossyNames += lossy
		tally.toldNames += told
		if lossy > 0 {
			tally.lossy++
		}
		if told > 0 {
			tally.told++
		}
		if w.restart != nil {
			tally.restartNames += restartRejects(w, ops)
		}
		tally.doubles += handedTwice(t, w.name, ops)
	}
}

// failoverWorkloads are a run's three workloads on rigs rig makes, and a
// func that stops the election's observers and waits for them.
func failoverWorkloads(rig func() *linearRig) ([]*failoverModel, func()) {
	var limited, counted sync.Map
	obs := &observers{seen: map[string][][]Leader{}}
	var cancel context.CancelFunc
	obs.ctx, cancel = context.WithCancel(context.Background())
	workloads := []*failoverModel{
		{name: "lock", rig: rig(), cycle: lockCycle, model: linear.LockReplicated, restart: linear.Lock,
			event: func(op linear.Op) (linear.Input, any) {
				return linear.LockIn{Op: op}, linear.LockOut{Result: linear.Ok}
			}},
		{name: "semaphore", rig: rig(), model: linear.SemaphoreReplicated,
			cycle: func(c *linearClient) { semCycle(c, &limited) },
			event: func(op linear.Op) (linear.Input, any) { return linear.SemIn{Op: op}, linear.SemOut{Result: linear.Ok} }},
		{name: "election", rig: rig(), model: linear.ElectionReplicated, restart: linear.Election,
			cycle: func(c *linearClient) { electionCycle(c, &counted, obs) },
			event: func(op linear.Op) (linear.Input, any) {
				return linear.ElectionIn{Op: op}, linear.ElectionOut{Result: linear.Ok}
			}},
	}
	workloads[1].rig.guard = nil // permits have no single holder to fence
	workloads[2].rig.names = electionNames
	return workloads, func() { cancel(); obs.wg.Wait() }
}

// startClients runs each workload's cycle on two clients an engine
// until stop is called, which waits for them. While a rig's names are
// frozen, each client pauses 50 ms a cycle, to keep their histories short.
func startClients(workloads []*failoverModel) (stop func()) {
	stopping := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range workloads {
		for i := 0; i < 2*len(w.rig.es); i++ {
			c := &linearClient{r: w.rig, id: i, e: w.rig.es[i%len(w.rig.es)]}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stopping:
						return
					default:
					}
					w.cycle(c)
					if w.rig.freeze.Load() != 0 {
						time.Sleep(50 * time.Millisecond)
					}
				}
			}()
		}
	}
	return func() { close(stopping); wg.Wait() }
}

// recordSyncs writes key on the victim every 20 ms and records a Sync in
// each workload's history when WAIT saw the write on the replica: from
// before the write was sent until its reply (a Sync takes effect there).
// stop stops it and waits; syncs counts the Syncs recorded.
func recordSyncs(victim *clusterNode, key string, workloads []*failoverModel) (stop func(), syncs *atomic.Int64) {
	stopping, done := make(chan struct{}), make(chan struct{})
	syncs = &atomic.Int64{}
	go func() {
		defer close(done)
		c, err := redis.Dial("tcp", victim.Addr(), redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(time.Second))
		if err != nil {
			return
		}
		defer c.Close()
		for {
			select {
			case <-stopping:
				return
			case <-time.After(20 * time.Millisecond):
			}
			calls := make([]linear.Call, len(workloads))
			for i, w := range workloads {
				calls[i] = w.rig.rec.Begin(1000)
			}
			if _, err := c.Do("SET", key, "x"); err != nil {
				return
			}
			ends := make([]func(), len(workloads))
			for i, w := range workloads {
				in, out := w.event(linear.Sync)
				ends[i] = func() { calls[i].End(in, out) }
			}
			if n, err := redis.Int(c.Do("WAIT", 1, 100)); err != nil || n < 1 {
				continue
			}
			for _, end := range ends {
				end()
			}
			syncs.Add(1)
		}
	}()
	return func() { close(stopping); <-done }, syncs
}

// victimSlots is the set of slots primary p serves.
func victimSlots(t *testing.T, p *clusterNode) map[uint16]bool {
	v, err := redis.Values(p.Do("CLUSTER", "SLOTS"))
	if err != nil {
		t.Fatal(err)
	}
	mine := map[uint16]bool{}
	for _, r := range v {
		rv, _ := redis.Values(r, nil)
		from, _ := redis.Int(rv[0], nil)
		to, _ := redis.Int(rv[1], nil)
		nd, _ := redis.Values(rv[2], nil)
		port, _ := redis.Int(nd[1], nil)
		if strings.HasSuffix(p.Addr(), ":"+strconv.Itoa(port)) {
			for s := from; s <= to; s++ {
				mine[uint16(s)] = true
			}
		}
	}
	return mine
}

// lostInFailover checks each of the killed primary's names alone under
// w's models where a failover loses nothing (lossy counts those that fail)
// and where it loses only writes nobody was told of (told: a grant,
// release or limit answered Ok came undone), of names; it logs the
// smallest failing history of each kind.
func lostInFailover(t *testing.T, w *failoverModel, ops []porcupine.Operation, mine func(string) bool) (lossy, told, names int) {
	var smallest [2][]porcupine.Operation
	for _, p := range w.model(linear.AllAcked).Partition(ops) {
		name := ""
		for _, op := range p {
			if n := partName(op.Input); n != "" {
				name = n
				break
			}
		}
		if !mine(name) {
			continue
		}
		names++
		for i, acks := range []linear.Acks{linear.AllAcked, linear.AnsweredAcked} {
			one := w.model(acks)
			one.Partition = nil
			if res, _ := linear.Verdict(one, p, linearCheck); res != porcupine.Ok {
				if i == 0 {
					lossy++
				} else {
					told++
				}
				if smallest[i] == nil || len(p) < len(smallest[i]) {
					smallest[i] = p
				}
			}
		}
	}
	for i, what := range []string{"a failover that loses nothing", "a failover that loses only what nobody was told of"} {
		if smallest[i] != nil {
			t.Logf("%s: %d of %d names on the killed primary have a history %s would not explain; the smallest, %d operations:\n%s",
				w.name, []int{lossy, told}[i], names, what, len(smallest[i]), linear.Describe(w.model(linear.AllAcked), smallest[i]))
		}
	}
	return lossy, told, names
}

func partName(in any) string {
	switch in := in.(type) {
	case linear.LockIn:
		return in.Name
	case linear.SemIn:
		return in.Name
	case linear.ElectionIn:
		return in.Name
	}
	return ""
}

// restartRejects is how many of the killed primary's names the restart
// model (every holding lost, fences on above) rejects, given the same
// failover as a Restart and no Sync.
func restartRejects(w *failoverModel, ops []porcupine.Operation) int {
	as := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		switch in := op.Input.(type) {
		case linear.LockIn:
			if in.Op == linear.Failover {
				in.Op = linear.Restart
			}
			op.Input = in
		case linear.SemIn:
			if in.Op == linear.Failover {
				in.Op = linear.Restart
			}
			op.Input = in
		case linear.ElectionIn:
			if in.Op == linear.Failover {
				in.Op = linear.Restart
			}
			op.Input = in
		}
		if opOf(op.Input) != linear.Sync {
			as = append(as, op)
		}
	}
	m := w.restart()
	one := m
	one.Partition = nil
	n := 0
	for _, p := range m.Partition(as) {
		for _, op := range p {
			if opOf(op.Input) == linear.Restart {
				if res, _ := linear.Verdict(one, p, linearCheck/4); res != porcupine.Ok {
					n++
				}
				break
			}
		}
	}
	return n
}

func opOf(in any) linear.Op {
	switch in := in.(type) {
	case linear.LockIn:
		return in.Op
	case linear.SemIn:
		return in.Op
	case linear.ElectionIn:
		return in.Op
	}
	return -1
}

// handedTwice counts the fences (terms) ops show granted to two tokens of
// one name, and logs the first.
func handedTwice(t *testing.T, what string, ops []porcupine.Operation) int {
	type key struct {
		name  string
		fence int64
	}
	seen, n := map[key]string{}, 0
	for _, op := range ops {
		var k key
		var tok string
		switch in := op.Input.(type) {
		case linear.LockIn:
			out := op.Output.(linear.LockOut)
			if in.Op != linear.Acquire || out.Result != linear.Ok {
				continue
			}
			k, tok = key{in.Name, out.Fence}, in.Token
		case linear.SemIn:
			out := op.Output.(linear.SemOut)
			if in.Op != linear.Acquire || out.Result != linear.Ok {
				continue
			}
			k, tok = key{in.Name, out.Fence}, in.Token
		case linear.ElectionIn:
			out := op.Output.(linear.ElectionOut)
			if in.Op != linear.Acquire || out.Result != linear.Ok {
				continue
			}
			k, tok = key{in.Name, out.Term}, in.Token
		default:
			continue
		}
		if first, ok := seen[k]; ok && first != tok {
			n++
			if n == 1 {
				t.Logf("%s: %s's fence %d handed to %s and %s", what, k.name, k.fence, first, tok)
			}
			continue
		}
		seen[k] = tok
	}
	return n
}
