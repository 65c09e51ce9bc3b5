package atomicredis

import (
	"embed"
	"hash/crc32"
	"strings"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"
)

//go:generate go test -run ^TestEmbed_Hashes$ -write-hashes

// tableHash is an embedded script's SHA-1 in hex, computed at build time
// (hashes.go), and the CRC-32 of the text it was computed from.
type tableHash struct {
	crc  uint32
	sha1 string
}

// The Lua scripts, one per operation. Each file opens with a comment naming
// its KEYS, ARGV and reply; the key count given here must match it
// (TestEmbed_ScriptsDeclareTheirKeys checks).
//
//go:embed scripts/*.lua scripts/lib/*.lua scripts/wrap/*.lua
var scriptFS embed.FS

var (
	scriptLockAcquire = load("lock_acquire", 1, "queue", "lock")
	scriptLockAbandon = load("lock_abandon", 1, "queue", "lock")
	scriptLockRelease = load("lock_release", 1, "queue", "lock")
	scriptLockExtend  = load("lock_extend", 1)
	scriptLockExtends = load("lock_extend_many", -1) // one key per lock (renew.go)
	scriptLockPTTL    = load("lock_pttl", 1)
	scriptLockLocked  = load("lock_locked", 1)
	scriptLockInfo    = load("lock_info", 1, "queue", "lock")
	scriptLockForce   = load("lock_force", 1, "queue", "lock")
	scriptLockOwner   = load("lock_owner", 1, "queue", "lock")
	scriptLockAll     = load("lock_acquire_all", -1, "queue", "lock") // 1 key a lock

	// An election keeps v4's string layout (scripts/election_lock_*.lua)
	// until it moves to the plain lock's hash.
	scriptElAcquire = loadObserved("election_lock_acquire", 5, "queue", "lock")
	scriptElAbandon = loadObserved("election_lock_abandon", 5, "queue", "lock")
	scriptElRelease = loadObserved("election_lock_release", 4, "queue", "lock")
	scriptElOwner   = loadObserved("election_lock_owner", 2, "queue", "lock") // KEYS[2], the fence counter, is for the wrapper
	scriptElExtend  = load("election_lock_extend", 1)
	scriptElExtends = load("election_lock_extend_many", -1) // one key per election (renew.go)
	scriptElPTTL    = load("election_lock_pttl", 1)
	scriptElInfo    = load("election_lock_info", 2, "queue", "lock")
	scriptElObserve = load("election_observe", 3, "queue", "lock", "election")
	scriptElLeader  = load("election_leader", 2, "queue", "lock", "election")

	scriptRWAcquire = load("rw_acquire", 6, "queue", "rw")
	scriptRWAbandon = load("rw_abandon", 6, "queue", "rw")
	scriptRWRelease = load("rw_release", 5, "queue", "rw")
	scriptRWExtend  = load("rw_extend", 2, "queue", "rw")
	scriptRWExtends = load("rw_extend_many", -1, "queue", "rw") // two keys per hold
	scriptRWPTTL    = load("rw_pttl", 1, "queue")
	scriptRWOwner   = load("rw_owner", 2, "queue", "rw")

	scriptSemAcquire = load("semaphore_acquire", 8, "queue", "semaphore")
	scriptSemAbandon = load("semaphore_abandon", 8, "queue", "semaphore")
	scriptSemRelease = load("semaphore_release", 7, "queue", "semaphore")
	scriptSemExtend  = load("semaphore_extend", 8, "queue", "semaphore")
	scriptSemExtends = load("semaphore_extend_many", -1, "queue") // three keys per permit
	scriptSemHolders = load("semaphore_holders", 2)
	scriptSemPTTL    = load("semaphore_pttl", 2)
	scriptSemInfo    = load("semaphore_info", 5, "queue")
	scriptSemLimit   = load("semaphore_limit", 7, "queue", "semaphore")
	scriptSemOwner   = load("semaphore_owner", 7, "queue")

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
	scriptActGuard  = load("act_guard", 1)
	scriptActParts  = load("act_parts", -1)        // one index per period
	scriptActDirs   = load("act_dirs", -1)         // one directory per period
	scriptActCount  = load("act_count", -1, "act") // 1 scratch prefix + the units' keys
)

// scripts lists every loaded script by file name with its key count (-1:
// the caller passes the count), for tests.
var scripts = map[string]struct{ keys int }{}

// everyScript is every script the engine may run, for Ping to load and
// for the table of their hashes.
var everyScript []*script

// load reads scripts/<name>.lua and puts in it the functions of the
// libraries it names (scripts/lib/<lib>.lua: local functions, such as the
// waiting queue's) that it calls, directly or through each other: one
// piece of Lua, written once, in every script that needs it, and only
// what a script calls, since a script defines its functions anew on every
// call. They go at the script's line "-- (libraries)", so that a common
// case answered above that line defines none of them, or in front of it.
func load(name string, keyCount int, libs ...string) *script {
	scripts[name] = struct{ keys int }{keyCount}
	s := newScript(name, keyCount, withLibraries(embedded("scripts/"+name+".lua"), libs))
	everyScript = append(everyScript, s)
	return s
}

// withLibraries is body with the functions of libs it calls put in.
func withLibraries(body string, libs []string) string {
	var funcs []libFunc
	for _, lib := range libs {
		funcs = append(funcs, libFuncs(embedded("scripts/lib/"+lib+".lua"))...)
	}
	var lua strings.Builder
	for _, f := range called(body, funcs) {
		lua.WriteString(f.src)
	}
	if before, after, ok := strings.Cut(body, libraryLine); ok {
		return before + lua.String() + after
	}
	return lua.String() + body
}

// loadObserved loads a lock script for an election (lib/election.lua): the
// script, with its libraries, becomes a function, and around it the
// wrapper reads the lock before and publishes the election's state to its
// observers after if the lock's value changed. The wrapped script takes
// one key more than keyCount, last: the observers. It is not a file of its
// own, so it cannot drift from the lock's; it is not listed in scripts.
func loadObserved(name string, keyCount int, libs ...string) *script {
	fileKeys := keyCount
	if name == "election_lock_owner" { // KEYS[2] is the wrapper's alone
		fileKeys = 1
	}
	scripts[name] = struct{ keys int }{fileKeys} // a file of its own (scripts/election_lock_*.lua)
	inner := withLibraries(embedded("scripts/"+name+".lua"), libs)
	prologue := ""
	switch name {
	case "election_lock_owner": // a proclamation: the leader's value, after how many times it proclaimed
		prologue = wrapper("election_owner")
	case "election_lock_acquire": // a campaign
		prologue = wrapper("election_acquire")
	}
	src := strings.Replace(wrapper("election"), prologueLine, prologue, 1)
	src = withLibraries(src, []string{"queue", "lock", "election"})
	src = strings.Replace(src, scriptLine, inner, 1)
	s := newScript(name+" (election)", keyCount+1, src)
	everyScript = append(everyScript, s)
	return s
}

// wrapper is scripts/wrap/<name>.lua, a piece of Lua that goes around a
// script or in front of it, without its header: the comment lines up to
// the first blank line, which say what it is and where it goes.
func wrapper(name string) string {
	_, lua, _ := strings.Cut(embedded("scripts/wrap/"+name+".lua"), "\n\n")
	return lua
}

// The places in a wrapper where a script (scriptLine), a prologue
// (prologueLine) or a guarded script's body (bodyLine) go.
const (
	scriptLine   = "-- (script)"
	prologueLine = "-- (prologue)\n"
	bodyLine     = "-- (body)"
)

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

// clocked is s inside scripts/wrap/clocked.lua, for a history test's
// engine (Engine.clocked): s unchanged as a function, its reply sent with
// the server's clock when it began. It is not a file of its own, nor sent
// by a user's engine, nor listed in scripts or everyScript.
func clocked(s *script) *script {
	keys, ok := s.keyCount.(int)
	if !ok {
		keys = -1
	}
	return newScript(s.name+" (clocked)", keys, strings.Replace(wrapper("clocked"), scriptLine, s.src, 1))
}

// loadFlagged loads a script a second time with a Redis 7 shebang line
// carrying flags in front of it. The variant is not a file of its own, so
// the two can never drift apart; it is not listed in scripts.
func loadFlagged(name string, keyCount int, flags string) *script {
	s := newScript(name+" (flags="+flags+")", keyCount, "#!lua flags="+flags+"\n"+embedded("scripts/"+name+".lua"))
	everyScript = append(everyScript, s)
	return s
}

// script is one Lua script the engine runs: its name, its text as sent,
// its key count (nil: the caller passes the count first) and its SHA-1 as
// EVALSHA takes it. No SHA-1 is computed at run time (Go's FIPS 140-only
// mode forbids one): an embedded script's comes from the table generated
// at build time (hashes.go) if it was computed from this very text, else,
// as a guarded script's, from SCRIPT LOAD's reply on first use.
type script struct {
	name     string
	src      string
	keyCount any
	hash     atomic.Pointer[scriptSHA]
}

// scriptSHA is a script's SHA-1 in hex, and boxed once as EVALSHA's first
// argument, so that a call allocates none.
type scriptSHA struct {
	hex string
	arg any
}

// newScript is a script of keyCount keys (-1: the caller passes the
// count), its hash taken from the generated table if the table's was
// computed from src (same CRC-32).
func newScript(name string, keyCount int, src string) *script {
	s := &script{name: name, src: src}
	if keyCount >= 0 {
		s.keyCount = keyCount
	}
	if h, ok := scriptHashes[name]; ok && h.crc == crc32.ChecksumIEEE([]byte(src)) {
		s.setHash(h.sha1)
	}
	return s
}

func (s *script) setHash(hex string) { s.hash.Store(&scriptSHA{hex: hex, arg: hex}) }

// load sends the script's text with SCRIPT LOAD, which keeps it in the
// server's cache until SCRIPT FLUSH (a script sent with EVAL may be
// evicted: Redis 8 and Valkey 8 keep 500 of those), and takes its hash
// from the reply.
func (s *script) load(c redis.Conn) error {
	hex, err := redis.String(c.Do("SCRIPT", "LOAD", s.src))
	if err != nil {
		return err
	}
	if h := s.hash.Load(); h == nil || h.hex != hex {
		s.setHash(hex)
	}
	return nil
}

// args are EVALSHA's arguments for the script: its hash, its key count
// (unless the caller passes it), then keysAndArgs. The list is the call's
// own: a client may still be writing it after a call cut short returned,
// so it is never reused.
func (s *script) args(h *scriptSHA, keysAndArgs []any) []any {
	args := make([]any, 0, 2+len(keysAndArgs))
	args = append(args, h.arg)
	if s.keyCount != nil {
		args = append(args, s.keyCount)
	}
	return append(args, keysAndArgs...)
}

// sha is the script's hash, loading the script on c first if it has none
// yet.
func (s *script) sha(c redis.Conn) (*scriptSHA, error) {
	if h := s.hash.Load(); h != nil {
		return h, nil
	}
	if err := s.load(c); err != nil {
		return nil, err
	}
	return s.hash.Load(), nil
}

// evalsha runs s on c with EVALSHA. A server that does not have it
// (NOSCRIPT: a restart, SCRIPT FLUSH, another node) gets SCRIPT LOAD and
// EVALSHA again, sent together so that they reach it in one write, which
// Redis runs back to back. Only if a SCRIPT FLUSH still came between them
// (miniredis runs another client's commands in between) is the body sent
// with EVAL, once: no script is sent with EVAL in steady state, so none is
// among the EVAL-ed scripts Redis 8 and Valkey 8 evict.
func evalsha(c redis.Conn, s *script, keysAndArgs []any) (any, error) {
	h, err := s.sha(c)
	if err != nil {
		return nil, err
	}
	args := s.args(h, keysAndArgs)
	reply, err := c.Do("EVALSHA", args...)
	if !replyIs(err, "NOSCRIPT") {
		return reply, err
	}
	if err := c.Send("SCRIPT", "LOAD", s.src); err != nil {
		return nil, err
	}
	reply, err = c.Do("EVALSHA", args...) // the first error, SCRIPT LOAD's or the script's
	if !replyIs(err, "NOSCRIPT") {
		return reply, err
	}
	args[0] = s.src
	return c.Do("EVAL", args...)
}
