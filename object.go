package atomicredis

import (
	"fmt"
	"strings"
	"time"
)

// kind is a type of object the engine keeps: the noun its errors and
// events name it by, and the word its keys start with (none for an
// activity group, whose keys are its shards' and indexes', built by
// shardKey and indexKey).
type kind struct {
	noun, word string
}

var (
	kindLock     = &kind{ObjectLock, "lock"}
	kindRW       = &kind{ObjectReadWriteLock, "rw"}
	kindSem      = &kind{ObjectSemaphore, "sem"}
	kindRecent   = &kind{ObjectRecentList, "recent"}
	kindMembers  = &kind{ObjectMemberSet, "members"}
	kindActivity = &kind{ObjectActivityGroup, ""}
	kindElection = &kind{ObjectElection, "election"}
)

// MaxName is the longest name an object, a period or a namespace takes,
// in bytes. An error's text quotes at most the first 64 bytes of a name.
const MaxName = 4096

// object is one named object of an engine: it builds its keys and its
// errors.
type object struct {
	kind *kind
	name string
	ns   string
}

// object checks the engine and a name (non-empty, at most MaxName bytes,
// no braces: the engine adds the hash tag itself) and returns the object;
// on a closed engine, an error wrapping ErrClosed.
func (e *Engine) object(k *kind, name string) (object, error) {
	if err := e.usable(); err != nil {
		return object{}, err
	}
	o := object{kind: k, name: name, ns: e.ns}
	switch {
	case name == "" || strings.ContainsAny(name, "{}"):
		return o, o.errorf("name must be non-empty and contain no braces: %w", ErrInvalid)
	case len(name) > MaxName:
		return o, o.errorf("name is %d bytes, more than MaxName (%d): %w", len(name), MaxName, ErrInvalid)
	case e.isClosed():
		return o, o.err(ErrClosed)
	}
	return o, nil
}

// period checks a period's name: at most MaxName bytes.
func (o object) period(period string) error {
	if len(period) > MaxName {
		return o.errorf("period %s is %d bytes, more than MaxName (%d): %w", quoteName(period), len(period), MaxName, ErrInvalid)
	}
	return nil
}

// key builds <ns><word>:{<name>}<suffix>, suffix being "" or ":..."; the
// braces make every key of one object hash to the same cluster slot.
func (o object) key(suffix string) string {
	return o.ns + o.kind.word + ":{" + o.name + "}" + suffix
}

func (o object) err(err error) error {
	return &Error{Object: o.kind.noun, Name: o.name, Err: err}
}

func (o object) errorf(format string, args ...any) error {
	return o.err(fmt.Errorf(format, args...))
}

// duration resolves an optional duration: 0 is def, anything else must be
// at least 1 ms (Redis counts in milliseconds).
func (o object) duration(field string, d, def time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < time.Millisecond:
		return 0, o.errorf("%s %v: must be 0 (default) or at least 1ms: %w", field, d, ErrInvalid)
	}
	return d, nil
}
