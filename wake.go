package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Waiting: a queue on the server, handed over inside the release script,
// and one subscription per engine that carries the grant to the waiter

const (
	// defaultQueueTTL is how long a waiter's queue entry lives unless
	// extended; a waiter extends it three times as often. A waiter that died
	// costs the others at most this long.
	defaultQueueTTL = time.Second
	// subscriptionTimeout is how long the wake subscription may stay
	// silent before it is taken for dead; it is pinged three times as
	// often.
	subscriptionTimeout = 3 * time.Second
	// subscriptionIdle is how long the wake subscription outlives the
	// engine's last waiter, so that a busy name does not subscribe anew for
	// every wait.
	subscriptionIdle = 2 * time.Second
)

// subscriptionBudget is how many connections an engine's waiting may hold
// blocked: half of a *redis.Pool's MaxActive (so that holders can always
// reach the server to unlock and extend), else 64. It needs one; with a
// pool of MaxActive 1 it has none, and waiters learn of a handoff when
// they extend, a third of the queue TTL late.
func subscriptionBudget(pool Pool) int {
	if p, ok := pool.(*redis.Pool); ok && p != nil && p.MaxActive > 0 {
		return p.MaxActive / 2
	}
	return 64
}

// waker is an engine's subscription to its wake channel, <ns>wake:<engine
// id>, on which a release script that hands one of the engine's waiters a
// lock or a permit publishes "token fence arrival" (the arrival number of
// the queue entry it was handed to, so that a grant to an entry that has
// since lapsed is never taken for a later one's), and an election's
// scripts publish its state to the engines observing it ("!...",
// lib/election.lua). It runs while the engine has waiters or observers,
// and a little longer, on one connection whatever the number of
// names they wait on (on a cluster, a publish reaches every node, so one
// subscription anywhere hears all). Messages can be lost (pub/sub is at
// most once): a waiter also extends its queue entry, which picks up what it
// was handed, and after every (re)subscription every waiter looks at once.
type waker struct {
	e       *Engine
	channel string
	budget  int // subscriptionBudget

	mu        sync.Mutex
	waiting   map[string]*waiter                // by token
	observing map[string]map[*observer]struct{} // an election's observers, by its lock key
	running   bool                              // the subscription's goroutine runs
	quit      bool                              // it is to end: nobody waits, or the engine closed
	sub       Subscription                      // the current subscription, nil between two
	idleTimer *time.Timer                       // ends the subscription once nobody has waited for subscriptionIdle
	stopped   chan struct{}                     // closed (and replaced) to cut the goroutine's pause after a failure short
}

// waiter is one goroutine waiting for a grant.
type waiter struct {
	signal chan struct{} // buffered: a wake-up, or a call to look again

	mu      sync.Mutex
	fence   int64 // the fence a wake-up handed over; 0: none yet
	arrival int64 // the arrival number of the queue entry it was handed to
}

// wake hands w fence for its entry of arrival number arrival (fence 0: no
// grant, look again) and signals it.
func (w *waiter) wake(fence, arrival int64) {
	if fence != 0 {
		w.mu.Lock()
		w.fence, w.arrival = fence, arrival
		w.mu.Unlock()
	}
	select {
	case w.signal <- struct{}{}:
	default: // signalled already
	}
}

// handed returns the last grant a wake-up brought, and forgets it.
func (w *waiter) handed() (fence, arrival int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fence, arrival = w.fence, w.arrival
	w.fence, w.arrival = 0, 0
	return fence, arrival
}

// join registers a waiter for token and makes sure the subscription runs.
func (k *waker) join(token string) *waiter {
	w := &waiter{signal: make(chan struct{}, 1)}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.waiting == nil {
		k.waiting = map[string]*waiter{}
	}
	k.waiting[token] = w
	k.busy()
	return w
}

// observe registers an election's observer, by the election's lock key,
// and makes sure the subscription runs.
func (k *waker) observe(key string, o *observer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.observing == nil {
		k.observing = map[string]map[*observer]struct{}{}
	}
	if k.observing[key] == nil {
		k.observing[key] = map[*observer]struct{}{}
	}
	k.observing[key][o] = struct{}{}
	k.busy()
}

// unobserve forgets an observer; the last one out, of observers and
// waiters, starts the idle timer.
func (k *waker) unobserve(key string, o *observer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.observing[key], o)
	if len(k.observing[key]) == 0 {
		delete(k.observing, key)
	}
	k.settle()
}

// unused reports whether nobody waits or observes. Called with mu held.
func (k *waker) unused() bool { return len(k.waiting) == 0 && len(k.observing) == 0 }

// busy makes sure the subscription runs, now that someone waits or
// observes. Called with mu held.
func (k *waker) busy() {
	if k.idleTimer != nil {
		k.idleTimer.Stop()
		k.idleTimer = nil
	}
	k.quit = false
	// Never run k.run here directly: on an engine closed meanwhile it would run
	// k.run on this goroutine, which holds k.mu that run takes.
	if !k.running && k.budget > 0 && k.e.goTracked(k.run) {
		k.running = true // run takes k.mu first, so it sees this
	}
}

// leave forgets token's waiter; the last one out, of waiters and
// observers, starts the idle timer.
func (k *waker) leave(token string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.waiting, token)
	k.settle()
}

// settle starts the idle timer if nobody waits or observes any more.
// Called with mu held.
func (k *waker) settle() {
	if k.unused() && k.running && k.idleTimer == nil {
		k.idleTimer = time.AfterFunc(k.e.subIdle, k.idleEnd)
	}
}

// idleEnd ends the subscription if nobody has waited since the timer was
// set.
func (k *waker) idleEnd() {
	k.mu.Lock()
	if !k.unused() || k.idleTimer == nil {
		k.mu.Unlock()
		return
	}
	k.idleTimer = nil
	k.stop()
}

// end ends the subscription for good (Engine.Close).
func (k *waker) end() {
	k.mu.Lock()
	if k.idleTimer != nil {
		k.idleTimer.Stop()
		k.idleTimer = nil
	}
	k.stop()
}

// stop tells the goroutine to end, and ends the subscription. Called with
// mu held; it unlocks it.
func (k *waker) stop() {
	k.quit = true
	sub := k.sub
	if k.stopped != nil {
		close(k.stopped)
		k.stopped = nil
	}
	k.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}

// run subscribes and listens until told to quit, subscribing again after
// a failure.
func (k *waker) run() {
	var pause time.Duration
	for {
		k.mu.Lock()
		if k.quit || k.e.isClosed() {
			k.running = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		sub, err := k.subscribe()
		heard := false
		if err == nil {
			heard, err = k.listen(sub)
		}
		if err == nil {
			pause = 0
			continue
		}
		k.e.emit(Event{Type: EventBackgroundError, Err: &Error{Err: fmt.Errorf("wake subscription %s: %w", k.channel, err)}})
		if heard { // it was up, and was cut: subscribe again after the shortest pause
			pause = 0
		}
		pause = backoff(pause, time.Second)
		k.mu.Lock()
		if k.unused() { // nobody to wake: the next waiter or observer subscribes anew
			k.running = false
			k.mu.Unlock()
			return
		}
		if k.stopped == nil {
			k.stopped = make(chan struct{})
		}
		stopped := k.stopped
		k.mu.Unlock()
		t := time.NewTimer(pause)
		select { // the pause; idleEnd and end cut it short
		case <-t.C:
		case <-stopped:
		case <-k.e.stop.Done():
		}
		t.Stop()
	}
}

// subscribe subscribes to the wake channel: through the pool if it is a
// Subscriber, else on one of its connections.
func (k *waker) subscribe() (Subscription, error) {
	ctx, cancel := context.WithTimeout(k.e.stop, k.e.callTimeout)
	defer cancel()
	if s, ok := k.e.pool.(Subscriber); ok {
		return s.Subscribe(ctx, k.channel)
	}
	c, err := k.e.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	if b, ok := c.(binder); ok {
		if err := b.Bind(k.channel); err != nil { // any node: a publish reaches them all
			c.Close()
			return nil, err
		}
	}
	if err := c.Send("SUBSCRIBE", k.channel); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	return &connSubscription{c: c}, nil
}

// listen delivers the subscription's messages until it ends; nil if it
// ended because it was told to. heard: the server confirmed the
// subscription.
func (k *waker) listen(sub Subscription) (heard bool, err error) {
	k.mu.Lock()
	if k.quit {
		k.mu.Unlock()
		sub.Close()
		return false, nil
	}
	k.sub = sub
	k.mu.Unlock()
	stopPing, pinged := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pinged)
		t := time.NewTicker(subscriptionTimeout / 3)
		defer t.Stop()
		for {
			select {
			case <-stopPing:
				return
			case <-t.C:
				sub.Ping() // a failed ping shows as a failed Receive
			}
		}
	}()
	defer func() {
		close(stopPing)
		<-pinged
		k.mu.Lock()
		k.sub = nil
		k.mu.Unlock()
		sub.Close()
	}()
	for {
		payload, subscribed, err := sub.Receive(subscriptionTimeout)
		switch {
		case err != nil:
			k.mu.Lock()
			quit := k.quit
			k.mu.Unlock()
			if quit {
				return heard, nil
			}
			return heard, err
		case subscribed:
			heard = true
			k.lookAgain()
		case payload != "":
			k.deliver(payload)
		}
	}
}

// deliver hands a wake-up ("token fence arrival"; fence 0: look again) to
// its waiter; one for a waiter that has left is dropped (its abandon script passes on what it
// was handed). An election's state ("!...", lib/election.lua) goes to its
// observers.
func (k *waker) deliver(payload string) {
	if strings.HasPrefix(payload, "!") {
		st, err := parseElectionState(payload)
		if err != nil {
			return
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		for o := range k.observing[st.key] {
			o.deliver(st)
		}
		return
	}
	wu, err := parseWakeup(payload)
	if err != nil {
		return
	}
	k.mu.Lock()
	w := k.waiting[wu.token]
	k.mu.Unlock()
	if w != nil {
		w.wake(wu.fence, wu.arrival) // fence 0: look again (a semaphore refused the waiter's weight)
		if wu.fence != 0 {
			// Let the waiter just woken run before the next message wakes
			// another: Go runs the goroutine readied last first, so grants
			// read in one burst (a semaphore's releases that come
			// together) would otherwise return last-handed first.
			runtime.Gosched()
		}
	}
}

// wakeup is a wake-up as lib/queue.lua's q_wake makes it, published on
// an engine's wake channel or carried in a release script's reply:
// "token fence arrival".
type wakeup struct {
	token   string
	fence   int64 // what the waiter was handed; 0: look again
	arrival int64 // the arrival number of the queue entry it was handed to
}

// parseWakeup reads a wake-up.
func parseWakeup(msg string) (wakeup, error) {
	token, rest, ok := strings.Cut(msg, " ")
	f, a, ok2 := strings.Cut(rest, " ")
	fence, err := strconv.ParseInt(f, 10, 64)
	arrival, err2 := strconv.ParseInt(a, 10, 64)
	if !ok || !ok2 || err != nil || err2 != nil {
		return wakeup{}, fmt.Errorf("unexpected wake-up %q", msg)
	}
	return wakeup{token: token, fence: fence, arrival: arrival}, nil
}

// wakeOwn delivers the wake-ups a release script handed to waiters of
// this engine and did not publish (releaseReply.wakeups), as the
// subscription would have.
func (e *Engine) wakeOwn(wakeups []string) {
	for _, msg := range wakeups {
		e.wake.deliver(msg)
	}
}

// lookAgain has every waiter call the server at once, and every observer
// read its election's state: what was published while the subscription
// was down is lost.
func (k *waker) lookAgain() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.waiting {
		w.wake(0, 0)
	}
	for _, observers := range k.observing {
		for o := range observers {
			o.lookAgain()
		}
	}
}

// connSubscription is a Subscription on a connection in subscribe mode.
// redigo lets one goroutine send while another receives; mu keeps the
// senders (Ping, Close) to one at a time.
type connSubscription struct {
	c redis.Conn

	mu        sync.Mutex
	receiving bool
	closed    bool
	released  bool
}

var errSubscriptionClosed = errors.New("subscription closed")

func (s *connSubscription) Receive(timeout time.Duration) (payload string, subscribed bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", false, errSubscriptionClosed
	}
	s.receiving = true
	s.mu.Unlock()
	var v any
	if cc, ok := s.c.(redis.ConnWithTimeout); ok {
		v, err = cc.ReceiveWithTimeout(timeout)
	} else {
		v, err = s.c.Receive()
	}
	s.mu.Lock()
	s.receiving = false
	if s.closed {
		s.release()
		err = errSubscriptionClosed
	}
	s.mu.Unlock()
	if err != nil {
		return "", false, err
	}
	parts, _ := v.([]any)
	if len(parts) < 2 {
		return "", false, fmt.Errorf("unexpected reply %v", v)
	}
	what, _ := redis.String(parts[0], nil)
	switch what {
	case "message":
		if len(parts) == 3 {
			payload, err = redis.String(parts[2], nil)
		}
		return payload, false, err
	case "subscribe":
		return "", true, nil
	case "unsubscribe":
		return "", false, errSubscriptionClosed
	}
	return "", false, nil // a PING's reply
}

func (s *connSubscription) Ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSubscriptionClosed
	}
	if err := s.c.Send("PING"); err != nil {
		return err
	}
	return s.c.Flush()
}

// Close unsubscribes if a Receive is waiting (which then gives the
// connection back), else gives the connection back at once.
func (s *connSubscription) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.receiving {
		if err := s.c.Send("UNSUBSCRIBE"); err != nil {
			return err
		}
		return s.c.Flush()
	}
	s.release()
	return nil
}

// release gives the connection up. A connection that was subscribed never
// goes back to a pool, since a message may still be on its way to it
// (miniredis delivers them from a goroutine of its own): a read that times
// out breaks it, and the pool drops a broken connection.
func (s *connSubscription) release() {
	if s.released {
		return
	}
	s.released = true
	if cc, ok := s.c.(redis.ConnWithTimeout); ok {
		for i := 0; i < 100; i++ {
			if _, err := cc.ReceiveWithTimeout(time.Nanosecond); err != nil {
				break
			}
		}
	}
	s.c.Close()
}
