package atomicredis

import (
	"embed"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// The Lua scripts, one per operation. Each file opens with a comment naming
// its KEYS, ARGV and reply; the key count given here must match it
// (TestScriptsDeclareTheirKeys checks).
//
//go:embed scripts/*.lua scripts/lib/*.lua
var scriptFS embed.FS

var (
	scriptLockAcquire = load("lock_acquire", 5, "queue", "lock")
	scriptLockAbandon = load("lock_abandon", 5, "queue", "lock")
	scriptLockRelease = load("lock_release", 4, "queue", "lock")
	scriptLockExtend  = load("lock_extend", 1)
	scriptLockPTTL    = load("lock_pttl", 1)
	scriptLockLocked  = load("lock_locked", 1)
	scriptLockInfo    = load("lock_info", 2, "queue")
	scriptLockForce   = load("lock_force", 4, "queue", "lock")

	scriptRWAcquire = load("rw_acquire", 6, "queue", "rw")
	scriptRWAbandon = load("rw_abandon", 6, "queue", "rw")
	scriptRWRelease = load("rw_release", 5, "queue", "rw")
	scriptRWExtend  = load("rw_extend", 2, "queue", "rw")
	scriptRWPTTL    = load("rw_pttl", 1, "queue")

	scriptSemAcquire = load("semaphore_acquire", 7, "queue", "semaphore")
	scriptSemAbandon = load("semaphore_abandon", 7, "queue", "semaphore")
	scriptSemRelease = load("semaphore_release", 6, "queue", "semaphore")
	scriptSemExtend  = load("semaphore_extend", 6, "queue", "semaphore")
	scriptSemHolders = load("semaphore_holders", 2)
	scriptSemPTTL    = load("semaphore_pttl", 2)
	scriptSemInfo    = load("semaphore_info", 3, "queue")
	scriptSemLimit   = load("semaphore_limit", 6, "queue", "semaphore")

	scriptRecentAdd     = load("recent_add", 1)
	scriptRecentRemove  = load("recent_remove", 1)
	scriptRecentSuggest = load("recent_suggest", 1)
	scriptMembersAdd    = load("members_add", 1)
	scriptMembersRemove = load("members_remove", 1)
	scriptSuggest       = load("suggest", 1)
	// suggest again, flagged allow-oom so it answers at maxmemory (Redis 7+;
	// older servers refuse the shebang and Suggest falls back to the plain one).
	scriptSuggestOOM = loadFlagged("suggest", 1, "allow-oom")

	scriptBitsIndex  = load("bits_index", 1)
	scriptBitsMark   = load("bits_mark", 1)
	scriptBitsMerge  = load("bits_merge", 2)
	scriptBitsIs     = load("bits_is", 1)
	scriptBitsShards = load("bits_shards", -1) // one index per period
	scriptBitsCount  = load("bits_count", -1)  // 1 scratch key + one bitmap per period
)

// scripts lists every loaded script by file name with its key count (-1:
// the caller passes the count), for tests.
var scripts = map[string]struct{ keys int }{}

// everyScript is every script the engine may run, by name, for Ping to
// load.
var everyScript []namedScript

type namedScript struct {
	name   string
	script *redis.Script
}

// load reads scripts/<name>.lua and puts the libraries it uses,
// scripts/lib/<lib>.lua (local functions, such as the waiting queue's), in
// front of it: one piece of Lua, written once, in every script that needs it.
func load(name string, keyCount int, libs ...string) *redis.Script {
	var src strings.Builder
	for _, lib := range libs {
		src.WriteString(embedded("scripts/lib/" + lib + ".lua"))
	}
	src.WriteString(embedded("scripts/" + name + ".lua"))
	scripts[name] = struct{ keys int }{keyCount}
	s := redis.NewScript(keyCount, src.String())
	everyScript = append(everyScript, namedScript{name, s})
	return s
}

func embedded(path string) string {
	src, err := scriptFS.ReadFile(path)
	if err != nil {
		// Only a typo in this file can get here, and every test would fail.
		panic("atomicredis: missing embedded script " + path)
	}
	return string(src)
}

// loadFlagged loads a script a second time with a Redis 7 shebang line
// carrying flags in front of it. The variant is not a file of its own, so
// the two can never drift apart; it is not listed in scripts.
func loadFlagged(name string, keyCount int, flags string) *redis.Script {
	s := redis.NewScript(keyCount, "#!lua flags="+flags+"\n"+embedded("scripts/"+name+".lua"))
	everyScript = append(everyScript, namedScript{name + " (flags=" + flags + ")", s})
	return s
}
