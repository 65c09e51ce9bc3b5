package testcluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// adminConn carries a test's own commands to a cluster, as one connection
// to one node would: it binds to the node serving the first key it is
// given (an EVALSHA's or EVAL's first key, else the first argument), holding
// back keyless commands sent before it (MULTI) until then, so that WATCH,
// MULTI/EXEC and pipelines work on one slot. Commands about a whole server
// (KEYS, SCRIPT, CONFIG, FLUSHALL, DBSIZE) and multi-key DEL, UNLINK and
// EXISTS, sent before it binds, run on every primary or key by key, their
// replies merged. The pool closes it after each use (MaxIdle 0), so every
// Do starts unbound.
type adminConn struct {
	cluster *redisc.Cluster
	conn    redis.Conn // a *redisc.Conn
	bound   bool
	held    [][]any // keyless commands sent before binding: name, args...
}

// keyless are commands that name no key; they go wherever the connection is
// bound.
var keyless = map[string]bool{"MULTI": true, "EXEC": true, "DISCARD": true, "UNWATCH": true, "PING": true, "ECHO": true,
	"TIME": true, "INFO": true, "CLIENT": true, "CLUSTER": true, "DEBUG": true, "ROLE": true, "WAIT": true}

// perNode are commands adminConn runs on every primary when unbound.
var perNode = map[string]bool{"KEYS": true, "SCRIPT": true, "CONFIG": true, "FLUSHALL": true, "DBSIZE": true}

// perKey are multi-key commands adminConn splits by key when unbound,
// summing the integer replies.
var perKey = map[string]bool{"DEL": true, "UNLINK": true, "EXISTS": true}

func routingKey(cmd string, args []any) (string, bool) {
	switch {
	case keyless[cmd] || len(args) == 0:
		return "", false
	case cmd == "EVALSHA" || cmd == "EVAL":
		if n, _ := strconv.Atoi(argString(args[1])); n > 0 && len(args) > 2 {
			return argString(args[2]), true
		}
		return "", false
	case (cmd == "BITOP" || cmd == "MEMORY" || cmd == "OBJECT") && len(args) > 1:
		return argString(args[1]), true
	}
	return argString(args[0]), true
}

func argString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

func (a *adminConn) bind(key string, ok bool) error {
	if a.bound {
		return nil
	}
	a.bound = true
	var err error
	if ok {
		err = redisc.BindConn(a.conn, key)
	} else {
		err = redisc.BindConn(a.conn) // any node
	}
	if err != nil {
		return err
	}
	for _, h := range a.held {
		if err := a.conn.Send(h[0].(string), h[1:]...); err != nil {
			return err
		}
	}
	a.held = nil
	return nil
}

func (a *adminConn) Do(cmd string, args ...any) (any, error) {
	up := strings.ToUpper(cmd)
	if cmd == "" && !a.bound && len(a.held) == 0 {
		return nil, nil
	}
	if !a.bound && len(a.held) == 0 {
		switch {
		case perNode[up]:
			return onEveryPrimary(a.cluster, up, args...)
		case perKey[up] && len(args) > 1:
			var sum int64
			for _, k := range args {
				n, err := redis.Int64(OnKey(a.cluster, up, k))
				if err != nil {
					return nil, err
				}
				sum += n
			}
			return sum, nil
		}
	}
	if err := a.bind(routingKey(up, args)); err != nil {
		return nil, err
	}
	return a.conn.Do(cmd, args...)
}

func (a *adminConn) Send(cmd string, args ...any) error {
	up := strings.ToUpper(cmd)
	if !a.bound {
		key, ok := routingKey(up, args)
		if !ok {
			a.held = append(a.held, append([]any{cmd}, args...))
			return nil
		}
		if err := a.bind(key, true); err != nil {
			return err
		}
	}
	return a.conn.Send(cmd, args...)
}

func (a *adminConn) Flush() error {
	if err := a.bind("", false); err != nil {
		return err
	}
	return a.conn.Flush()
}

func (a *adminConn) Receive() (any, error) {
	if err := a.bind("", false); err != nil {
		return nil, err
	}
	return a.conn.Receive()
}

// The engine may be given the Pool itself: a *redis.Pool then asks for these.
func (a *adminConn) DoContext(_ context.Context, cmd string, args ...any) (any, error) {
	return a.Do(cmd, args...)
}
func (a *adminConn) ReceiveContext(context.Context) (any, error) { return a.Receive() }
func (a *adminConn) DoWithTimeout(_ time.Duration, cmd string, args ...any) (any, error) {
	return a.Do(cmd, args...)
}
func (a *adminConn) ReceiveWithTimeout(time.Duration) (any, error) { return a.Receive() }

func (a *adminConn) Err() error   { return a.conn.Err() }
func (a *adminConn) Close() error { return a.conn.Close() }
