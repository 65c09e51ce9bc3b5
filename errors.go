package atomicredis

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// The errors callers test for with errors.Is. Every call's error is an
// *Error that names the object and what happened, wrapping one of these
// or the failure that caused it.
var (
	// ErrNotAcquired: the server answered, and the lock or permit was not
	// the caller's: another held it, or the caller was still queued when
	// its wait or ctx ended (a ctx end wraps ctx.Err() as well). When
	// Redis could not be reached, the error wraps that failure instead.
	ErrNotAcquired = errors.New("not acquired")
	// ErrNotHeld: the caller's lock or permit has expired or passed to
	// another holder, or the holding is nil.
	ErrNotHeld = errors.New("not held")
	// ErrInvalid: an argument, an option or the engine itself (nil or
	// zero) was rejected; nothing was written.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the engine was closed and takes no new locks or permits.
	ErrClosed = errors.New("engine closed")
	// ErrNotReplicated: fewer replicas than WithReplicaAck asks for
	// acknowledged a write in time. An acquisition was abandoned; a
	// Lock.Extend or Permit.Extend kept what it set.
	ErrNotReplicated = errors.New("not replicated")
)

// MarkError is part of MarkActiveMany's error (errors.As) when the call
// failed after it began to write: Marked of the Of ids it was given (an id
// given twice counts twice) are marked for certain, and any of the others
// may be. Marking is idempotent: calling MarkActiveMany again with the same
// ids marks the rest, and counts stay exact.
type MarkError struct {
	Marked, Of int
	Err        error // what failed
}

func (e *MarkError) Error() string {
	return strconv.Itoa(e.Marked) + " of " + strconv.Itoa(e.Of) + " ids marked for certain: " + e.Err.Error()
}

func (e *MarkError) Unwrap() error { return e.Err }

// Error is what the engine's calls return: the object (its kind and
// name) and what happened to it, which wraps the sentinel errors or the
// Redis or network failure behind it. Object is "" for errors about the
// engine itself.
type Error struct {
	Object string // one of the Object constants
	Name   string
	Err    error
}

// The objects an Error or an Event names in its Object field.
const (
	ObjectLock          = "lock"
	ObjectReadWriteLock = "read-write lock"
	ObjectSemaphore     = "semaphore"
	ObjectRecentList    = "recent list"
	ObjectMemberSet     = "member set"
	ObjectActivityGroup = "activity group"
	ObjectElection      = "election"
)

func (e *Error) Error() string {
	if e.Object == "" {
		return "atomicredis: " + e.Err.Error()
	}
	return "atomicredis: " + e.Object + " " + quoteName(e.Name) + ": " + e.Err.Error()
}

// quotedName is how many bytes of a name an error's text quotes.
const quotedName = 64

// quoteName quotes name, or its first quotedName bytes (cut at a rune's
// start) followed by "...".
func quoteName(name string) string {
	if len(name) <= quotedName {
		return strconv.Quote(name)
	}
	cut := quotedName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]) + "..."
}

func (e *Error) Unwrap() error { return e.Err }
