package testcluster

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// replication is one node's INFO replication, as the readiness check
// reads it.
type replication struct {
	addr     string
	primary  bool
	offset   int64             // master_repl_offset of a primary, slave_repl_offset of a replica
	replid   string            // master_replid: the history the node is on
	of       string            // a replica's primary, host:port
	linkUp   bool              // a replica's master_link_status:up
	syncing  bool              // a replica's master_sync_in_progress:1
	replicas map[string]string // a primary's replicas: host:port -> state (online, wait_bgsave, send_bulk, ...)
}

func parseReplication(addr, info string) replication {
	r := replication{addr: addr, replicas: map[string]string{}}
	field := func(name string) string { v, _ := testserver.InfoField(info, name); return v }
	r.primary = field("role") == "master"
	r.replid = field("master_replid")
	if r.primary {
		r.offset, _ = strconv.ParseInt(field("master_repl_offset"), 10, 64)
	} else {
		r.offset, _ = strconv.ParseInt(field("slave_repl_offset"), 10, 64)
		r.of = net.JoinHostPort(field("master_host"), field("master_port"))
		r.linkUp = field("master_link_status") == "up"
		r.syncing = field("master_sync_in_progress") != "0"
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "state=") {
			continue
		}
		kv := map[string]string{}
		for _, p := range strings.Split(v, ",") {
			a, b, _ := strings.Cut(p, "=")
			kv[a] = b
		}
		r.replicas[net.JoinHostPort(kv["ip"], kv["port"])] = kv["state"]
	}
	return r
}

// notReady judges the nodes: first is every node's INFO replication, then
// again each replica's, read after every primary's. It returns "" when
// every replica's link is up with no sync in progress, its primary counts
// it online, it is on its primary's history (the same replication id) and
// its offset has reached the primary's; else what is not so, naming the
// node.
func notReady(first, again map[string]replication) string {
	addrs := make([]string, 0, len(first))
	for a := range first {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		r := first[a]
		if r.primary {
			continue
		}
		if later, ok := again[a]; ok {
			r = later
		}
		p, ok := first[r.of]
		switch {
		case !r.linkUp || r.syncing:
			return fmt.Sprintf("replica %s: link to its primary %s up %v, sync in progress %v", a, r.of, r.linkUp, r.syncing)
		case !ok || !p.primary:
			return fmt.Sprintf("replica %s: its primary %s is not a primary of this cluster", a, r.of)
		case p.replicas[a] != "online":
			return fmt.Sprintf("replica %s: its primary %s counts it %q, not online", a, r.of, p.replicas[a])
		case r.replid != p.replid:
			return fmt.Sprintf("replica %s: replication id %s, its primary %s is on %s", a, r.replid, r.of, p.replid)
		case r.offset < p.offset:
			return fmt.Sprintf("replica %s: offset %d behind its primary %s at %d", a, r.offset, r.of, p.offset)
		}
	}
	return ""
}

// NotReady reads INFO replication from the nodes at addrs and returns ""
// when every replica among them has caught up with its primary (see
// notReady), else what is not ready, naming the node: a node that does not
// answer, or a replica whose link is down, is syncing (a full resync), is
// not yet online for its primary, or lags its offset.
func NotReady(addrs []string) string {
	read := func(addr string) (replication, error) {
		c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(5*time.Second))
		if err != nil {
			return replication{}, err
		}
		defer c.Close()
		info, err := redis.String(c.Do("INFO", "replication"))
		return parseReplication(addr, info), err
	}
	first, again := map[string]replication{}, map[string]replication{}
	for _, a := range addrs {
		r, err := read(a)
		if err != nil {
			return fmt.Sprintf("%s: %v", a, err)
		}
		first[a] = r
	}
	for _, a := range addrs {
		if first[a].primary {
			continue
		}
		r, err := read(a)
		if err != nil {
			return fmt.Sprintf("%s: %v", a, err)
		}
		again[a] = r
	}
	return notReady(first, again)
}

// WaitReady waits up to within until NotReady(addrs) is "", and fails t
// with what was last not ready otherwise: a test that asks replicas for
// acknowledgements must not start while one is still in a full resync.
func WaitReady(t testing.TB, addrs []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := NotReady(addrs)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ready after %v: %s", within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
