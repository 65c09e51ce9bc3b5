package atomicredis

// The book's chapter 6 code (Redis in Action, Python), translated to redigo
// as faithfully as Go allows: the baselines the benchmarks compare against
// and the reliability tests catch failing. Each function names its listing.
// Keys are passed whole (the book prepends "lock:", "semaphore:" etc.).

import (
	"errors"
	"strings"
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

// bookAcquireFairSemaphore follows listing 6.14, acquire_fair_semaphore:
// two MULTI/EXEC round trips, timed by the client's clock. now is passed in
// so tests can skew a client's clock (the book calls time.time()).
func bookAcquireFairSemaphore(c redis.Conn, sem string, limit int, timeout time.Duration, now time.Time) (string, error) {
	id := uuid.NewString()
	czset, ctr := sem+":owner", sem+":counter"
	t := float64(now.UnixNano()) / 1e9
	c.Send("MULTI")
	c.Send("ZREMRANGEBYSCORE", sem, "-inf", t-timeout.Seconds())
	c.Send("ZINTERSTORE", czset, 2, czset, sem, "WEIGHTS", 1, 0)
	c.Send("INCR", ctr)
	r, err := redis.Values(c.Do("EXEC"))
	if err != nil {
		return "", err
	}
	counter, err := redis.Int64(r[2], nil)
	if err != nil {
		return "", err
	}
	c.Send("MULTI")
	c.Send("ZADD", sem, t, id)
	c.Send("ZADD", czset, counter, id)
	c.Send("ZRANK", czset, id)
	r, err = redis.Values(c.Do("EXEC"))
	if err != nil {
		return "", err
	}
	if rank, err := redis.Int64(r[2], nil); err == nil && rank < int64(limit) {
		return id, nil
	}
	c.Send("MULTI")
	c.Send("ZREM", sem, id)
	c.Send("ZREM", czset, id)
	_, err = c.Do("EXEC")
	return "", err
}

// bookReleaseFairSemaphore follows listing 6.15, release_fair_semaphore.
func bookReleaseFairSemaphore(c redis.Conn, sem, id string) (bool, error) {
	c.Send("MULTI")
	c.Send("ZREM", sem, id)
	c.Send("ZREM", sem+":owner", id)
	r, err := redis.Values(c.Do("EXEC"))
	if err != nil {
		return false, err
	}
	n, err := redis.Int(r[0], nil)
	return n == 1, err
}

// bookRefreshFairSemaphore follows listing 6.16, refresh_fair_semaphore:
// ZADD first; if that added the id (it had timed out), release it again.
func bookRefreshFairSemaphore(c redis.Conn, sem, id string, now time.Time) (bool, error) {
	added, err := redis.Int(c.Do("ZADD", sem, float64(now.UnixNano())/1e9, id))
	if err != nil {
		return false, err
	}
	if added == 1 {
		_, err := bookReleaseFairSemaphore(c, sem, id)
		return false, err
	}
	return true, nil
}

// bookAcquireSemaphoreWithLock follows listing 6.17,
// acquire_semaphore_with_lock: the fair semaphore under acquire_lock with a
// 10 ms acquire timeout.
func bookAcquireSemaphoreWithLock(c redis.Conn, sem string, limit int, timeout time.Duration, retries *atomic.Int64) (string, error) {
	lockID, err := bookAcquireLock(c, "lock:"+sem, 10*time.Millisecond, retries)
	if err != nil || lockID == "" {
		return "", err
	}
	defer bookReleaseLock(c, "lock:"+sem, lockID)
	return bookAcquireFairSemaphore(c, sem, limit, timeout, time.Now())
}

// bookValidCharacters and bookFindPrefixRange follow listing 6.3,
// find_prefix_range: markers from a lowercase alphabet bracketed by ` and {.
const bookValidCharacters = "`abcdefghijklmnopqrstuvwxyz{"

func bookFindPrefixRange(prefix string) (string, string) {
	last := ""
	if prefix != "" {
		last = prefix[len(prefix)-1:]
	}
	posn := strings.Index(bookValidCharacters, last) // bisect_left on a sorted alphabet
	if last == "" {
		posn = 0
	}
	if posn < 1 {
		posn = 1
	}
	suffix := bookValidCharacters[posn-1 : posn]
	return prefix[:max(len(prefix)-1, 0)] + suffix + "{", prefix + "{"
}

// bookAutocompleteOnPrefix follows listing 6.4, autocomplete_on_prefix:
// uuid-suffixed markers, a WATCH loop, at most 10 results, and names
// containing '{' filtered out.
func bookAutocompleteOnPrefix(c redis.Conn, zset, prefix string, retries *atomic.Int64) ([]string, error) {
	start, end := bookFindPrefixRange(prefix)
	id := uuid.NewString()
	start += id
	end += id
	if _, err := c.Do("ZADD", zset, 0, start, 0, end); err != nil {
		return nil, err
	}
	var items []string
	for {
		if _, err := c.Do("WATCH", zset); err != nil {
			return nil, err
		}
		sindex, err := redis.Int(c.Do("ZRANK", zset, start))
		if err != nil {
			return nil, err
		}
		eindex, err := redis.Int(c.Do("ZRANK", zset, end))
		if err != nil {
			return nil, err
		}
		erange := min(sindex+9, eindex-2)
		c.Send("MULTI")
		c.Send("ZREM", zset, start, end)
		c.Send("ZRANGE", zset, sindex, erange)
		r, err := redis.Values(c.Do("EXEC"))
		if errors.Is(err, redis.ErrNil) { // the WATCH fired
			retries.Add(1)
			continue
		}
		if err != nil {
			return nil, err
		}
		items, err = redis.Strings(r[1], nil)
		if err != nil {
			return nil, err
		}
		break
	}
	out := items[:0]
	for _, it := range items {
		if !strings.Contains(it, "{") {
			out = append(out, it)
		}
	}
	return out, nil
}

// bookListItem follows listing 4.4, list_item: WATCH the seller's
// inventory, then MULTI ZADD market / SREM inventory.
func bookListItem(c redis.Conn, market, itemID, seller string, price int, retries *atomic.Int64) (bool, error) {
	inventory := "inventory:" + seller
	item := itemID + "." + seller
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		c.Do("WATCH", inventory)
		ok, err := redis.Bool(c.Do("SISMEMBER", inventory, itemID))
		if err != nil {
			return false, err
		}
		if !ok {
			c.Do("UNWATCH")
			return false, nil
		}
		c.Send("MULTI")
		c.Send("ZADD", market, price, item)
		c.Send("SREM", inventory, itemID)
		r, err := c.Do("EXEC")
		if err != nil {
			return false, err
		}
		if r != nil {
			return true, nil
		}
		retries.Add(1)
	}
	return false, nil
}

// bookPurchaseItem follows listing 4.5, purchase_item: WATCH the market and
// the buyer, check price and funds, MULTI the transfer, retry on a fired
// WATCH for up to 10 s.
func bookPurchaseItem(c redis.Conn, market, buyer, itemID, seller string, price int, retries *atomic.Int64) (bool, error) {
	buyerKey, sellerKey := "users:"+buyer, "users:"+seller
	item := itemID + "." + seller
	inventory := "inventory:" + buyer
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		c.Do("WATCH", market, buyerKey)
		p, perr := redis.Int(c.Do("ZSCORE", market, item))
		funds, err := redis.Int(c.Do("HGET", buyerKey, "funds"))
		if err != nil {
			return false, err
		}
		if perr != nil || p != price || p > funds {
			c.Do("UNWATCH")
			return false, nil
		}
		c.Send("MULTI")
		c.Send("HINCRBY", sellerKey, "funds", p)
		c.Send("HINCRBY", buyerKey, "funds", -p)
		c.Send("SADD", inventory, itemID)
		c.Send("ZREM", market, item)
		r, err := c.Do("EXEC")
		if err != nil {
			return false, err
		}
		if r != nil {
			return true, nil
		}
		retries.Add(1)
	}
	return false, nil
}

// bookPurchaseItemWithLock follows listing 6.10, purchase_item_with_lock:
// the same purchase under acquire_lock on lockName — "market:" for the
// book's coarse lock, the item for the fine-grained variant.
func bookPurchaseItemWithLock(c redis.Conn, market, lockName, buyer, itemID, seller string, retries *atomic.Int64) (bool, error) {
	buyerKey, sellerKey := "users:"+buyer, "users:"+seller
	item := itemID + "." + seller
	inventory := "inventory:" + buyer
	locked, err := bookAcquireLock(c, "lock:"+lockName, 10*time.Second, retries)
	if err != nil || locked == "" {
		return false, err
	}
	defer bookReleaseLock(c, "lock:"+lockName, locked)
	c.Send("MULTI")
	c.Send("ZSCORE", market, item)
	c.Send("HGET", buyerKey, "funds")
	r, err := redis.Values(c.Do("EXEC"))
	if err != nil {
		return false, err
	}
	price, perr := redis.Int(r[0], nil)
	funds, _ := redis.Int(r[1], nil)
	if perr != nil || price > funds {
		return false, nil
	}
	c.Send("MULTI")
	c.Send("HINCRBY", sellerKey, "funds", price)
	c.Send("HINCRBY", buyerKey, "funds", -price)
	c.Send("SADD", inventory, itemID)
	c.Send("ZREM", market, item)
	_, err = c.Do("EXEC")
	return err == nil, err
}

// bookListItemWithLock is list_item run under acquire_lock on lockName, as
// the book's lock-based marketplace does for Table 6.3.
func bookListItemWithLock(c redis.Conn, market, lockName, itemID, seller string, price int, retries *atomic.Int64) error {
	locked, err := bookAcquireLock(c, "lock:"+lockName, 10*time.Second, retries)
	if err != nil || locked == "" {
		return err
	}
	defer bookReleaseLock(c, "lock:"+lockName, locked)
	inventory := "inventory:" + seller
	ok, err := redis.Bool(c.Do("SISMEMBER", inventory, itemID))
	if err != nil || !ok {
		return err
	}
	c.Send("MULTI")
	c.Send("ZADD", market, price, itemID+"."+seller)
	c.Send("SREM", inventory, itemID)
	_, err = c.Do("EXEC")
	return err
}
