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

	scriptBitsMark  = load("bits_mark", 1)
	scriptBitsMerge = load("bits_merge", 2)
	scriptActIndex  = load("act_index", 1)
	scriptActMark   = load("act_mark", 2, "act")
	scriptActIs     = load("act_is", 2, "act")
	scriptActParts  = load("act_parts", -1)        // one index per period
	scriptActDirs   = load("act_dirs", -1)         // one directory per period
	scriptActCount  = load("act_count", -1, "act") // 1 scratch prefix + the units' keys
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

// load reads scripts/<name>.lua and puts in it the functions of the
// libraries it names (scripts/lib/<lib>.lua: local functions, such as the
// waiting queue's) that it calls, directly or through each other: one
// piece of Lua, written once, in every script that needs it, and only
// what a script calls, since a script defines its functions anew on every
// call. They go at the script's line "-- (libraries)", so that a common
// case answered above that line defines none of them, or in front of it.
func load(name string, keyCount int, libs ...string) *redis.Script {
	body := embedded("scripts/" + name + ".lua")
	var funcs []libFunc
	for _, lib := range libs {
		funcs = append(funcs, libFuncs(embedded("scripts/lib/"+lib+".lua"))...)
	}
	var lua strings.Builder
	for _, f := range called(body, funcs) {
		lua.WriteString(f.src)
	}
	src := lua.String() + body
	if before, after, ok := strings.Cut(body, libraryLine); ok {
		src = before + lua.String() + after
	}
	scripts[name] = struct{ keys int }{keyCount}
	s := redis.NewScript(keyCount, src)
	everyScript = append(everyScript, namedScript{name, s})
	return s
}

// libraryLine marks where a script wants its library functions.
const libraryLine = "-- (libraries)\n"

// libFunc is one local function of a library, with the comment above it.
type libFunc struct {
	name, src string
}

// libFuncs splits a library into its top-level local functions, each from
// the comment lines above it to its closing "end" at the line's start.
func libFuncs(lib string) []libFunc {
	var funcs []libFunc
	var comment, cur strings.Builder
	name := ""
	for _, line := range strings.SplitAfter(lib, "\n") {
		switch {
		case name != "":
			cur.WriteString(line)
			if strings.TrimRight(line, "\n") == "end" {
				funcs = append(funcs, libFunc{name, cur.String()})
				name = ""
				cur.Reset()
			}
		case strings.HasPrefix(line, "local function "):
			name, _, _ = strings.Cut(strings.TrimPrefix(line, "local function "), "(")
			cur.WriteString(comment.String())
			cur.WriteString(line)
			comment.Reset()
		case strings.HasPrefix(line, "--"):
			comment.WriteString(line)
		default:
			comment.Reset()
		}
	}
	return funcs
}

// called returns the functions of funcs that body calls, directly or
// through each other, in their order in funcs (each before its callers).
func called(body string, funcs []libFunc) []libFunc {
	need := map[string]bool{}
	for grew, text := true, body; grew; {
		grew = false
		for _, f := range funcs {
			if !need[f.name] && calls(text, f.name) {
				need[f.name], grew = true, true
				text += f.src
			}
		}
	}
	var out []libFunc
	for _, f := range funcs {
		if need[f.name] {
			out = append(out, f)
		}
	}
	return out
}

// calls reports whether the Lua text calls the function name.
func calls(text, name string) bool {
	for i := strings.Index(text, name+"("); i >= 0; {
		if i == 0 || !isIdent(text[i-1]) {
			return true
		}
		j := strings.Index(text[i+1:], name+"(")
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
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
