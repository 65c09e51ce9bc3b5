package atomicredis

// WithReplicaAck: its options, a shortfall, and a private primary with a
// replica.

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// WithReplicaAck rejects what WAIT cannot do: every call returns ErrInvalid
// and nothing is written. replicas 0 is off, whatever the timeout.
func TestReplicaAckOptions(t *testing.T) {
	s := testserver.Mini(t)
	for _, c := range []struct {
		replicas int
		timeout  time.Duration
	}{{-1, time.Second}, {1, 0}, {1, -time.Second}, {2, 999 * time.Microsecond}} {
		e := New(s.Pool, WithReplicaAck(c.replicas, c.timeout))
		for _, v := range validCalls() {
			if strings.HasPrefix(v.name, "Lock.") || strings.HasPrefix(v.name, "Permit.") {
				continue
			}
			if err := v.run(ctxT(t), e); !errors.Is(err, ErrInvalid) {
				t.Errorf("WithReplicaAck(%d, %v): %s: %v, want ErrInvalid", c.replicas, c.timeout, v.name, err)
			}
		}
	}
	if ks := s.Keys(t); len(ks) != 0 {
		t.Errorf("keys written: %q", ks)
	}
	for _, timeout := range []time.Duration{0, -1, time.Second} {
		if _, err := New(s.Pool, WithReplicaAck(0, timeout)).TryLock(ctxT(t), fmt.Sprint("off", timeout), LockOptions{}); err != nil {
			t.Errorf("WithReplicaAck(0, %v): %v", timeout, err)
		}
	}
}

// With more replicas asked for than any server here has, an acquisition is
// granted by the script, found unreplicated, abandoned, and reported with
// ErrNotReplicated; the lock is free afterwards.
func TestReplicaAckShortfall(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		e := engine(s, WithReplicaAck(64, 20*time.Millisecond))
		_, err := e.TryLock(ctx, "short", LockOptions{})
		if !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "of 64 replicas") {
			t.Fatalf("TryLock: %v, want ErrNotReplicated naming the acks", err)
		}
		if err := e.Close(ctx); err != nil { // waits for the abandon
			t.Fatal(err)
		}
		if held, err := engine(s).IsLocked(ctx, "short"); err != nil || held {
			t.Errorf("IsLocked after an unreplicated grant: %v, %v; want false", held, err)
		}
	})
}

// startReplicated starts a private primary and a replica of it, and waits
// until the replica is in sync. Both servers have the same namespace.
func startReplicated(t *testing.T) (primary, replica *testserver.Server) {
	t.Helper()
	p := testserver.On(t, "primary", testserver.PrivateRedis(t).Addr())
	r := testserver.On(t, "replica", testserver.PrivateRedis(t).Addr())
	r.NS = p.NS
	primary, replica = p, r
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica.Must(t, "REPLICAOF", host, port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := redis.String(primary.Do("INFO", "replication"))
		if strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return primary, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not in sync after 30s:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On a primary with one replica: WithReplicaAck(1, ...) acquires, extends
// and extends, each acknowledged, and the replica has the lock when the
// call returns; WithReplicaAck(2, ...) gets ErrNotReplicated and leaves the
// lock free. With the replica gone, Lock.Extend and Permit.Extend keep what they set
// and say ErrNotReplicated.
func TestReplicaAck(t *testing.T) {
	testserver.Parallel(t)
	primary, replica := startReplicated(t)
	ctx := ctxT(t)
	one := engine(primary, WithReplicaAck(1, time.Second))
	l, err := one.TryLock(ctx, "acked", LockOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("TryLock with one replica acking: %v", err)
	}
	// WAIT returned: the replica has the grant, with no pause needed.
	if n, _ := redis.Int(replica.Do("EXISTS", primary.NS+"lock:{acked}")); n != 1 {
		t.Errorf("replica lacks the acknowledged lock key")
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Errorf("Extend, acked: %v", err)
	}
	p, err := one.TryAcquireSemaphore(ctx, "acked", SemaphoreOptions{Limit: 2, TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("AcquireSemaphore, acked: %v", err)
	}
	if err := p.Extend(ctx, 0); err != nil {
		t.Errorf("Extend, acked: %v", err)
	}

	two := engine(primary, WithReplicaAck(2, 100*time.Millisecond))
	if _, err := two.TryLock(ctx, "unacked", LockOptions{}); !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "1 of 2 replicas") {
		t.Errorf("TryLock wanting 2 acks of 1 replica: %v, want ErrNotReplicated (1 of 2)", err)
	}
	if _, err := two.TryAcquireSemaphore(ctx, "unacked", SemaphoreOptions{Limit: 1}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("AcquireSemaphore wanting 2 acks of 1 replica: %v, want ErrNotReplicated", err)
	}
	if err := two.Close(ctx); err != nil {
		t.Fatal(err)
	}
	plain := engine(primary)
	if held, err := plain.IsLocked(ctx, "unacked"); err != nil || held {
		t.Errorf("IsLocked after the unreplicated grant: %v, %v; want false", held, err)
	}
	if n, err := plain.SemaphoreHolders(ctx, "unacked"); err != nil || n != 0 {
		t.Errorf("SemaphoreHolders after the unreplicated grant: %d, %v; want 0", n, err)
	}

	// The replica leaves: nothing acknowledges now.
	replica.Must(t, "REPLICAOF", "NO", "ONE")
	if err := l.Extend(ctx, 40*time.Second); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Extend without a replica: %v, want ErrNotReplicated", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 30*time.Second {
		t.Errorf("TTL after an unreplicated Extend(40s): %v, %v; want the extension kept", ttl, err)
	}
	before, _ := p.TTL(ctx)
	time.Sleep(20 * time.Millisecond)
	if err := p.Extend(ctx, 0); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Extend without a replica: %v, want ErrNotReplicated", err)
	}
	if after, err := p.TTL(ctx); err != nil || after <= before {
		t.Errorf("permit TTL %v before an unreplicated Extend, %v (%v) after; want it extended", before, after, err)
	}
	if _, err := one.TryLock(ctx, "lonely", LockOptions{}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("TryLock without a replica: %v, want ErrNotReplicated", err)
	}
}
