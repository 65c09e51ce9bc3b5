package atomicredis

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Option configures an Engine.
type Option func(*Engine)

// WithNamespace prefixes every key with prefix (default ""). A prefix
// containing '{' or '}' is rejected: every call then returns ErrInvalid.
func WithNamespace(prefix string) Option {
	return func(e *Engine) {
		switch {
		case strings.ContainsAny(prefix, "{}"):
			e.reject(fmt.Errorf("namespace %s: contains a brace: %w", quoteName(prefix), ErrInvalid))
			return
		case len(prefix) > MaxName:
			e.reject(fmt.Errorf("namespace is %d bytes, more than MaxName (%d): %w", len(prefix), MaxName, ErrInvalid))
			return
		}
		e.ns = prefix
	}
}

// WithRecentCapacity sets how many items a recent list keeps (default 100).
// n < 1, or n above 2^53 - 1 (the largest whole number a Lua number holds
// exactly), is rejected: every call then returns ErrInvalid.
func WithRecentCapacity(n int) Option {
	return func(e *Engine) {
		if err := count("recent capacity", n, 1, ""); err != nil {
			e.reject(err)
			return
		}
		e.recentCap = n
	}
}

// WithActivityTTL makes a group's keys for a period expire d after the
// period's first mark (0, the default: never). Every key of the period (its
// buckets, dense shards' bitmaps, directories and index, and the guards of
// v3's keys) expires at that one deadline, which later
// marks do not move; the first mark decides it, whatever TTL engines that
// mark the period later have. A negative d, or one under 1 ms, is
// rejected: every call then returns ErrInvalid.
func WithActivityTTL(d time.Duration) Option {
	return func(e *Engine) {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			e.reject(fmt.Errorf("activity TTL %v: must be 0 (never) or at least 1ms: %w", d, ErrInvalid))
			return
		}
		e.activityTTL = d
	}
}

// WithReplicaAck makes every acquisition and extension wait until
// replicas replicas have acknowledged it, for up to timeout. With fewer,
// an acquisition returns an error wrapping ErrNotReplicated and holds
// nothing; Lock.Extend and Permit.Extend keep what they set and return such
// an error too. replicas 0 turns it off (the default). A negative replicas,
// or a timeout under 1 ms or at least the call timeout, makes every call
// return ErrInvalid. Releases are not acknowledged. See "Replica
// acknowledgement" in the package doc.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(e *Engine) {
		switch {
		case replicas < 0:
			e.reject(fmt.Errorf("replica ack: %d replicas: must be at least 0: %w", replicas, ErrInvalid))
		case replicas > 0 && timeout < time.Millisecond:
			e.reject(fmt.Errorf("replica ack: timeout %v: must be at least 1ms: %w", timeout, ErrInvalid))
		default:
			e.replicas, e.ackTimeout = replicas, timeout
		}
	}
}

// WithCallTimeout bounds each round trip to Redis whose context has no
// earlier deadline (default 5s), so that no call hangs on a server that
// stopped answering; a wait also bounds each of its attempts by what is
// left of it. An attempt cut off this way is abandoned like any other. The
// wake subscription, which waits for messages, is exempt. d under 1 ms is
// rejected: every call then returns ErrInvalid.
func WithCallTimeout(d time.Duration) Option {
	return func(e *Engine) {
		if d < time.Millisecond {
			e.reject(fmt.Errorf("call timeout %v: must be at least 1ms: %w", d, ErrInvalid))
			return
		}
		e.callTimeout = d
	}
}

// WithFenceRetention sets how long a read-write lock's, semaphore's or
// election's fence counter outlives its name's last grant (default 24h); a
// lock keeps its last fence in its one key, for the rest of its last lease.
// While the counter lives, every fence is the last one plus one; once it
// is gone, or lost in a restart without persistence, fences start again
// from the server's clock in microseconds, above every fence handed out
// before as long as the server's clock has not stepped back by more than
// the retention. An idle name leaves no key behind once its retention has
// passed. d under 1 ms is rejected: every call then returns ErrInvalid.
func WithFenceRetention(d time.Duration) Option {
	return func(e *Engine) {
		if d < time.Millisecond {
			e.reject(fmt.Errorf("fence retention %v: must be at least 1ms: %w", d, ErrInvalid))
			return
		}
		e.retention = d
	}
}

// WithObserver calls f with every Event of the engine's locks, read-write
// locks, semaphores and elections: acquisitions, calls joining the queue
// (once a call), refusals, releases, losses, failed extensions, background
// errors, stored semaphore limits that differ from the caller's, and an
// election's campaigns, leaders elected and deposed, and the changes its
// Observe calls see. (WithHook sees every call, with its context.) f runs on the goroutine where the event
// happened (the caller's, a watchdog's, the wake subscription's), so it
// must be quick and must not block or call the engine.
func WithObserver(f func(Event)) Option {
	return func(e *Engine) { e.observer = f }
}

// WithLogger logs the engine's background failures (failed extensions, abandons
// and wake-ups) and stored semaphore limits that differ from the caller's
// at Warn, and lost holdings at Error, with the object, its
// name, the fence and the error as attributes. The engine logs nothing
// without it.
func WithLogger(l *slog.Logger) Option {
	return func(e *Engine) { e.logger = l }
}

// maxExact is 2^53 − 1, the largest whole number below which a Lua number
// (a double) holds every whole number exactly. A count a script does
// arithmetic on (a semaphore's limit, a recent list's capacity, a result
// limit) above it is ErrInvalid before anything is sent: Redis would store
// it rounded, or refuse it halfway through a script. A duration in ms needs
// no such check: time.Duration's largest, 2^63 − 1 ns, is about 9.2e12 ms.
// Activity ids go to the scripts split in Go (shard, offset), so every id
// up to MaxInt64 is exact.
const maxExact = 1<<53 - 1

// count checks a whole number a script does arithmetic on: least up to
// maxExact. zero, if not "", names what 0 means, which is then allowed too.
func count(field string, n, least int, zero string) error {
	switch {
	case n == 0 && zero != "":
		return nil
	case n < least && zero != "":
		return fmt.Errorf("%s %d: must be 0 (%s) or at least %d: %w", field, n, zero, least, ErrInvalid)
	case n < least:
		return fmt.Errorf("%s %d: must be at least %d: %w", field, n, least, ErrInvalid)
	case int64(n) > maxExact:
		return fmt.Errorf("%s %d: must be at most 2^53 - 1 (what a Lua number holds exactly): %w", field, n, ErrInvalid)
	}
	return nil
}
