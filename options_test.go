package atomicredis

// The engine's options. An engine built wrong is tested in engine_test.go;
// validCalls, every public operation, is in helpers_test.go.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// WithReplicaAck rejects what WAIT cannot do: every call returns ErrInvalid
// and nothing is written. replicas 0 is off, whatever the timeout.
func TestOptions_ReplicaAck(t *testing.T) {
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
