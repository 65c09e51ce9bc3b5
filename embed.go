package atomicredis

import (
	"embed"

	"github.com/gomodule/redigo/redis"
)

// The Lua scripts, one per operation. Each file opens with a comment naming
// its KEYS, ARGV and reply; the key count given here must match it
// (TestScriptsDeclareTheirKeys checks).
//
//go:embed scripts/*.lua
var scriptFS embed.FS

var (
	scriptLockAcquire = load("lock_acquire", 3)
	scriptLockAbandon = load("lock_abandon", 3)
	scriptLockRelease = load("lock_release", 1)
	scriptLockExtend  = load("lock_extend", 1)
	scriptLockPTTL    = load("lock_pttl", 1)
	scriptLockLocked  = load("lock_locked", 1)

	scriptSemAcquire = load("semaphore_acquire", 5)
	scriptSemAbandon = load("semaphore_abandon", 5)
	scriptSemRelease = load("semaphore_release", 3)
	scriptSemRefresh = load("semaphore_refresh", 3)
	scriptSemHolders = load("semaphore_holders", 3)
	scriptSemPTTL    = load("semaphore_pttl", 2)

	scriptRecentAdd     = load("recent_add", 1)
	scriptRecentRemove  = load("recent_remove", 1)
	scriptRecentSuggest = load("recent_suggest", 1)
	scriptMembersAdd    = load("members_add", 1)
	scriptMembersRemove = load("members_remove", 1)
	scriptSuggest       = load("suggest", 1)
	// suggest again, flagged allow-oom so it answers at maxmemory (Redis 7+;
	// older servers refuse the shebang and Suggest falls back to the plain one).
	scriptSuggestOOM = loadFlagged("suggest", 1, "allow-oom")

	scriptActiveMark  = load("active_mark", 1)
	scriptActiveIs    = load("active_is", 1)
	scriptActiveCount = load("active_count", -1) // 1 scratch key + one per period
)

// scripts lists every loaded script by file name with its key count (-1:
// the caller passes the count), for tests.
var scripts = map[string]struct{ keys int }{}

func load(name string, keyCount int) *redis.Script {
	src, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		// Only a typo in this file can get here, and every test would fail.
		panic("atomicredis: missing embedded script " + name)
	}
	s := redis.NewScript(keyCount, string(src))
	scripts[name] = struct{ keys int }{keyCount}
	return s
}

// loadFlagged loads a script a second time with a Redis 7 shebang line
// carrying flags in front of it. The variant is not a file of its own, so
// the two can never drift apart; it is not listed in scripts.
func loadFlagged(name string, keyCount int, flags string) *redis.Script {
	src, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("atomicredis: missing embedded script " + name)
	}
	return redis.NewScript(keyCount, "#!lua flags="+flags+"\n"+string(src))
}
