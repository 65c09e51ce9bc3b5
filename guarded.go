package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Writes guarded by a lock: the caller's Lua, run in the same script that
// checks the lock is still the caller's

// GuardedScript is a piece of the caller's Lua that Lock.Eval runs only
// while the lock is held (NewGuardedScript). It is loaded with SCRIPT LOAD
// on its first use on each server, then run with EVALSHA; it is safe for
// concurrent use.
type GuardedScript struct {
	keyCount int
	body     string
	script   *script
	rw       *script // the same, guarded by a read-write lock's writer
	election *script // the same, guarded by an election's leader (v4's string layout)
	err      error   // why the body cannot run (a shebang line, a negative key count)
}

// NewGuardedScript makes body (Lua, as for EVAL: KEYS and ARGV are the
// caller's own) a script that Lock.Eval runs atomically with the check that
// the lock is held. keyCount is how many of Eval's arguments are keys. A
// body with a shebang line ("#!") is refused when it is run (ErrInvalid):
// Redis reads flags only from a script's first line, which is the guard's.
func NewGuardedScript(keyCount int, body string) *GuardedScript {
	s := &GuardedScript{keyCount: keyCount, body: body}
	switch {
	case keyCount < 0:
		s.err = fmt.Errorf("key count %d: %w", keyCount, ErrInvalid)
	case strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), "#!"):
		s.err = fmt.Errorf("a guarded script's body cannot have a shebang line: %w", ErrInvalid)
	default:
		s.script = newScript("guarded", keyCount+1, wrapper("guarded_lock")+guardedBody(body))
		s.rw = newScript("guarded (writer)", keyCount+1, wrapper("guarded_writer")+guardedBody(body))
		s.election = newScript("guarded (election)", keyCount+1, wrapper("guarded_election")+guardedBody(body))
	}
	return s
}

// notHeldReply is the error a guarded script replies when its lock is not
// held by the token (scripts/wrap/guarded_lock.lua, guarded_writer.lua).
const notHeldReply = "ATOMICREDIS_NOT_HELD the lock is not held by this token"

// guardedBody runs body as a function of its own, with the caller's KEYS
// and ARGV (the guard's key and token taken off the front).
func guardedBody(body string) string {
	return strings.Replace(wrapper("guarded_body"), bodyLine, body, 1)
}

// HashTag returns the hash tag, "{name}", that every key a guarded script
// of the named lock (or read-write lock, or election) touches must carry
// as its first {…}, so that it lives in the lock's slot on a cluster.
func (e *Engine) HashTag(name string) (string, error) {
	obj, err := e.object(kindLock, name)
	if err != nil {
		return "", err
	}
	return "{" + obj.name + "}", nil
}

// Key returns the key name for a guarded script of this lock:
// "<namespace>{<lock>}:<name>", in the engine's namespace (so an ACL
// pattern for the namespace covers it) after the lock's hash tag (so it
// lives in the lock's slot on a cluster, as Eval requires). It returns ""
// for a nil Lock.
func (l *Lock) Key(name string) string {
	if l == nil {
		return ""
	}
	return l.obj.ns + "{" + l.obj.name + "}:" + name
}

// Eval runs s atomically with the check that this lock (an exclusive lock,
// an election's leadership or a write hold) is still this holder's;
// keysAndArgs are s's keys (built with Key), then its arguments. It returns
// the body's reply; an error wrapping ErrNotHeld, with nothing run, if the
// lock is no longer this holder's; an error wrapping the Redis error if the
// body failed (what it wrote before stays); ErrInvalid for a reader's hold,
// a key without the lock's HashTag, or a script NewGuardedScript refused.
func (l *Lock) Eval(ctx context.Context, s *GuardedScript, keysAndArgs ...any) (any, error) {
	if l != nil && l.e.hooked() {
		return hooked(l.e, ctx, Operation{l.obj.kind.noun, l.obj.name, "Eval"}, func(ctx context.Context) (any, error) { return l.eval(ctx, s, keysAndArgs...) })
	}
	return l.eval(ctx, s, keysAndArgs...)
}

// eval is Eval.
func (l *Lock) eval(ctx context.Context, s *GuardedScript, keysAndArgs ...any) (any, error) {
	if l == nil {
		return nil, errNilLock
	}
	h := &l.holding
	if err := h.usable(ctx); err != nil {
		return nil, err
	}
	switch {
	case s == nil:
		return nil, h.obj.errorf("nil guarded script: %w", ErrInvalid)
	case s.err != nil:
		return nil, h.obj.err(s.err)
	case len(keysAndArgs) < s.keyCount:
		return nil, h.obj.errorf("%d keys and arguments for a script of %d keys: %w", len(keysAndArgs), s.keyCount, ErrInvalid)
	}
	script := s.script
	if h.ops.kind == kindRW {
		if !strings.HasPrefix(h.token, "w-") {
			return nil, h.obj.errorf("a read lock guards no write: %w", ErrInvalid)
		}
		script = s.rw
	}
	if h.ops.kind == kindElection { // a leader's lock keeps v4's string layout
		script = s.election
	}
	tag := "{" + h.obj.name + "}"
	for i, k := range keysAndArgs[:s.keyCount] {
		key, ok := k.(string)
		if !ok || firstTag(key) != tag {
			return nil, h.obj.errorf("key %d (%v) must carry the lock's hash tag %s as its first {…}: %w", i+1, k, tag, ErrInvalid)
		}
	}
	args := make([]any, 0, len(keysAndArgs)+2)
	args = append(args, h.keys[0])
	args = append(args, keysAndArgs[:s.keyCount]...)
	args = append(args, h.tokenArg)
	args = append(args, keysAndArgs[s.keyCount:]...)
	out, err := h.e.call(ctx, script, args, false, 0)
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.HasPrefix(string(re), "ATOMICREDIS_NOT_HELD") {
			return nil, h.notHeld()
		}
		return nil, h.obj.errorf("guarded script: %w", err)
	}
	return out.reply, nil
}

// firstTag is key's first "{…}" with something inside, as Redis Cluster
// hashes it, or "" if it has none.
func firstTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i : i+j+2]
}
