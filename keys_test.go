package atomicredis

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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
	t.Run("cluster", func(t *testing.T) {
		addr := os.Getenv("REDIS_CLUSTER_ADDR")
		if addr == "" {
			t.Skip("REDIS_CLUSTER_ADDR not set: CLUSTER KEYSLOT comparison skipped")
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
// write lies in the name's slot, or the input is refused with ErrInvalid
// and nothing is written.
func FuzzKeys(f *testing.F) {
	for _, seed := range [][3]string{{"", "orders", "2026-11-21"}, {"app:", "a b", ""}, {"x", "é\x00\xff", "{p}"}, {"", "{", "p"}, {"n{", "a", "p"}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	s := newMini(f)
	f.Fuzz(func(t *testing.T, ns, name, period string) {
		s.mini.FlushAll()
		e := New(s.pool, WithNamespace(ns))
		ctx := context.Background()
		errs := []error{
			func() error { _, err := e.TryLock(ctx, name, LockOptions{TTL: time.Minute}); return err }(),
			func() error { _, err := e.TryRLock(ctx, name, LockOptions{TTL: time.Minute}); return err }(),
			func() error { _, err := e.AcquireSemaphore(ctx, name, SemaphoreOptions{Limit: 1}); return err }(),
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
		keys := s.mini.Keys()
		if invalid {
			if len(keys) != 0 {
				t.Fatalf("refused input wrote %q", keys)
			}
			return
		}
		if len(keys) < 7 {
			t.Fatalf("only %d keys: %q", len(keys), keys)
		}
		want := keySlot("{" + name + "}")
		for _, k := range keys {
			if got := keySlot(k); got != want {
				t.Fatalf("key %q in slot %d, the name's slot is %d", k, got, want)
			}
		}
	})
}
