package atomicredis

// Failover on a real cluster: each test starts a private cluster of three
// primaries and three replicas on loopback (it kills and stalls nodes, so
// it shares them with no other test), bounded in time. What is asserted is
// safety; what a particular call returns during the failover is only
// reported.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// pairGuard is a resource guarded by (fence, token) pairs: it admits a
// holder whose fence is higher than the highest it has seen, or equal to it
// with the same token (the same holder again). A fence-only guard ("not
// lower") would admit both holders of a fence handed out twice; this one
// turns the second away.
type pairGuard struct {
	mu    sync.Mutex
	fence int64
	token string
}

// enter reports whether the holder is admitted, and whether a fence-only
// guard in the same state would have admitted it.
func (g *pairGuard) enter(fence int64, token string) (admitted, fenceOnly bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fenceOnly = fence >= g.fence
	if fence > g.fence || fence == g.fence && token == g.token {
		g.fence, g.token = fence, token
		return true, fenceOnly
	}
	return false, fenceOnly
}

// The rule itself: higher fences enter, the same holder re-enters, a lower
// fence is refused by both guards, and a second holder of the same fence is
// refused by the pair guard where a fence-only guard lets it in.
func TestFailover_FencePairRule(t *testing.T) {
	var g pairGuard
	for _, c := range []struct {
		fence           int64
		token           string
		want, fenceOnly bool
	}{
		{1, "a", true, true},
		{2, "b", true, true},
		{2, "b", true, true},  // the holder of fence 2, again
		{2, "c", false, true}, // fence 2 handed out twice: the second comer
		{1, "a", false, false},
		{3, "c", true, true},
	} {
		got, fenceOnly := g.enter(c.fence, c.token)
		if got != c.want || fenceOnly != c.fenceOnly {
			t.Errorf("enter(%d, %q) = %v (fence-only %v), want %v (%v)", c.fence, c.token, got, fenceOnly, c.want, c.fenceOnly)
		}
	}
}

// clusterNode is one redis-server of a private cluster.
type clusterNode = testserver.Redis

// privateCluster is three primaries and three replicas that one test owns.
type privateCluster struct {
	t     *testing.T
	nodes []*clusterNode
}

// startPrivateCluster starts six cluster-enabled redis-servers on free
// loopback ports (testserver.StartClusterNode), joins them with redis-cli
// --cluster create (one replica per primary), and waits until the cluster
// is healthy. cluster-node-timeout is 1 s, and a replica may always take
// over (cluster-replica-validity-factor 0). The processes die with the
// test. It is heavy (a minute or more for the tests that use it): it runs
// only in a full run.
func startPrivateCluster(t *testing.T) *privateCluster {
	t.Helper()
	if !testserver.Full() || testing.Short() {
		t.Skip("failover tests start private clusters: they run in a full run (REDIS_ADDR set), without -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server on PATH: failover tests need a private cluster")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("no redis-cli on PATH: failover tests need it to create a cluster")
	}
	pc := &privateCluster{t: t}
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, n := range pc.nodes {
			n.Kill()
		}
		if t.Failed() {
			for _, n := range pc.nodes {
				t.Logf("log of %s (last lines):\n%s", n.Addr(), n.LastLog(15))
			}
		}
	})
	for i := 0; i < 6; i++ {
		n, err := testserver.StartClusterNode(filepath.Join(dir, strconv.Itoa(i)),
			"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0",
			"--enable-debug-command", "local")
		if err != nil {
			t.Fatal(err)
		}
		pc.nodes = append(pc.nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range pc.nodes {
		args = append(args, n.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	pc.waitHealthy(t, 60*time.Second)
	return pc
}

// restart starts a killed node again on its port and directory; its
// nodes.conf there keeps its identity, so it rejoins.
func (pc *privateCluster) restart(n *clusterNode) {
	pc.t.Helper()
	if err := n.Start(); err != nil {
		pc.t.Fatal(err)
	}
}

// addrs are every node's address: seeds for a client.
func (pc *privateCluster) addrs() []string {
	var out []string
	for _, n := range pc.nodes {
		out = append(out, n.Addr())
	}
	return out
}

func (pc *privateCluster) node(addr string) *clusterNode {
	for _, n := range pc.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	pc.t.Fatalf("no node %s", addr)
	return nil
}

// owner is the primary serving slot, and its replica (nil if it has none),
// as every live node agrees; ok is false while they do not.
func (pc *privateCluster) owner(slot int) (primary, replica *clusterNode, ok bool) {
	var agreed string
	for _, n := range pc.nodes {
		if !n.Alive() {
			continue
		}
		v, err := redis.Values(n.Do("CLUSTER", "SLOTS"))
		if err != nil {
			return nil, nil, false
		}
		found := ""
		for _, r := range v {
			rv, _ := redis.Values(r, nil)
			from, _ := redis.Int(rv[0], nil)
			to, _ := redis.Int(rv[1], nil)
			if slot < from || slot > to {
				continue
			}
			var addrs []string
			for _, nd := range rv[2:] {
				ndv, _ := redis.Values(nd, nil)
				host, _ := redis.String(ndv[0], nil)
				port, _ := redis.Int(ndv[1], nil)
				addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(port)))
			}
			found = strings.Join(addrs, ",")
		}
		if found == "" || agreed != "" && found != agreed {
			return nil, nil, false
		}
		agreed = found
	}
	addrs := strings.Split(agreed, ",")
	if len(addrs) > 1 {
		replica = pc.node(addrs[1])
	}
	return pc.node(addrs[0]), replica, true
}

// replicaOf is the replica of primary p, by p's INFO replication.
func (pc *privateCluster) replicaOf(p *clusterNode) *clusterNode {
	pc.t.Helper()
	info, err := redis.String(p.Do("INFO", "replication"))
	if err != nil {
		pc.t.Fatal(err)
	}
	for _, line := range splitLines(info) {
		if rest, ok := strings.CutPrefix(line, "slave0:"); ok {
			var ip, port string
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "ip":
					ip = v
				case "port":
					port = v
				}
			}
			return pc.node(net.JoinHostPort(ip, port))
		}
	}
	pc.t.Fatalf("%s has no replica:\n%s", p.Addr(), info)
	return nil
}

// waitHealthy waits until every node runs and says cluster_state:ok, three
// primaries serve the slots, and each has a replica that has caught up
// (testcluster.NotReady: its link up, online for its primary, at its
// primary's offset: not in a full resync, which WAIT would count as no
// acknowledgement). It fails the test naming what was not.
func (pc *privateCluster) waitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := pc.unhealthy()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not healthy after %v: %s", within, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (pc *privateCluster) unhealthy() string {
	primaries, synced := 0, 0
	for _, n := range pc.nodes {
		if !n.Alive() {
			return n.Addr() + " is down"
		}
		info, err := redis.String(n.Do("CLUSTER", "INFO"))
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:6") {
			return fmt.Sprintf("%s: %v %s", n.Addr(), err, info)
		}
		repl, err := redis.String(n.Do("INFO", "replication"))
		if err != nil {
			return err.Error()
		}
		switch {
		case strings.Contains(repl, "role:master"):
			primaries++
		case strings.Contains(repl, "master_link_status:up") && strings.Contains(repl, "master_sync_in_progress:0"):
			synced++
		}
	}
	if primaries != 3 || synced != 3 {
		return fmt.Sprintf("%d primaries, %d replicas in sync", primaries, synced)
	}
	for slot := 0; slot < 16384; slot += 5461 {
		if _, _, ok := pc.owner(slot); !ok {
			return fmt.Sprintf("nodes disagree on slot %d", slot)
		}
	}
	return testcluster.NotReady(pc.addrs())
}

// waitOwner waits until every live node agrees that slot has a primary
// other than old, and returns it.
func (pc *privateCluster) waitOwner(slot int, old *clusterNode, within time.Duration) *clusterNode {
	pc.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if p, _, ok := pc.owner(slot); ok && p != old {
			if role, _ := redis.Values(p.Do("ROLE")); len(role) > 0 && string(role[0].([]byte)) == "master" {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	pc.t.Fatalf("slot %d still without a new primary after %v", slot, within)
	return nil
}

// lockFigures are what a failover run counts.
type lockFigures struct {
	grants, errs, notReplicated int64
	overlaps                    int // sections of one name that overlapped
	duplicates                  int // fences handed to two tokens
	refused, refusedEqual       int // turned away by the pair guard; of which at an equal fence
	fenceOnlyAdmits             int // of those refused, how many a fence-only guard would admit
	resumedAfter                time.Duration
}

// grantLog is what a run records per name.
type grantLog struct {
	mu       sync.Mutex
	guard    pairGuard
	sections []section
	tokens   map[int64]string // fence -> first token seen
	dupes    int
	refused  [2]int // [lower, equal]
	fenceOK  int
	last     time.Time // last grant
}

// hammer runs 16 goroutines locking and unlocking names (each hold 1 ms,
// checked in at a pairGuard) until stop is closed, and returns the logs;
// wait returns when the goroutines have.
func hammer(e *Engine, names []string, stop <-chan struct{}) (logs map[string]*grantLog, errs, notReplicated *atomic.Int64, lastErr *atomic.Value, wait func()) {
	logs = map[string]*grantLog{}
	for _, n := range names {
		logs[n] = &grantLog{tokens: map[int64]string{}}
	}
	errs, notReplicated, lastErr = &atomic.Int64{}, &atomic.Int64{}, &atomic.Value{}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := names[rand.N(len(names))]
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				l, err := e.Lock(ctx, name, LockOptions{TTL: 2 * time.Second, Wait: 3 * time.Second})
				if err != nil {
					cancel()
					errs.Add(1)
					if errors.Is(err, ErrNotReplicated) {
						notReplicated.Add(1)
					}
					lastErr.Store(err.Error())
					time.Sleep(5 * time.Millisecond)
					continue
				}
				start := time.Now()
				lg := logs[name]
				lg.mu.Lock()
				if tok, ok := lg.tokens[l.Fence()]; ok && tok != l.Token() {
					lg.dupes++
				} else {
					lg.tokens[l.Fence()] = l.Token()
				}
				ok, fenceOnly := lg.guard.enter(l.Fence(), l.Token())
				if !ok {
					if l.Fence() == lg.guard.fence {
						lg.refused[1]++
					} else {
						lg.refused[0]++
					}
					if fenceOnly {
						lg.fenceOK++
					}
				}
				lg.last = start
				lg.mu.Unlock()
				time.Sleep(time.Millisecond)
				end := time.Now()
				l.Unlock(ctx)
				cancel()
				lg.mu.Lock()
				lg.sections = append(lg.sections, section{start: start, end: end, valid: true})
				lg.mu.Unlock()
			}
		}()
	}
	return logs, errs, notReplicated, lastErr, wg.Wait
}

// failoverEngine is an engine on a private cluster through redisc.
func failoverEngine(t *testing.T, pc *privateCluster, ns string, opts ...Option) *Engine {
	rc := testcluster.Client(t, pc.addrs())
	e := New(testcluster.Pool{Cluster: rc}, append([]Option{WithNamespace(ns)}, opts...)...)
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// kill -9 a primary while 16 goroutines lock and unlock 64 names with
// fences. With WithReplicaAck(1, ...) no two holders overlap and no fence
// is handed out twice; the promoted replica has no replica of its own, so
// its slots grant nothing (ErrNotReplicated) until the killed node is
// restarted and rejoins as its replica, and then traffic resumes. Without
// the ack, traffic resumes as soon as the replica is promoted, and fences
// may be handed out twice (the replica had not received the last grants):
// the pair guard turns every second comer away; the count is reported. The
// killed node is restarted and rejoins as a replica before the next run.
func TestFailover_Kill(t *testing.T) {
	pc := startPrivateCluster(t)
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprint("k", i)
	}
	for _, v := range []struct {
		name string
		opts []Option
	}{
		{"WithReplicaAck", []Option{WithReplicaAck(1, 500*time.Millisecond)}},
		{"no ack", nil},
	} {
		t.Run(v.name, func(t *testing.T) {
			pc.waitHealthy(t, 60*time.Second) // no replica in a full resync: WAIT would count it out
			ns := testNamespace()
			e := failoverEngine(t, pc, ns, v.opts...)
			victim, _, ok := pc.owner(int(keySlot(names[0])))
			if !ok {
				t.Fatal("no agreed owner for the first name's slot")
			}
			var onVictim []string
			for _, n := range names {
				if p, _, _ := pc.owner(int(keySlot(n))); p == victim {
					onVictim = append(onVictim, n)
				}
			}
			probe := "" // a name on the victim's slots nobody else takes
			for i := 0; probe == ""; i++ {
				if p, _, _ := pc.owner(int(keySlot(fmt.Sprint("probe", i)))); p == victim {
					probe = fmt.Sprint("probe", i)
				}
			}
			stop := make(chan struct{})
			logs, errs, notRepl, lastErr, wait := hammer(e, names, stop)
			time.Sleep(1500 * time.Millisecond)
			killed := time.Now()
			victim.Kill()
			promoted := pc.waitOwner(int(keySlot(names[0])), victim, 20*time.Second)
			promotedAt := time.Since(killed)
			ack := len(v.opts) > 0
			// With the ack, the promoted replica has no replica of its own
			// until the killed node is back: nothing on its slots can be
			// acknowledged, so nothing is granted there.
			var restarted time.Duration
			if ack {
				// A grant there is made, not acknowledged, and abandoned.
				ctx := ctxT(t)
				if _, err := e.TryLock(ctx, probe, LockOptions{}); !errors.Is(err, ErrNotReplicated) {
					t.Errorf("TryLock on the promoted primary without a replica: %v, want ErrNotReplicated", err)
				}
				plain := failoverEngine(t, pc, ns)
				for deadline := time.Now().Add(2 * time.Second); ; {
					held, err := plain.IsLocked(ctx, probe)
					if err == nil && !held {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("the unacknowledged grant still held after 2s (%v)", err)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(time.Second)
				restarted = time.Since(killed)
				pc.restart(victim)
				pc.waitHealthy(t, 60*time.Second)
			}
			// Traffic resumes: a grant on one of the victim's names after the
			// promotion (with the ack, after the restart).
			from := killed.Add(max(promotedAt, restarted))
			resumed := time.Duration(0)
			for deadline := time.Now().Add(20 * time.Second); resumed == 0 && time.Now().Before(deadline); {
				for _, n := range onVictim {
					lg := logs[n]
					lg.mu.Lock()
					if lg.last.After(from) {
						resumed = lg.last.Sub(killed)
					}
					lg.mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(time.Second)
			close(stop)
			wait()
			unreplicated := 0 // grants on the victim's names while its slots had no replica
			if ack {
				for _, n := range onVictim {
					for _, sec := range logs[n].sections {
						if sec.start.After(killed.Add(promotedAt)) && sec.start.Before(killed.Add(restarted)) {
							unreplicated++
						}
					}
				}
			}

			var f lockFigures
			for _, lg := range logs {
				lg.mu.Lock()
				f.grants += int64(len(lg.sections))
				f.overlaps += overlapsAmongValid(lg.sections)
				f.duplicates += lg.dupes
				f.refused += lg.refused[0] + lg.refused[1]
				f.refusedEqual += lg.refused[1]
				f.fenceOnlyAdmits += lg.fenceOK
				lg.mu.Unlock()
			}
			f.errs, f.notReplicated, f.resumedAfter = errs.Load(), notRepl.Load(), resumed
			last, _ := lastErr.Load().(string)
			t.Logf("%s: killed %s (%d of 64 names); %s promoted after %v; traffic on its names resumed %v after the kill",
				v.name, victim.Addr(), len(onVictim), promoted.Addr(), promotedAt.Round(time.Millisecond), resumed.Round(time.Millisecond))
			t.Logf("%s: %d grants, %d errors (%d ErrNotReplicated; last: %s), %d overlapping sections, %d fences handed out twice, %d holders turned away by the (fence, token) guard (%d at an equal fence; a fence-only guard would have admitted %d)",
				v.name, f.grants, f.errs, f.notReplicated, last, f.overlaps, f.duplicates, f.refused, f.refusedEqual, f.fenceOnlyAdmits)
			if ack {
				t.Logf("%s: %d grants on its names between the promotion and the restart %v after the kill", v.name, unreplicated, restarted.Round(time.Millisecond))
				if unreplicated != 0 {
					t.Errorf("%d grants on slots whose primary had no replica", unreplicated)
				}
			}
			if resumed == 0 {
				t.Errorf("no grant on the killed primary's names within 20s of the promotion (and restart)")
			}
			if f.duplicates > 0 && f.refused < f.duplicates {
				t.Errorf("%d duplicate fences but only %d holders turned away", f.duplicates, f.refused)
			}
			if len(v.opts) > 0 && (f.overlaps != 0 || f.duplicates != 0 || f.refused != 0) {
				t.Errorf("with WithReplicaAck: %d overlaps, %d duplicate fences, %d refusals; want none", f.overlaps, f.duplicates, f.refused)
			}

			if !ack {
				pc.restart(victim) // rejoins as a replica of the promoted node
				pc.waitHealthy(t, 60*time.Second)
			}
		})
	}
}

// DEBUG SLEEP a primary past the node timeout: a client's TryLock reaches
// it while it sleeps; its replica is promoted, and a second client takes
// the lock there; then the old primary wakes. With WithReplicaAck(1, ...)
// the first client gets an error (its grant, if the old primary made one,
// is not acknowledged and is abandoned) and the second holds alone. Without
// it, the old primary may grant the lock again with the same fence: the
// test shows the stale grant when it happens, and that the (fence, token)
// guard turns it away (it arrives second), where a fence-only guard would
// let it in. (Had the promoted replica lost more than the last grants, the
// fences would differ, and the guard lets only the higher one in from
// then on.)
func TestFailover_Stall(t *testing.T) {
	pc := startPrivateCluster(t)
	const name = "stalled"
	slot := int(keySlot(name))
	for _, v := range []struct {
		name string
		ack  bool
	}{{"WithReplicaAck", true}, {"no ack", false}} {
		t.Run(v.name, func(t *testing.T) {
			pc.waitHealthy(t, 60*time.Second) // no replica in a full resync: WAIT would count it out
			ns := testNamespace()
			var opts []Option
			if v.ack {
				opts = append(opts, WithReplicaAck(1, 500*time.Millisecond))
			}
			first := failoverEngine(t, pc, ns, opts...)
			ctx := ctxT(t)
			old, _, ok := pc.owner(slot)
			if !ok {
				t.Fatal("no agreed owner")
			}
			replica := pc.replicaOf(old)
			// A few grants, replicated: the lock's hash (its free value "-
			// fence") is the same on both nodes before the stall.
			for i := 0; i < 3; i++ {
				l, err := first.TryLock(ctx, name, LockOptions{})
				if err != nil {
					t.Fatal(err)
				}
				l.Unlock(ctx)
			}
			lockKey := ns + "lock:{" + name + "}"
			want, err := redis.String(old.Do("HGET", lockKey, "v"))
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; {
				c, err := redis.Dial("tcp", replica.Addr())
				if err != nil {
					t.Fatal(err)
				}
				c.Do("READONLY")
				got, _ := redis.String(c.Do("HGET", lockKey, "v"))
				c.Close()
				if got == want {
					break
				}
				if time.Now().After(deadline) {
					info, _ := redis.String(replica.Do("INFO", "replication"))
					t.Fatalf("the replica's lock is %q, the primary's %q, after 10s:\n%s", got, want, info)
				}
				time.Sleep(10 * time.Millisecond)
			}

			slept := make(chan error, 1)
			go func() {
				c, err := redis.Dial("tcp", old.Addr(), redis.DialReadTimeout(30*time.Second))
				if err == nil {
					_, err = c.Do("DEBUG", "SLEEP", 5)
					c.Close()
				}
				slept <- err
			}()
			time.Sleep(200 * time.Millisecond) // the primary is asleep
			type result struct {
				l   *Lock
				err error
			}
			res := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				l, err := first.TryLock(ctx, name, LockOptions{TTL: time.Minute})
				res <- result{l, err}
			}()

			promoted := pc.waitOwner(slot, old, 10*time.Second)
			if promoted != replica {
				t.Fatalf("promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
			}
			second := New(newPool(t, promoted.Addr()), WithNamespace(ns))
			l2, err := second.TryLock(ctx, name, LockOptions{TTL: time.Minute})
			if err != nil {
				t.Fatalf("TryLock on the promoted replica: %v", err)
			}
			var guard pairGuard
			if ok, _ := guard.enter(l2.Fence(), l2.Token()); !ok {
				t.Fatal("the guard refused the first holder")
			}
			r := <-res
			if err := <-slept; err != nil {
				t.Logf("DEBUG SLEEP: %v", err)
			}
			switch {
			case r.err != nil:
				t.Logf("%s: the client of the stalled primary got: %v", v.name, r.err)
			default:
				ok, fenceOnly := guard.enter(r.l.Fence(), r.l.Token())
				t.Logf("%s: stale grant: the stalled primary granted fence %d after the promoted replica granted fence %d; (fence, token) guard admits it: %v; a fence-only guard: %v",
					v.name, r.l.Fence(), l2.Fence(), ok, fenceOnly)
				switch again, _ := guard.enter(l2.Fence(), l2.Token()); {
				case r.l.Fence() == l2.Fence() && ok:
					t.Errorf("the (fence, token) guard admitted a second holder of fence %d", l2.Fence())
				case ok == again:
					// Different fences (the promoted replica had lost more
					// than the last grant): the guard orders them, and only
					// the higher one may use the resource now.
					t.Errorf("fences %d (stale) and %d: the guard now admits both or neither", r.l.Fence(), l2.Fence())
				}
				if v.ack {
					t.Errorf("WithReplicaAck: the stalled primary's grant (fence %d) was returned as acknowledged", r.l.Fence())
				}
			}
			if held, err := l2.Held(ctx); err != nil || !held {
				t.Errorf("the promoted replica's holder: held %v, %v; want held", held, err)
			}
			if err := first.Close(ctx); err != nil { // pending abandons done
				t.Fatal(err)
			}
			if held, err := l2.Held(ctx); err != nil || !held {
				t.Errorf("after the abandons, the holder: held %v, %v; want held alone", held, err)
			}
			if err := l2.Unlock(ctx); err != nil {
				t.Errorf("Unlock of the holder: %v", err)
			}
			pc.waitHealthy(t, 60*time.Second)
		})
	}
}

// A slot moving to another primary while its lock is held and a Lock waits
// on it: during the move, the lock's one key is served where it is (the
// old primary, until MIGRATE moves it: TryLock finds it held), and a call
// that meets it gone gets ASK (the engine does not follow ASK: a bound
// connection cannot send ASKING), which is transient: TryLock fails at
// once with nothing changed, a Lock with Wait tries again. Once the slot is
// the other primary's, MOVED is followed, and the waiter takes the lock
// there with the next fence: the counter moved with the slot.
func TestFailover_ClusterReshard(t *testing.T) {
	pc := startPrivateCluster(t)
	const name = "moving"
	slot := int(keySlot(name))
	src, _, _ := pc.owner(slot)
	var dst *clusterNode
	var primaries []*clusterNode
	for _, n := range pc.nodes {
		if role, _ := redis.Values(n.Do("ROLE")); len(role) > 0 && string(role[0].([]byte)) == "master" {
			primaries = append(primaries, n)
			if n != src && dst == nil {
				dst = n
			}
		}
	}
	if dst == nil {
		t.Fatal("no other primary")
	}
	ns := testNamespace()
	e := failoverEngine(t, pc, ns)
	ctx := ctxT(t)
	held, err := e.TryLock(ctx, name, LockOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id := func(n *clusterNode) string { v, _ := redis.String(n.Do("CLUSTER", "MYID")); return v }
	srcID, dstID := id(src), id(dst)
	if _, err := dst.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", srcID); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", dstID); err != nil {
		t.Fatal(err)
	}

	_, err = e.TryLock(ctx, name, LockOptions{})
	t.Logf("TryLock while the slot migrates: %v", err)
	if err == nil || !transient(err) && !errors.Is(err, ErrNotAcquired) {
		t.Errorf("TryLock mid-migration: %v, want the lock held (its key not moved yet) or a transient error (TRYAGAIN or ASK)", err)
	}
	waited := make(chan error, 1)
	var got *Lock
	go func() {
		l, err := e.Lock(ctx, name, LockOptions{Wait: 20 * time.Second})
		got = l
		waited <- err
	}()
	time.Sleep(500 * time.Millisecond) // the waiter meets the migration

	keys, err := redis.Strings(src.Do("CLUSTER", "GETKEYSINSLOT", slot, 1000))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(dst.Addr())
	if len(keys) > 0 {
		args := []any{host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if _, err := src.Do("MIGRATE", args...); err != nil {
			t.Fatalf("MIGRATE %q: %v", keys, err)
		}
	}
	// The new owner first, then the old one, then the rest (as redis-cli
	// --cluster reshard does).
	sort.SliceStable(primaries, func(i, j int) bool { return primaries[i] == dst || primaries[i] == src && primaries[j] != dst })
	for _, n := range primaries {
		if _, err := n.Do("CLUSTER", "SETSLOT", slot, "NODE", dstID); err != nil {
			t.Fatalf("SETSLOT NODE on %s: %v", n.Addr(), err)
		}
	}
	t.Logf("moved slot %d (%d keys) from %s to %s", slot, len(keys), src.Addr(), dst.Addr())

	if err := <-waited; err != nil {
		t.Fatalf("Lock across the move: %v", err)
	}
	if got.Fence() != held.Fence()+1 {
		t.Errorf("fence after the move %d, want %d: the counter must move with the slot", got.Fence(), held.Fence()+1)
	}
	if n, _ := redis.Int(dst.Do("EXISTS", ns+"lock:{"+name+"}")); n != 1 {
		t.Errorf("the lock is not on the slot's new primary %s", dst.Addr())
	}
	if err := got.Unlock(ctx); err != nil {
		t.Errorf("Unlock after the move: %v", err)
	}
}
