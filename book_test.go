package atomicredis

// The book's chapter 6 code (Redis in Action, Python), translated to redigo
// as faithfully as Go allows: the baselines the benchmarks compare against
// and the reliability tests catch failing. Each function names its listing.
// Keys are passed whole (the book prepends "lock:", "semaphore:" etc.).

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

// bookAcquireLock follows listing 6.8, acquire_lock: SETNX, retry every 1 ms.
func bookAcquireLock(c redis.Conn, lock string, acquireTimeout time.Duration, retries *atomic.Int64) (string, error) {
	id := uuid.NewString()
	end := time.Now().Add(acquireTimeout)
	for time.Now().Before(end) {
		ok, err := redis.Bool(c.Do("SETNX", lock, id))
		if err != nil {
			return "", err
		}
		if ok {
			return id, nil
		}
		retries.Add(1)
		time.Sleep(time.Millisecond)
	}
	return "", nil
}

// bookReleaseLock follows listing 6.9, release_lock: WATCH, GET, compare,
// MULTI/DEL/EXEC, and start again if the WATCH fired.
func bookReleaseLock(c redis.Conn, lock, id string) (bool, error) {
	for {
		if _, err := c.Do("WATCH", lock); err != nil {
			return false, err
		}
		v, err := redis.String(c.Do("GET", lock))
		if err != nil && !errors.Is(err, redis.ErrNil) {
			return false, err
		}
		if v != id {
			_, err := c.Do("UNWATCH")
			return false, err
		}
		c.Send("MULTI")
		c.Send("DEL", lock)
		reply, err := c.Do("EXEC")
		if err != nil {
			return false, err
		}
		if reply != nil { // nil: the WATCH fired, try again
			return true, nil
		}
	}
}

// bookAcquireLockWithTimeout follows listing 6.11,
// acquire_lock_with_timeout: SETNX, then EXPIRE in a second round trip; a
// waiter that finds a lock with no TTL gives it one.
func bookAcquireLockWithTimeout(c redis.Conn, lock string, acquireTimeout, lockTimeout time.Duration, retries *atomic.Int64) (string, error) {
	id := uuid.NewString()
	secs := int64((lockTimeout + time.Second - 1) / time.Second) // math.ceil
	end := time.Now().Add(acquireTimeout)
	for time.Now().Before(end) {
		ok, err := redis.Bool(c.Do("SETNX", lock, id))
		if err != nil {
			return "", err
		}
		if ok {
			if _, err := c.Do("EXPIRE", lock, secs); err != nil {
				return "", err
			}
			return id, nil
		}
		if ttl, err := redis.Int64(c.Do("TTL", lock)); err == nil && ttl == -1 {
			c.Do("EXPIRE", lock, secs)
		}
		retries.Add(1)
		time.Sleep(time.Millisecond)
	}
	return "", nil
}
