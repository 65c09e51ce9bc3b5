package testcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// primaryInfo and replicaInfo are INFO replication texts as redis-server
// 7.0 writes them.
func primaryInfo(state string, offset string) string {
	return "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=7002,state=" + state +
		",offset=" + offset + ",lag=0\r\nmaster_replid:aaa\r\nmaster_repl_offset:" + offset + "\r\n"
}

func replicaInfo(link, syncing, replid, offset string) string {
	return "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7001\r\nmaster_link_status:" + link +
		"\r\nmaster_sync_in_progress:" + syncing + "\r\nslave_repl_offset:" + offset + "\r\nmaster_replid:" + replid +
		"\r\nmaster_repl_offset:" + offset + "\r\n"
}

// A replica is ready only when both sides agree it has caught up; a link
// that is up is not enough (the primary may not count the replica online
// yet, after a full resync, and then WAIT counts no acknowledgement).
func TestNotReady(t *testing.T) {
	for _, c := range []struct {
		name             string
		primary, replica string
		want             string // in the reason; "" for ready
	}{
		{"caught up", primaryInfo("online", "500"), replicaInfo("up", "0", "aaa", "500"), ""},
		{"ahead of the first read", primaryInfo("online", "500"), replicaInfo("up", "0", "aaa", "514"), ""},
		{"link down", primaryInfo("online", "500"), replicaInfo("down", "0", "aaa", "500"), "replica 127.0.0.1:7002: link to its primary 127.0.0.1:7001 up false"},
		{"full resync", primaryInfo("send_bulk", "500"), replicaInfo("down", "1", "", "0"), "sync in progress true"},
		{"link up, not online for the primary", primaryInfo("wait_bgsave", "500"), replicaInfo("up", "0", "aaa", "500"), `replica 127.0.0.1:7002: its primary 127.0.0.1:7001 counts it "wait_bgsave", not online`},
		{"another history", primaryInfo("online", "500"), replicaInfo("up", "0", "bbb", "500"), "replication id bbb"},
		{"behind", primaryInfo("online", "500"), replicaInfo("up", "0", "aaa", "486"), "replica 127.0.0.1:7002: offset 486 behind its primary 127.0.0.1:7001 at 500"},
	} {
		first := map[string]replication{
			"127.0.0.1:7001": parseReplication("127.0.0.1:7001", c.primary),
			"127.0.0.1:7002": parseReplication("127.0.0.1:7002", c.replica),
		}
		got := notReady(first, nil)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// On redis-server: a replica attached to a primary with data is not ready
// while its full resync runs, and WaitReady waits until it has caught up.
func TestWaitReady(t *testing.T) {
	primary := testserver.PrivateRedis(t, "--enable-debug-command", "local")
	replica := testserver.PrivateRedis(t)
	if _, err := primary.Do("DEBUG", "POPULATE", 200000, "k", 64); err != nil {
		t.Fatal(err)
	}
	addrs := []string{primary.Addr(), replica.Addr()}
	if _, err := replica.Do("REPLICAOF", "127.0.0.1", primary.Port); err != nil {
		t.Fatal(err)
	}
	if why := NotReady(addrs); !strings.Contains(why, "replica "+replica.Addr()) {
		t.Errorf("just attached: %q, want the replica named", why)
	}
	WaitReady(t, addrs, 30*time.Second)
	if n, err := redis.Int(replica.Do("DBSIZE")); n != 200000 || err != nil {
		t.Errorf("ready replica: DBSIZE %d, %v", n, err)
	}
	if _, err := primary.Do("SET", "x", "y"); err != nil {
		t.Fatal(err)
	}
	WaitReady(t, addrs, 10*time.Second)
	if v, err := redis.String(replica.Do("GET", "x")); v != "y" || err != nil {
		t.Errorf("after WaitReady the replica has GET x = %q, %v", v, err)
	}
}
