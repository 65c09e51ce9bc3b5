// Package atomicredis gives Go services the application components of
// Redis in Action chapter 6 — distributed locks, fair counting semaphores,
// autocomplete — plus a Redisson-style lock (lease, watchdog, held-by-me),
// leader elections (Engine.Election), locks over many names at once
// (Engine.LockAll), writes guarded by a lock (Lock.Eval) and activity
// bitmaps. Every operation is one atomic Lua script, run with EVALSHA in
// one round trip: no WATCH retries, no race windows, and no client clock
// deciding who holds what.
//
// Every key of one object shares a cluster hash tag, <ns><kind>:{<name>},
// so each script touches a single slot (activity bitmaps excepted: each
// shard of a group has a tag of its own, to spread over a cluster).
//
// The sections below say how the calls work and what they cost, where
// their godoc says only what the caller gets. More: the docs/ pages of the
// repository (docs/locks.md, docs/objects.md, docs/production.md).
//
// # Waiting
//
// Waiters queue on the server in arrival order; a release hands the lock
// to the first live waiter inside its own script and publishes the grant
// on the waiter's engine's wake channel, so the waiter returns as soon as
// the message arrives, with no further round trip (it is confirmed in the
// background, or by TTL, Held, Extend or the watchdog: see docs/locks.md,
// "Waiting"). A wait retries a failure to reach Redis (connection refused,
// a timeout, CLUSTERDOWN...) until it runs out. A semaphore's waiters queue
// in arrival order and are handed permits as Lock's waiters are handed the
// lock. Permits time out by the server's clock; the caller's clock decides
// only when the holder stops trusting its permit (Lost), never who holds
// one.
//
// # Fences
//
// A fence is the last fence of its name plus one while the name's counter
// lives (a lock's: its one key, while held, queued for, or for the rest
// of its last lease; a read-write lock's or a semaphore's:
// WithFenceRetention after its last grant, 24h by default), and the
// server's clock in microseconds when the counter is gone (after that, or
// a restart without persistence), so fences are numbers of 16 digits. A read-write lock's holds share one counter across readers
// and writers; several readers' fences are valid at once. A resource
// guarded by a read-write lock admits a reader whose fence is above the
// last writer's it has seen, and a writer by the (fence, token) rule.
//
// # Leases
//
// A holding is lost, and its Context ends: for a watchdog holder when an
// extension finds it gone or the lease runs out without one; for a holder
// without a watchdog also at the lease's end as the lock knows it now,
// less a tenth for the client's clock (its deadline; a later Extend that
// lengthens the lease does not move it: call Context again; one that
// shortens it ends it with the shorter lease). A read hold (RLock) is a
// *Lock with its own lease (o.TTL), watchdog, Extend, TTL, Owner, SetOwner
// and Unlock; each stores its own o.Owner.
//
// # Many locks
//
// LockAll first makes one attempt at all the names: one script on a
// server that is not a cluster, one script a slot (the slots at once) on a
// cluster. If a name is busy (held, or its queue not empty), what was
// taken is given back, and the names are taken one after another in a
// fixed order (by slot, then name), each waited for in its FIFO queue
// while those taken are extended, so two LockAll calls over the same names
// in any order never deadlock; then each is extended once more (checked
// held, its lease started anew) before it returns. A goroutine that holds
// one of the names itself waits out its Wait.
//
// # Semaphores
//
// The limit is stored with the semaphore and rules: the first acquisition
// stores its Limit, and while it is stored an acquisition with another
// Limit follows the stored one; Limit 0 means "the stored limit" (an error
// wrapping ErrInvalid if none is stored). A limit stored by an acquisition
// goes with the last permit, so an idle semaphore takes a new one; one set
// by SetSemaphoreLimit (an administrator's call, for a rolling deploy that
// changes the limit) stays while the semaphore is idle, until the fence
// retention has passed since that call or the last permit granted. A
// stored limit that differs from o.Limit is reported once per engine, name
// and stored limit: an EventLimitDiffers, logged at Warn.
//
// Weighted permits are admitted strictly in arrival order: a heavy waiter
// at the head of the queue waits for room, and those behind it wait behind
// it. A weight above the limit in force (the stored one, or Limit when
// none is stored) is refused with an error wrapping ErrInvalid, and
// nothing written; so is a waiter's when SetSemaphoreLimit lowers the
// limit under it (it is woken with the error, and leaves the queue).
// Weight 1 costs nothing.
//
// # Elections
//
// When an election's term counter is gone (a new election, none for the
// fence retention, or lost in a restart with a leader perhaps still
// running), the first term waits one lease, the candidate's TTL (10 s at
// DefaultTTL): a leader from before the loss may still act until then. The
// term grows with every leader. Run the leader's work under l.Context, and
// pass the term and token to what it writes (docs/objects.md, "Elections",
// says what a term guarantees across a failover).
//
// Observe polls nothing in a loop: the scripts that change the election
// publish it to the engine's one wake subscription (no connection per
// election or observer); a lease that runs out with no script is seen when
// its TTL ends, when the observer reads again; after the subscription was
// lost, observers read again at once; and each Observe call renews its
// engine's registration as an observer every 3 s (one script a call),
// which reads the state too.
//
// # Guarded writes
//
// Every key of a guarded script carries the lock's HashTag as its first
// {…}; Eval checks it before sending, whatever the server, so code that
// works on one server works on a cluster. What a body wrote before it
// failed stays: Redis does not roll back.
//
// # Replica acknowledgement
//
// With WithReplicaAck the script is followed by WAIT replicas timeout on
// the same connection, in the same round trip. An acquisition with fewer
// acknowledgements is abandoned. This keeps a failover from granting a
// lock a second time. Releases, abandons, queue joins, SetSemaphoreLimit
// and guarded writes are not followed by WAIT: a failover can undo them
// (a released lock held again until its lease ends; docs/failover.md).
// A timeout under 1 ms is refused because WAIT 0 would
// block forever, and one at least as long as the call timeout because a
// WAIT cut short leaves the outcome unknown.
//
// # Ping
//
// On a cluster Ping checks each primary serving slots, as CLUSTER NODES
// names them, through a connection that binds. It loads every script
// (SCRIPT LOAD: the user may run them), and publishes on the wake channel
// because a refused PUBLISH inside a script is ignored by design: without
// the channel's rights waits would only be slow.
//
// # Closing
//
// Close stops each holding's watchdog before it releases it; the holding's
// contexts end with a cause wrapping ErrClosed, and the observer gets
// EventReleased. A grant that reaches a wait after Close is passed on.
// Once the releases are done, Close waits for the wake subscription and
// the background abandons.
//
// # Activity
//
// CountActive reads the periods' indexes (one round trip), then each
// partition used in any of them: its tries (one round trip), then its ids
// in scripts of a few ms each (SUNIONSTORE of sets, BITOP OR of bitmaps),
// at most 8 scripts at once, in parallel across a cluster's nodes, and
// adds up. Each script's part is counted atomically (a script whose
// buckets a mark split since the plan is planned again). MarkActiveMany
// runs scripts of at most 250 ids per partition the ids fall in (up to 40
// a round trip; at most 8 round trips at once), and one per shard the
// engine knows is dense (a run of bytes OR-ed in), after one that indexes
// the partitions the engine has not indexed yet; each script's marks are
// atomic. The layout and its cost: docs/activity.md.
//
// # Autocomplete
//
// Suggest finds the members with the book's start and end markers,
// inserted and removed within its one script. On Redis 7 and later the
// script is flagged allow-oom, so a query answers even at maxmemory under
// noeviction; Redis before 7 (and miniredis) refuse the flag, and there a
// query at maxmemory fails with OOM like any write.
//
// # Hooks
//
// A Hook's Start returns a span's context, so that the client's own spans
// of EVALSHA are its children where the pool passes contexts on, as the
// goredis adapter does. End's Event is EventAcquired or EventNotAcquired
// for an acquisition (Lock, AcquireSemaphore, Campaign, LockAll and their
// Try forms), EventReleased for a release that gave a holding back, and
// EventDone for every other call and for a release that failed; its Err is
// the call's error and its Wait how long the call took. A call that panics
// (in a Pool, say) gets EventDone with an Err saying so as the panic goes
// on. Observe gets the outcomes of calls and what happens in the
// background (renewals, losses, wake-ups, elections): the stream to count
// from. Start, End and Observe run on the goroutine of the call or of the
// background work.
package atomicredis

// Where things are. Each library file holds one subject, and its tests
// are in the _test.go file of the same name; a test's name starts with
// its file's subject (TestLock_, TestSemaphore_, ...), so that
// go test -run '^TestLock_' runs a file's tests.
//
//	doc.go            this package doc and this map
//	engine.go         Engine, New, Close; the Pool and Subscriber interfaces; the defaults
//	errors.go         the sentinel errors and Error
//	object.go         the object kinds and the object, which builds an object's keys and errors
//	call.go           the one path into Redis: a pooled connection, EVALSHA, MOVED, WAIT, retries
//	embed.go          the embedded scripts (scripts/*.lua, scripts/lib/*.lua, scripts/wrap/*.lua) and how they load
//	options.go        the engine's options
//	events.go         Event, the observer and the logger
//	hook.go           Hook and Operation: each public call, with the caller's context
//	ping.go           Ping
//	cluster.go        the cluster's layout, for Ping and the renewer
//	acquire.go        taking a lock, hold or permit: one try, or a place in the queue and the wait
//	wake.go           waking waiters: one subscription per engine
//	holding.go        a held lock, hold or permit: its state, context and loss
//	lease.go          a holding's lease: extend, TTL and the span it can count on
//	release.go        Unlock and Release
//	renew.go          the watchdog: one renewal for all of an engine's holdings
//	pipeline.go       the renewer's pipeline of scripts on one connection (tested in renew_test.go)
//	lock.go           Lock, TryLock, LockInfo, ForceUnlock and the Lock type
//	rw.go             read-write locks
//	semaphore.go      semaphores and the Permit type
//	multilock.go      LockAll and the MultiLock type
//	guarded.go        Lock.Eval and GuardedScript: writes guarded by a lock
//	election.go       elections: Campaign, Leader, Observe
//	autocomplete.go   recent lists and member sets: AddRecent, Suggest, ...
//	activity.go       activity: the layout of a group's ids, IsActive
//	activity_mark.go  MarkActive, MarkActiveMany: marks in scripts of a bounded size
//	activity_count.go CountActive
//	hashes.go         the embedded scripts' SHA-1s, generated at build time (go generate)
//
// Test files that pair with no library file:
//
//	helpers_test.go   the servers tests run on and helpers several test files use
//	main_test.go      TestMain and the server the benchmarks share
//	suite_test.go     the behaviour suite of internal/suite, run through redigo
//	example*_test.go  the godoc examples
//	bench*_test.go    the main job's benchmarks (measured with internal/bench)
//	book_test.go      the book's chapter 6 code, the benchmarks' baseline
//	faults_test.go    the fault harness: many objects through a proxy that cuts and delays (proxy_test.go)
//	failover_test.go  the failover harness: private clusters with a primary killed or stalled
//	verdict_test.go, report_test.go  the main job's verdict table and report
