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
