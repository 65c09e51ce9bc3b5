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
