package goredis

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// errDeadline is what a wait that ran out wraps, as redigo's i/o timeout.
var errDeadline = os.ErrDeadlineExceeded

// call is one command on a connection and, once run, its reply.
type call struct {
	name   string        // upper case
	args   []interface{} // the name, then each argument as redigo sends it: string or []byte
	status bool          // a string reply is a simple status (string), not a bulk ([]byte)
	queued bool          // sent inside MULTI: the reply is the status QUEUED
	tx     []*call       // EXEC: the commands it runs, whose replies its array holds
	blocks bool          // the server may hold the reply back (WAIT, BLPOP, ...)
	block  block

	reply interface{} // as redigo gives it; an error reply is a redigo.Error
	err   error       // a failure of the connection (not an error reply)
}

func newCall(name string, args []interface{}, copyBytes bool) *call {
	cl := &call{name: strings.ToUpper(name), args: make([]interface{}, 1, len(args)+1)}
	cl.args[0] = name
	for _, a := range args {
		a = redisArg(a, true)
		if b, ok := a.([]byte); ok && copyBytes {
			// redigo's Send has written the bytes by the time it returns.
			a = append([]byte(nil), b...)
		}
		cl.args = append(cl.args, a)
	}
	cl.status = isStatus(cl.name, cl.args)
	cl.block, cl.blocks = blocking(cl.name, cl.args)
	return cl
}

// redisArg converts an argument as redigo's connection writes it. The
// types go-redis writes the same way are passed on as they are.
func redisArg(a interface{}, argumentOK bool) interface{} {
	switch a := a.(type) {
	case string, []byte, int, int64, bool, nil:
		return a
	case float64:
		return strconv.FormatFloat(a, 'g', -1, 64)
	case redigo.Argument:
		if argumentOK {
			return redisArg(a.RedisArg(), false)
		}
	}
	return fmt.Sprint(a)
}

// argString is an argument as sent, for parsing.
func argString(a interface{}) string {
	switch a := a.(type) {
	case string:
		return a
	case []byte:
		return string(a)
	case int:
		return strconv.Itoa(a)
	case int64:
		return strconv.FormatInt(a, 10)
	case bool:
		if a {
			return "1"
		}
		return "0"
	}
	return ""
}

// stringArgs returns the arguments, the name first, as strings.
func (cl *call) stringArgs() []string {
	out := make([]string, len(cl.args))
	for i, a := range cl.args {
		out[i] = argString(a)
	}
	return out
}

// finish records what go-redis gave back, as redigo would have given it.
func (cl *call) finish(v interface{}, err error) {
	if err != nil {
		if err == redis.Nil {
			cl.reply = nil
			return
		}
		// Only the server's error replies are redis.Error values in go-
		// redis; anything else (a network error, a closed pool, a
		// BadConnError) is a failure of the connection.
		if re, ok := err.(redis.Error); ok {
			cl.reply = redigo.Error(re.Error())
			return
		}
		cl.err = err
		return
	}
	if cl.name == "EXEC" {
		if a, ok := v.([]interface{}); ok && len(a) == len(cl.tx) {
			out := make([]interface{}, len(a))
			for i, e := range a {
				if out[i], err = value(e, cl.tx[i].status); err != nil {
					cl.err = err
					return
				}
			}
			cl.reply = out
			return
		}
	}
	cl.reply, cl.err = value(v, cl.status || cl.queued)
}

// value maps one go-redis reply value to redigo's: string to []byte (or to
// string for a status), int64 as is, arrays element by element, an error
// inside an array to redigo.Error; RESP3 types to their RESP2 form.
func value(v interface{}, status bool) (interface{}, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if status {
			return v, nil
		}
		return []byte(v), nil
	case int64:
		return v, nil
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			var err error
			if out[i], err = value(e, false); err != nil {
				return nil, err
			}
		}
		return out, nil
	case redis.Error:
		return redigo.Error(v.Error()), nil
	case bool:
		// Redis sends a boolean to a RESP2 client as 1 or 0. (A script's
		// Lua false comes as a RESP3 null, nil, unless the script called
		// redis.setresp(3); then it is a boolean here too.)
		if v {
			return int64(1), nil
		}
		return int64(0), nil
	case *big.Int:
		return []byte(v.String()), nil
	case float64, map[interface{}]interface{}:
		return nil, fmt.Errorf("goredis: a RESP3 %T reply has no exact RESP2 form: create the go-redis client with Protocol: 2", v)
	}
	return nil, fmt.Errorf("goredis: unexpected reply type %T", v)
}

// isStatus reports whether the command answers with a simple status, not
// a bulk string (redigo gives a status as string, a bulk as []byte).
func isStatus(name string, args []interface{}) bool {
	switch name {
	case "SET": // SET ... GET answers with the old value
		for _, a := range args[min(3, len(args)):] {
			if strings.EqualFold(argString(a), "GET") {
				return false
			}
		}
		return true
	case "PING": // PING message echoes it as a bulk
		return len(args) == 1
	}
	if statusCommands[name] {
		return true
	}
	if subs, ok := statusSubcommands[name]; ok && len(args) > 1 {
		return subs[strings.ToUpper(argString(args[1]))]
	}
	return false
}

// statusCommands answer with a simple status (or with a non-string reply,
// which no mapping changes).
var statusCommands = set("SETEX", "PSETEX", "MSET", "SELECT", "FLUSHALL", "FLUSHDB",
	"RENAME", "LTRIM", "LSET", "HMSET", "TYPE", "MULTI", "DISCARD", "WATCH", "UNWATCH",
	"AUTH", "QUIT", "RESET", "SAVE", "BGSAVE", "BGREWRITEAOF", "SWAPDB", "READONLY",
	"READWRITE", "ASKING", "RESTORE", "RESTORE-ASKING", "MIGRATE", "PFMERGE", "REPLICAOF",
	"SLAVEOF", "FAILOVER", "SHUTDOWN", "XSETID", "DEBUG")

// statusSubcommands are the subcommands that answer with a simple status.
var statusSubcommands = map[string]map[string]bool{
	"SCRIPT": set("FLUSH", "KILL"),
	"CONFIG": set("SET", "RESETSTAT", "REWRITE"),
	"CLIENT": set("SETNAME", "SETINFO", "PAUSE", "UNPAUSE", "REPLY", "KILL", "NO-EVICT",
		"NO-TOUCH", "TRACKING", "CACHING"),
	"CLUSTER": set("ADDSLOTS", "ADDSLOTSRANGE", "BUMPEPOCH", "DELSLOTS", "DELSLOTSRANGE",
		"FAILOVER", "FLUSHSLOTS", "FORGET", "MEET", "REPLICATE", "RESET", "SAVECONFIG",
		"SET-CONFIG-EPOCH", "SETSLOT"),
	"FUNCTION": set("DELETE", "FLUSH", "RESTORE", "KILL"),
	"MEMORY":   set("PURGE"),
	"MODULE":   set("LOAD", "LOADEX", "UNLOAD"),
	"XGROUP":   set("CREATE", "SETID"),
	"ACL":      set("SETUSER", "LOAD", "SAVE", "LOG"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// block is how long a blocking command may hold its reply back.
type block struct {
	d       time.Duration
	forever bool   // timeout 0: until served
	typed   bool   // go-redis has a typed method that sends it unchanged
	ints    [2]int // WAIT's and WAITAOF's counts
}

func (b block) String() string {
	if b.forever {
		return "ever"
	}
	return b.d.String()
}

// blockMargin is how much of go-redis's ReadTimeout is left for the round
// trip around a block, before a command counts as long.
const blockMargin = time.Second

// long reports whether the reply may come later than go-redis's read
// timeout rt (<= 0: none) allows for an ordinary command.
func (cl *call) long(rt time.Duration) bool {
	return cl.blocks && rt > 0 && (cl.block.forever || cl.block.d+blockMargin > rt)
}

// blocking parses the timeout of a blocking command.
func blocking(name string, args []interface{}) (block, bool) {
	n := len(args)
	switch name {
	case "WAIT", "WAITAOF":
		if n != 3 && !(name == "WAITAOF" && n == 4) {
			return block{}, false
		}
		var b block
		for i := 1; i < n-1; i++ {
			v, err := strconv.Atoi(argString(args[i]))
			if err != nil {
				return block{}, false
			}
			b.ints[i-1] = v
		}
		ms, err := strconv.ParseInt(argString(args[n-1]), 10, 64)
		if err != nil || ms < 0 {
			return block{}, false
		}
		b.d, b.forever, b.typed = time.Duration(ms)*time.Millisecond, ms == 0, true
		return b, true
	case "BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BZPOPMIN", "BZPOPMAX":
		want := map[string]int{"BRPOPLPUSH": 4, "BLMOVE": 6}[name]
		if n < 3 || want != 0 && n != want {
			return block{}, false
		}
		b, ok := seconds(args[n-1])
		b.typed = ok && b.typed && name != "BZPOPMIN" && name != "BZPOPMAX"
		return b, ok
	case "BLMPOP", "BZMPOP":
		if n < 2 {
			return block{}, false
		}
		b, ok := seconds(args[1])
		b.typed = false
		return b, ok
	case "XREAD", "XREADGROUP":
		for i := 1; i+1 < n; i++ {
			if strings.EqualFold(argString(args[i]), "BLOCK") {
				ms, err := strconv.ParseInt(argString(args[i+1]), 10, 64)
				if err != nil || ms < 0 {
					return block{}, false
				}
				return block{d: time.Duration(ms) * time.Millisecond, forever: ms == 0}, true
			}
			if strings.EqualFold(argString(args[i]), "STREAMS") {
				break
			}
		}
	}
	return block{}, false
}

// seconds parses a timeout in seconds; typed says whether it is whole (go-
// redis's typed methods round a timeout down to whole seconds).
func seconds(a interface{}) (block, bool) {
	f, err := strconv.ParseFloat(argString(a), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f > 1e9 {
		return block{}, false
	}
	return block{d: time.Duration(f * float64(time.Second)), forever: f == 0, typed: f == math.Trunc(f)}, true
}
