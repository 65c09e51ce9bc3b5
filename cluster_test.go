package atomicredis

// A real cluster: every call on a cluster-enabled node (REDIS_CLUSTER_ADDR),
// and how objects spread and calls travel on a multi-node cluster
// (REDIS_CLUSTER_ADDRS; internal/testcluster). The failover tests start
// clusters of their own (failover_test.go).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testcluster"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// Every operation on a cluster-enabled node (REDIS_CLUSTER_ADDR, one node
// serving every slot): a key outside the object's hash tag would fail with
// CROSSSLOT.
func TestCluster_Node(t *testing.T) {
	addr := testserver.ClusterNodeAddr()
	if addr == "" {
		t.Skip("REDIS_CLUSTER_ADDR not set: no cluster-enabled node")
	}
	s := testserver.Real(t, "cluster node", addr)
	if info, _ := s.Do("CLUSTER", "INFO"); !strings.Contains(string(info.([]byte)), "cluster_state:ok") {
		t.Fatalf("not a healthy cluster node: %s", info)
	}
	ctx, e := ctxT(t), engine(s)
	for _, c := range validCalls() {
		if err := c.run(ctx, e); err != nil {
			t.Errorf("%s on a cluster node: %v", c.name, err)
		}
	}
}

// spreadNames are object names whose slots fall on every primary of a
// three-primary cluster made by redis-cli --cluster create.
func spreadNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("spread", i)
	}
	return names
}

// Objects of every kind spread over all the primaries, and each of their
// keys lives on the primary that owns its slot, by CLUSTER KEYSLOT.
func TestCluster_Spread(t *testing.T) {
	s := clusterServer(t)
	ctx, e := ctxT(t), engine(s)
	for _, name := range spreadNames(24) {
		if _, err := e.TryLock(ctx, name, LockOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 2}); err != nil {
			t.Fatal(err)
		}
		if err := e.AddRecent(ctx, name, "item"); err != nil {
			t.Fatal(err)
		}
		if err := e.AddMembers(ctx, name, "a", "b"); err != nil {
			t.Fatal(err)
		}
		if err := e.MarkActive(ctx, name, "p", 7); err != nil {
			t.Fatal(err)
		}
	}
	rc := testcluster.Of(s)
	owners, err := testcluster.SlotOwners(rc)
	if err != nil {
		t.Fatal(err)
	}
	perNode, err := testcluster.NodeKeys(rc, s.NS+"*")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for addr, ks := range perNode {
		if len(ks) == 0 {
			t.Errorf("primary %s holds none of the objects", addr)
		}
		total += len(ks)
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			slot, err := redis.Int(c.Do("CLUSTER", "KEYSLOT", k))
			if err != nil {
				t.Fatal(err)
			}
			if owners[slot] != addr {
				t.Errorf("%s (slot %d) on %s; the slot's owner is %s", k, slot, addr, owners[slot])
			}
		}
		c.Close()
		t.Logf("primary %s: %d keys", addr, len(ks))
	}
	if want := 24 * 5; total < want { // lock, fence, semaphore keys, recent, members, bitmap
		t.Errorf("%d keys in all, want at least %d", total, want)
	}
}

// monitorNode collects what MONITOR shows on addr until stop is called.
func monitorNode(t *testing.T, addr string) (stop func() []string) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do("MONITOR"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			v, err := redis.String(c.Receive())
			if err != nil {
				return
			}
			lines = append(lines, v)
		}
	}()
	return func() []string {
		c.Close()
		<-done
		return lines
	}
}

// In steady state one operation on the cluster is one connection and one
// EVALSHA, on the primary that owns the object's slot: no redirect, no EVAL,
// nothing else. MONITOR on every primary shows it, filtered to this test's
// keys (other tests may share the cluster); INFO errorstats counts MOVED.
func TestCluster_OneRoundTrip(t *testing.T) {
	s := clusterServer(t)
	ctx := ctxT(t)
	pool := &countingGets{Pool: s.Engines}
	e := New(pool, WithNamespace(s.NS))
	names := spreadNames(30)
	ops := func() int {
		n := 0
		for _, name := range names {
			l, err := e.TryLock(ctx, name, LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Suggest(ctx, name, "a", 5); err != nil {
				t.Fatal(err)
			}
			if err := e.MarkActive(ctx, name, "p", 3); err != nil {
				t.Fatal(err)
			}
			if _, err := e.CountActive(ctx, name, "p", "q"); err != nil {
				t.Fatal(err)
			}
			n += 7 // CountActive is three: the periods' indexes, the one partition's tries, its count
		}
		return n
	}
	ops() // loads the scripts on every primary (EVALSHA, NOSCRIPT, EVAL)
	rc := testcluster.Of(s)
	owners, err := testcluster.SlotOwners(rc)
	if err != nil {
		t.Fatal(err)
	}
	primaries, _ := testcluster.Primaries(rc)
	moved := func() int64 {
		n, err := testcluster.MovedReplies(primaries)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	stops := map[string]func() []string{}
	for _, addr := range primaries {
		stops[addr] = monitorNode(t, addr)
	}
	movedBefore := moved()
	pool.n.Store(0)
	n := ops()
	gets := pool.n.Load()
	movedAfter := moved()
	time.Sleep(100 * time.Millisecond) // MONITOR lines in flight
	evalsha, other := 0, 0
	for addr, stop := range stops {
		here := 0
		for _, line := range stop() {
			if !strings.Contains(line, `"`+s.NS) || strings.Contains(line, " lua] ") {
				continue // another test's, or run by a script
			}
			f := strings.Split(line, `"`) // ts [db addr] "CMD" "arg1" "arg2" ...
			if len(f) < 2 || f[1] != "EVALSHA" {
				other++
				t.Errorf("on %s: %s", addr, line)
				continue
			}
			evalsha++
			here++
			key := f[7] // "EVALSHA" "sha" "numkeys" "key1" ...
			if owner := owners[keySlot(key)]; owner != addr {
				t.Errorf("EVALSHA on %s for %s, whose slot %s owns", addr, key, owner)
			}
		}
		t.Logf("primary %s: %d EVALSHA", addr, here)
	}
	t.Logf("%d operations: %d connections, %d EVALSHA on the owners, %d other commands; MOVED errors on the primaries %d -> %d",
		n, gets, evalsha, other, movedBefore, movedAfter)
	if gets != int64(n) || evalsha != n || other != 0 {
		t.Errorf("%d operations took %d connections and %d EVALSHA (+%d other commands); want one each", n, gets, evalsha, other)
	}
	if movedAfter != movedBefore {
		t.Logf("note: %d MOVED replies on the primaries meanwhile (from this test or another sharing the cluster)", movedAfter-movedBefore)
	}
}

// hashSlot agrees with the tests' keySlot (checked against the cluster
// specification), and tagIn finds a tag in any range.
func TestCluster_HashSlot(t *testing.T) {
	for _, tag := range []string{"", "a", "foo", "user1000", "cart:42", "\xff\x00"} {
		if got, want := hashSlot(tag), keySlot("{"+tag+"}"); tag != "" && got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", tag, got, want)
		}
	}
	for _, r := range [][2]int{{0, 0}, {16383, 16383}, {5461, 10922}, {1234, 1234}} {
		if s := int(hashSlot(tagIn(r[0], r[1]))); s < r[0] || s > r[1] {
			t.Errorf("tagIn(%d, %d): slot %d", r[0], r[1], s)
		}
	}
}
