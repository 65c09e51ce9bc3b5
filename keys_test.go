package atomicredis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot follows the cluster spec: hash the part between the first '{'
// and the next '}' if it is not empty, else the whole key.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16([]byte(key)) % 16384
}

func TestKeySlot(t *testing.T) {
	// Values from the Redis cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{"foo": 12182, "bar": 5061, "{user1000}.following": keySlot("user1000"), "{}x": keySlot("{}x")} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	t.Run("cluster-node", func(t *testing.T) {
		addr := testserver.ClusterNodeAddr()
		if addr == "" {
			t.Skip("REDIS_CLUSTER_ADDR not set: no cluster-enabled node for CLUSTER KEYSLOT")
		}
		c, err := redis.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, key := range []string{"foo", "lock:{a b}:fence", "x{}y", "{\xff\x00}", "ns:sem:{é}:owner", "a{b}c{d}"} {
			want, err := redis.Int(c.Do("CLUSTER", "KEYSLOT", key))
			if err != nil {
				t.Fatal(err)
			}
			if got := keySlot(key); int(got) != want {
				t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
	})
}

// FuzzKeys: for any namespace, name and period, every key the operations
// write lies in the name's slot (activity's partitions, in their own tag's
// slot), or the input is refused with ErrInvalid and
// nothing is written.
func FuzzKeys(f *testing.F) {
	for _, seed := range [][3]string{{"", "orders", "2026-11-21"}, {"app:", "a b", ""}, {"x", "é\x00\xff", "{p}"}, {"", "{", "p"}, {"n{", "a", "p"}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	s := testserver.Mini(f)
	f.Fuzz(func(t *testing.T, ns, name, period string) {
		s.Mini.FlushAll()
		e := New(s.Pool, WithNamespace(ns))
		ctx := context.Background()
		errs := []error{
			func() error { _, err := e.TryLock(ctx, name, LockOptions{TTL: time.Minute}); return err }(),
			func() error { _, err := e.TryRLock(ctx, name, LockOptions{TTL: time.Minute}); return err }(),
			func() error { _, err := e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 1}); return err }(),
			e.AddRecent(ctx, name, "item"),
			e.AddMembers(ctx, name, "m"),
			e.MarkActive(ctx, name, period, 3),
			func() error { _, err := e.CountActive(ctx, name, period, period+"2"); return err }(),
		}
		invalid := name == "" || strings.ContainsAny(name+ns, "{}")
		for _, err := range errs {
			if invalid != errors.Is(err, ErrInvalid) || (!invalid && err != nil) {
				t.Fatalf("ns %q name %q: error %v (invalid input: %v)", ns, name, err, invalid)
			}
		}
		keys := s.Mini.Keys()
		if invalid {
			if len(keys) != 0 {
				t.Fatalf("refused input wrote %q", keys)
			}
			return
		}
		if len(keys) < 7 {
			t.Fatalf("only %d keys: %q", len(keys), keys)
		}
		for _, k := range keys {
			want := keySlot("{" + name + "}")
			switch {
			case strings.HasPrefix(k[len(ns):], "act:"):
				want = keySlot("{" + partTag(name, placeOf(3).part()) + "}") // id 3's partition
			case strings.HasPrefix(k[len(ns):], "bits:"):
				want = keySlot("{" + name + ":0}") // v3's key of id 3's shard, guarded
			}
			if got := keySlot(k); got != want {
				t.Fatalf("key %q in slot %d, the name's slot is %d", k, got, want)
			}
		}
	})
}

// Fence counters expire WithFenceRetention after their name's last grant
// (locks, read-write locks, semaphores), so an idle name leaves no key;
// the next fence then starts from the server's clock in microseconds,
// above every fence before it.
func TestCountersExpireAfterRetention(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		const retention = 300 * time.Millisecond
		ctx, e := ctxT(t), engine(s, WithFenceRetention(retention))
		for _, c := range []struct {
			counter string
			take    func() (fence int64, release func() error, err error)
		}{
			{"lock:{f}:fence", func() (int64, func() error, error) {
				l, err := e.TryLock(ctx, "f", LockOptions{TTL: time.Minute})
				return l.Fence(), func() error { return l.Unlock(ctx) }, err
			}},
			{"rw:{f}:fence", func() (int64, func() error, error) {
				l, err := e.TryWLock(ctx, "f", LockOptions{TTL: time.Minute})
				return l.Fence(), func() error { return l.Unlock(ctx) }, err
			}},
			{"sem:{f}:counter", func() (int64, func() error, error) {
				p, err := e.TryAcquireSemaphore(ctx, "f", SemaphoreOptions{Limit: 1, TTL: time.Minute})
				return p.Fence(), func() error { return p.Release(ctx) }, err
			}},
		} {
			key := s.NS + c.counter
			first, release, err := c.take()
			if err != nil {
				t.Fatal(err)
			}
			if got := s.PTTL(t, key); got <= 0 || got > retention {
				t.Errorf("PTTL %s after a grant = %v, want (0, %v]", key, got, retention)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			second, release, err := c.take()
			if err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if second != first+1 {
				t.Errorf("%s: fences %d then %d while the counter lives, want consecutive", c.counter, first, second)
			}
			s.Advance(retention + 50*time.Millisecond)
			if n, _ := redis.Int(s.Do("EXISTS", key)); n != 0 {
				t.Errorf("%s still there after its retention (PTTL %v)", key, s.PTTL(t, key))
			}
			third, release, err := c.take()
			if err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if third <= second {
				t.Errorf("%s: fence %d after the counter expired, %d before: fences went back", c.counter, third, second)
			}
		}
		s.Advance(retention + 50*time.Millisecond)
		if ks := s.Keys(t); len(ks) != 0 {
			t.Errorf("keys left after the retention: %q", ks)
		}
	})
}

// Every grant gives its name's fence counter the whole retention again
// (locks, read-write locks, semaphores): a name used more often than its
// retention keeps its counter, and its fences stay consecutive, however
// long ago its first grant was. Here grants come 0.6 retentions apart, so
// the third is 1.2 retentions after the first.
func TestFenceCounterKeepsItsRetention(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		retention := 300 * time.Millisecond
		if s.Mini == nil {
			retention = 2 * time.Second // a real server is waited on: 0.8 s of slack per gap
		}
		ctx, e := ctxT(t), engine(s, WithFenceRetention(retention))
		kinds := []struct {
			counter string
			take    func() (int64, error)
		}{
			{"lock:{fk}:fence", func() (int64, error) {
				l, err := e.TryLock(ctx, "fk", LockOptions{TTL: time.Minute})
				if err != nil {
					return 0, err
				}
				return l.Fence(), l.Unlock(ctx)
			}},
			{"rw:{fk}:fence", func() (int64, error) {
				l, err := e.TryWLock(ctx, "fk", LockOptions{TTL: time.Minute})
				if err != nil {
					return 0, err
				}
				return l.Fence(), l.Unlock(ctx)
			}},
			{"sem:{fk}:counter", func() (int64, error) {
				p, err := e.TryAcquireSemaphore(ctx, "fk", SemaphoreOptions{Limit: 1, TTL: time.Minute})
				if err != nil {
					return 0, err
				}
				return p.Fence(), p.Release(ctx)
			}},
		}
		fences := make([][]int64, len(kinds))
		for round := 0; round < 3; round++ {
			if round > 0 {
				s.Advance(retention * 6 / 10)
			}
			for i, k := range kinds {
				f, err := k.take()
				if err != nil {
					t.Fatalf("%s, grant %d: %v", k.counter, round+1, err)
				}
				fences[i] = append(fences[i], f)
			}
		}
		for i, k := range kinds {
			if f := fences[i]; f[1] != f[0]+1 || f[2] != f[1]+1 {
				t.Errorf("%s: fences %v from grants %v apart (retention %v), want consecutive: the counter did not outlive its first grant by a retention", k.counter, f, retention*6/10, retention)
			}
		}
	})
}
