package atomicredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Elections: a lock of its own keys whose holder leads, its Owner the
// leader's value and its fence the term; observers hear of each change
// through their engine's wake subscription

// ErrNoLeader: the election has no leader now (Election.Leader).
var ErrNoLeader = errors.New("no leader")

// Election is a named leader election (Engine.Election). Its methods are
// safe for concurrent use.
type Election struct {
	e    *Engine
	name string
	o    ElectionOptions
}

// ElectionOptions tunes a candidate's leadership. The zero value means
// the defaults.
type ElectionOptions struct {
	TTL time.Duration // the leadership's lease, which the watchdog extends; 0 = 10s
}

// Leader is an election's state: the leader's value (its Owner), its term
// (its lock's fence) and its remaining lease when it was read. The zero
// Leader means no leader.
type Leader struct {
	Value string
	Term  int64
	TTL   time.Duration
}

// electionOps: an election is a lock (lockOps' keys under the word
// "election", so Election("x") and Lock("x") never meet), whose acquire,
// abandon, release and SetOwner scripts tell its observers (loadObserved);
// extending changes no state an observer sees.
var electionOps = &holdOps{kind: kindElection, suffixes: []string{"", ":fence", ":queue", ":waiters"},
	extendKeys: 1, pttlKeys: 1, acquire: scriptElAcquire, abandon: scriptElAbandon,
	release: scriptElRelease, extend: scriptElExtend, pttl: scriptElPTTL, owner: scriptElOwner, wakesOwn: true,
	observed: true}

// campaignWait is how long a campaign waits: until its ctx ends.
const campaignWait = 100 * 365 * 24 * time.Hour

// observerRegistration is how long an engine stays registered as observing
// an election without renewing; it renews every third of it.
const observerRegistration = 9 * time.Second

// Election returns the named election, whose candidates campaign with o.
// The name is checked by each call.
func (e *Engine) Election(name string, o ElectionOptions) *Election {
	return &Election{e: e, name: name, o: o}
}

// Campaign waits in FIFO order behind the other candidates until this one
// leads, or ctx ends (an error wrapping ErrNotAcquired and ctx.Err()). A
// new election's first term waits one lease, the candidate's TTL (see
// "Elections" in the package doc). The leadership is a watchdog *Lock: its
// Owner is value (at most MaxOwner bytes), its Fence the term; Unlock
// resigns, SetOwner proclaims another value, and Lost and Context end when
// the leadership is lost.
func (el *Election) Campaign(ctx context.Context, value string) (*Lock, error) {
	if el != nil && el.e.hooked() {
		return hooked(el.e, ctx, Operation{ObjectElection, el.name, "Campaign"}, func(ctx context.Context) (*Lock, error) { return el.campaign(ctx, value) })
	}
	return el.campaign(ctx, value)
}

// campaign is Campaign.
func (el *Election) campaign(ctx context.Context, value string) (*Lock, error) {
	if el == nil || el.e == nil {
		return nil, &Error{Object: ObjectElection, Err: fmt.Errorf("nil election or engine: %w", ErrInvalid)}
	}
	l := &Lock{}
	err := el.e.take(ctx, &l.holding, el.name, request{ops: electionOps, ttl: el.o.TTL, wait: campaignWait,
		mayWait: true, watchdog: true, owner: value})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Leader returns the election's leader now, or an error wrapping
// ErrNoLeader when there is none, in one script that writes nothing.
func (el *Election) Leader(ctx context.Context) (Leader, error) {
	if el != nil && el.e.hooked() {
		return hooked(el.e, ctx, Operation{ObjectElection, el.name, "Leader"}, func(ctx context.Context) (Leader, error) { return el.leader(ctx) })
	}
	return el.leader(ctx)
}

// leader is Leader.
func (el *Election) leader(ctx context.Context) (Leader, error) {
	obj, err := el.object()
	if err != nil {
		return Leader{}, err
	}
	if ctx == nil {
		return Leader{}, obj.err(errNilContext)
	}
	st, err := el.e.electionState(ctx, obj, scriptElLeader, obj.key(""), obj.key(":fence"))
	if err != nil {
		return Leader{}, err
	}
	if !st.leads {
		return Leader{}, obj.errorf("term %d ended: %w", st.term, ErrNoLeader)
	}
	return st.leader(), nil
}

// Observe returns a channel that receives the election's state now, then
// every change of leader or of its value (a zero Leader: none), and is
// closed when ctx ends or the engine closes. A reader that falls behind
// gets the latest state, never an older one after a newer. With a bad
// name, a nil ctx or a closed engine the channel is closed at once. Each
// call runs a goroutine until its ctx ends. How it learns of changes:
// "Elections" in the package doc.
func (el *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	obj, err := el.object()
	if err != nil || ctx == nil {
		close(out)
		return out
	}
	o := &observer{e: el.e, obj: obj, out: out, signal: make(chan struct{}, 1),
		keys: []any{obj.key(""), obj.key(":fence"), obj.key(":observers")}}
	if !el.e.goTracked(func() { o.run(ctx) }) {
		close(out)
	}
	return out
}

func (el *Election) object() (object, error) {
	if el == nil || el.e == nil {
		return object{}, &Error{Object: ObjectElection, Err: fmt.Errorf("nil election or engine: %w", ErrInvalid)}
	}
	return el.e.object(kindElection, el.name)
}

// electionState is an election's state as its scripts tell it.
type electionState struct {
	key    string // the election's lock key (its index among observers)
	term   int64  // the leader's, or the last one handed out
	leads  bool   // a leader holds it
	ttl    time.Duration
	change int64 // a leader's: how many times it proclaimed in its term
	value  string
}

func (st electionState) leader() Leader {
	if !st.leads {
		return Leader{}
	}
	return Leader{Value: st.value, Term: st.term, TTL: st.ttl}
}

// after reports whether st comes after prev: a higher term; in one term,
// no leader after its leader, and a leader's readings of its value in the
// order it proclaimed them (a reading of the same value: its later TTL).
// A message published before a read was answered may arrive after it.
func (st electionState) after(prev electionState) bool {
	switch {
	case st.term != prev.term:
		return st.term > prev.term
	case prev.leads && st.leads:
		return st.change >= prev.change
	case prev.leads:
		return true
	}
	return !st.leads
}

// parseElectionState reads "!term pttl keylen key owner" (lib/election.lua),
// a leader's owner being "change value".
func parseElectionState(msg string) (electionState, error) {
	var st electionState
	bad := fmt.Errorf("unexpected election state %q", msg)
	rest, ok := strings.CutPrefix(msg, "!")
	term, rest, ok2 := strings.Cut(rest, " ")
	pttl, rest, ok3 := strings.Cut(rest, " ")
	keylen, rest, ok4 := strings.Cut(rest, " ")
	n, err := strconv.Atoi(keylen)
	if !ok || !ok2 || !ok3 || !ok4 || err != nil || n < 0 || n > len(rest) {
		return st, bad
	}
	st.key, st.value = rest[:n], rest[n:]
	var err2 error
	st.term, err = strconv.ParseInt(term, 10, 64)
	ms, err2 := strconv.ParseInt(pttl, 10, 64)
	if err != nil || err2 != nil {
		return st, bad
	}
	st.leads = ms >= 0
	st.ttl = time.Duration(max(ms, 0)) * time.Millisecond
	if st.leads {
		change, value, ok := strings.Cut(st.value, " ")
		if st.change, err = strconv.ParseInt(change, 10, 64); !ok || err != nil {
			return st, bad
		}
		st.value = value
	}
	return st, nil
}

// electionState runs a script that replies with an election's state.
func (e *Engine) electionState(ctx context.Context, obj object, s *script, keysAndArgs ...any) (electionState, error) {
	msg, err := redis.String(e.eval(ctx, obj, s, keysAndArgs...))
	if err != nil {
		return electionState{}, err
	}
	st, err := parseElectionState(msg)
	if err != nil {
		return st, obj.err(err)
	}
	return st, nil
}

// observer is one Observe call: it registers its engine as observing,
// reads the state when it must, and takes the states the wake
// subscription delivers (on the subscription's goroutine, so a change
// reaches the reader with no hop of its own).
type observer struct {
	e      *Engine
	obj    object
	keys   []any // lock, fence counter, observers
	out    chan Leader
	signal chan struct{} // buffered: a state arrived, or read again

	mu       sync.Mutex
	again    bool          // the subscription was (re)made: read again
	heard    int64         // states delivered by the subscription, ever
	cur      electionState // the latest state taken
	have     bool          // cur is set
	leaseEnd time.Time     // when cur's leader's lease runs out unless extended
	readAt   time.Time     // when the last read was sent
	sent     Leader        // the latest sent
	sentAny  bool
	closed   bool // out is closed
}

// deliver is the wake subscription handing o a state.
func (o *observer) deliver(st electionState) {
	o.mu.Lock()
	o.heard++
	o.take(st, false)
	o.mu.Unlock()
	o.poke() // the lease's end may have moved
}

// lookAgain is the wake subscription telling o it was (re)made.
func (o *observer) lookAgain() {
	o.mu.Lock()
	o.again = true
	o.mu.Unlock()
	o.poke()
}

func (o *observer) poke() {
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

// take makes st the current state unless it is older, and sends it if the
// leader or its value changed: the latest replaces one the reader has not
// taken. A read (read: the observer's own, taken only if nothing was
// delivered while it ran) is the server's state now: in its term it
// replaces any other, even one of a later proclamation (a failover may
// lose one, or give the term again), where a message that names an
// earlier proclamation is a late one. Called with mu held, so one sender
// at a time: the send finds room.
func (o *observer) take(st electionState, read bool) {
	if read && o.have && o.cur.leads && !st.leads && st.term < o.cur.term && time.Now().After(o.leaseEnd) {
		// No leader, and a lower last term: the counter is gone (a leader
		// held past the fence retention). The leader's lease is over by
		// this clock too: it is no leader after its leader. (A resign's
		// message names the leader's term itself; a message of a lower
		// term is a late one.)
		st.term = o.cur.term
	}
	if o.closed || o.have && !st.after(o.cur) && !(read && st.term == o.cur.term) {
		return
	}
	o.cur, o.have, o.leaseEnd = st, true, time.Now().Add(st.ttl)
	l := st.leader()
	if o.sentAny && l.Term == o.sent.Term && l.Value == o.sent.Value {
		return // only the TTL changed
	}
	o.sent, o.sentAny = l, true
	select {
	case <-o.out:
	default:
	}
	o.out <- l
	if o.e != nil { // nil in a test of take alone
		o.e.observe(Event{Type: EventLeaderChanged, Object: ObjectElection, Name: o.obj.name, Fence: l.Term})
	}
}

// nextRead is when o must read again at the latest, given the next
// registration: at the leader's lease's end, when no script may say so,
// but not sooner than a moment after the last read (a read past the end
// that changed nothing is not sent again at once).
func (o *observer) nextRead(registration time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if end := o.leaseEnd.Add(2 * time.Millisecond); o.have && o.cur.leads && end.Before(registration) {
		if again := o.readAt.Add(observerReread); end.Before(again) {
			return again
		}
		return end
	}
	return registration
}

// observerReread is the least time between two reads of an observer that
// a lease's end calls for.
const observerReread = 20 * time.Millisecond

// run observes until ctx ends or the engine closes.
func (o *observer) run(ctx context.Context) {
	k := &o.e.wake
	key := o.keys[0].(string)
	k.observe(key, o)
	defer func() {
		k.unobserve(key, o)
		o.mu.Lock()
		o.closed = true
		close(o.out)
		o.mu.Unlock()
	}()
	var failPause time.Duration
	for {
		// Register (which reads the state); a state the subscription
		// delivered meanwhile is as new or newer.
		o.mu.Lock()
		heard := o.heard
		o.again, o.readAt = false, time.Now()
		o.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, o.e.callTimeout)
		st, err := o.e.electionState(rctx, o.obj, scriptElObserve, o.keys[0], o.keys[1], o.keys[2],
			k.channel, observerRegistration.Milliseconds())
		cancel()
		registration := time.Now().Add(observerRegistration / 3)
		if err == nil {
			failPause = 0
			o.mu.Lock()
			if o.heard == heard {
				o.take(st, true)
			}
			o.mu.Unlock()
		} else {
			failPause = backoff(failPause, time.Second)
			registration = time.Now().Add(failPause)
		}
		for read := false; !read; {
			t := time.NewTimer(time.Until(o.nextRead(registration)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-o.e.stop.Done():
				t.Stop()
				return
			case <-t.C:
				read = true
			case <-o.signal:
				t.Stop()
				o.mu.Lock()
				read = o.again
				o.mu.Unlock()
			}
		}
	}
}
