package goredis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// result is one reply and error as a connection gave them.
type result struct {
	V   any
	Err error
}

func (r result) String() string { return fmt.Sprintf("(%#v, %#v)", r.V, r.Err) }

// same runs seq on a connection of the Pool and then, with its keys
// deleted again, on a redigo connection to the same server, and wants the
// same replies and errors, of the same Go types.
func same(t *testing.T, s *server, keys []string, seq func(c redigo.Conn) []result) {
	t.Helper()
	ref := s.redigo(t)
	clear := func() {
		for _, k := range keys {
			if _, err := ref.Do("DEL", k); err != nil {
				t.Fatal(err)
			}
		}
	}
	clear()
	got := seq(s.conn(t))
	clear()
	want := seq(ref)
	clear()
	if len(got) != len(want) {
		t.Fatalf("%d replies, redigo gave %d", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("reply %d: %v, redigo gives %v", i, got[i], want[i])
		}
	}
}

func do(c redigo.Conn, cmd string, args ...any) result {
	v, err := c.Do(cmd, args...)
	return result{v, err}
}

// arg is a redigo.Argument: redigo sends what RedisArg returns.
type arg struct{ n int }

func (a arg) RedisArg() any { return a.n * 10 }

// TestReplies: every kind of reply, and every kind of argument, as redigo
// gives and sends them.
func TestReplies(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		k, k2 := s.key("k"), s.key("k2")
		cases := []struct {
			name   string
			resp2  bool // RESP3 gives a map or a double: an error, tested below
			setup  [][]any
			cmd    []any
			onMini bool // miniredis answers as Redis does
		}{
			{"SET", false, nil, []any{"SET", k, "v"}, true},
			{"SET GET", false, [][]any{{"SET", k, "old"}}, []any{"SET", k, "new", "GET"}, true},
			{"SET NX taken", false, [][]any{{"SET", k, "x"}}, []any{"SET", k, "v", "NX"}, true},
			{"GET bytes", false, [][]any{{"SET", k, "\x00\xff b\r\n"}}, []any{"GET", k}, true},
			{"GET missing", false, nil, []any{"GET", k}, true},
			{"INCR", false, [][]any{{"SET", k, "41"}}, []any{"INCR", k}, true},
			{"INCR not a number", false, [][]any{{"SET", k, "abc"}}, []any{"INCR", k}, true},
			{"WRONGTYPE", false, [][]any{{"SET", k, "x"}}, []any{"LPUSH", k, "y"}, true},
			{"LRANGE", false, [][]any{{"RPUSH", k, "a", "", "\xff"}}, []any{"LRANGE", k, 0, -1}, true},
			{"LRANGE missing", false, nil, []any{"LRANGE", k, 0, -1}, true},
			{"PING", false, nil, []any{"PING"}, true},
			{"PING message", false, nil, []any{"PING", "hi"}, true},
			{"TYPE", false, [][]any{{"RPUSH", k, "a"}}, []any{"TYPE", k}, true},
			{"TYPE none", false, nil, []any{"TYPE", k}, true},
			{"SMEMBERS", false, [][]any{{"SADD", k, "only"}}, []any{"SMEMBERS", k}, true},
			{"EXISTS", false, [][]any{{"SET", k, "1"}}, []any{"EXISTS", k, k2}, true},
			{"EVAL nested", false, nil, []any{"EVAL", "return {1, 'a', {2, 'b', {}}, false, -3}", 0}, true},
			{"EVAL true", false, nil, []any{"EVAL", "return true", 0}, true},
			{"EVAL false", false, nil, []any{"EVAL", "return false", 0}, true},
			{"EVAL nil", false, nil, []any{"EVAL", "return nil", 0}, true},
			{"EVAL RESP3 booleans", false, nil, []any{"EVAL", "redis.setresp(3) return {false, true, 'x'}", 0}, false},
			{"EVAL keys and args", false, nil, []any{"EVAL", "return {KEYS[1], ARGV[1], ARGV[2]}", 1, k, "\xff", 7}, true},
			{"EVAL error reply", false, nil, []any{"EVAL", "return redis.error_reply('MYERR boom')", 0}, true},
			{"EVAL error in array", false, nil, []any{"EVAL", "return {1, redis.error_reply('E1 x')}", 0}, false},
			{"EVAL WRONGTYPE", false, [][]any{{"SET", k, "x"}}, []any{"EVAL", "return redis.call('LPUSH', KEYS[1], 'y')", 1, k}, true},
			{"EVALSHA NOSCRIPT", false, nil, []any{"EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", 0}, true},
			{"SCRIPT EXISTS", false, nil, []any{"SCRIPT", "EXISTS", "ffffffffffffffffffffffffffffffffffffffff"}, true},
			{"WAIT", false, nil, []any{"WAIT", 0, 100}, true},
			{"HGETALL", true, [][]any{{"HSET", k, "f", "v"}}, []any{"HGETALL", k}, true},
			{"ZSCORE", true, [][]any{{"ZADD", k, 1.5, "m"}}, []any{"ZSCORE", k, "m"}, true},
			{"ZRANGE WITHSCORES", true, [][]any{{"ZADD", k, 0.1, "m"}}, []any{"ZRANGE", k, 0, -1, "WITHSCORES"}, true},
		}
		for _, c := range cases {
			if !s.real() && !c.onMini {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				if c.resp2 && s.proto == 3 {
					conn := s.conn(t)
					conn.Do("DEL", k, k2)
					for _, a := range c.setup {
						conn.Do(a[0].(string), a[1:]...)
					}
					_, err := conn.Do(c.cmd[0].(string), c.cmd[1:]...)
					if err == nil || !strings.Contains(err.Error(), "Protocol: 2") {
						t.Errorf("%v over RESP3: %v, want an error naming Protocol: 2", c.cmd, err)
					}
					return
				}
				same(t, s, []string{k, k2}, func(conn redigo.Conn) []result {
					for _, a := range c.setup {
						if _, err := conn.Do(a[0].(string), a[1:]...); err != nil {
							t.Fatal(err)
						}
					}
					return []result{do(conn, c.cmd[0].(string), c.cmd[1:]...)}
				})
			})
		}

		t.Run("arguments", func(t *testing.T) {
			args := []any{42, int64(-7), 1.5, 1e21, 0.1, math.Copysign(0, -1), true, false, nil, []byte{0, 255, '\r', '\n'}, "", "é",
				arg{9}, uint8(3), int32(-4), time.Duration(5), struct{ A int }{1}, redigo.Args{"x"}, float32(0.25)}
			same(t, s, nil, func(conn redigo.Conn) []result {
				var out []result
				for _, a := range args {
					out = append(out, do(conn, "ECHO", a))
				}
				return out
			})
		})

		// The one reply go-redis cannot tell apart: a script's status.
		t.Run("EVAL status", func(t *testing.T) {
			v, err := s.conn(t).Do("EVAL", "return redis.status_reply('FINE')", 0)
			if str, _ := redigo.String(v, err); str != "FINE" || err != nil {
				t.Errorf("%#v, %v; want FINE", v, err)
			}
		})
	})
}

// TestErrorTypes: an error reply is a redigo redis.Error, which the engine
// and redigo's Script tell from a failure of the connection.
func TestErrorTypes(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		c := s.conn(t)
		c.Do("SET", s.key("s"), "x")
		for _, cmd := range [][]any{
			{"LPUSH", s.key("s"), "y"},
			{"EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", 0},
			{"NOSUCHCOMMAND"},
		} {
			v, err := c.Do(cmd[0].(string), cmd[1:]...)
			e, ok := err.(redigo.Error)
			if !ok || v != e {
				t.Errorf("%v: %#v, %#v; want a redis.Error as reply and error", cmd, v, err)
			}
			if c.Err() != nil {
				t.Errorf("%v: an error reply broke the connection: %v", cmd, c.Err())
			}
		}
		_, err := c.Do("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", 0)
		if !strings.HasPrefix(err.Error(), "NOSCRIPT ") {
			t.Errorf("EVALSHA of an unknown script: %v", err)
		}
		// The NOSCRIPT fallback of redigo's Script, by DoContext and Do.
		script := redigo.NewScript(1, "return redis.call('GET', KEYS[1])")
		for i := 0; i < 2; i++ {
			s.client.ScriptFlush(context.Background())
			var v any
			if i == 0 {
				v, err = script.DoContext(context.Background(), c, s.key("s"))
			} else {
				v, err = script.Do(c, s.key("s"))
			}
			if b, ok := v.([]byte); !ok || string(b) != "x" || err != nil {
				t.Errorf("Script after SCRIPT FLUSH: %#v, %v", v, err)
			}
		}
	})
}

// TestPipeline: Send, Flush and Receive give the replies in order, and Do
// reads what was sent before it, as redigo does.
func TestPipeline(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		k, k2 := s.key("p"), s.key("p2")
		same(t, s, []string{k, k2}, func(c redigo.Conn) []result {
			var out []result
			send := func(cmd string, args ...any) {
				if err := c.Send(cmd, args...); err != nil {
					t.Fatal(err)
				}
			}
			send("SET", k, "1")
			send("INCR", k)
			send("RPUSH", k, "x") // WRONGTYPE
			send("GET", k)
			send("EVAL", "return {KEYS[1], 7}", 1, k)
			send("GET", k2)
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 6; i++ {
				v, err := c.Receive()
				out = append(out, result{v, err})
			}
			// Do reads what is pending: its own reply, the first error.
			send("INCR", k)
			send("LPUSH", k, "y") // WRONGTYPE
			send("INCR", k)
			out = append(out, do(c, "GET", k))
			// Do("") flushes and returns every pending reply.
			send("INCR", k)
			send("HSET", k, "f", "v") // WRONGTYPE
			out = append(out, do(c, ""))
			out = append(out, do(c, ""))
			// A Flush with nothing queued, then two.
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			send("GET", k)
			c.Flush()
			send("GET", k2)
			c.Flush()
			v, err := c.Receive()
			out = append(out, result{v, err})
			v, err = c.Receive()
			out = append(out, result{v, err})
			return out
		})
	})
}

// TestTransaction: MULTI, QUEUED and EXEC's replies as redigo gives them,
// and a connection given back inside MULTI is cleaned.
func TestTransaction(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		k, k2 := s.key("t"), s.key("t2")
		same(t, s, []string{k, k2}, func(c redigo.Conn) []result {
			return []result{
				do(c, "WATCH", k),
				do(c, "MULTI"),
				do(c, "SET", k, "v"),
				do(c, "INCR", k2),
				do(c, "GET", k),
				do(c, "EVAL", "return false", 0),
				do(c, "PING"),
				do(c, "INCR", k), // fails inside EXEC
				do(c, "EXEC"),
			}
		})
		// A connection closed inside MULTI: DISCARD, so the next user of
		// go-redis's connection is not in a transaction.
		client := newClientOpts(t, &redis.Options{Addr: s.addr, Protocol: s.proto, PoolSize: 1})
		c, _ := newPool(t, client).GetContext(context.Background())
		c.Do("MULTI")
		c.Do("SET", k, "never")
		c.Close()
		if v, err := client.Get(context.Background(), k).Result(); err == nil {
			t.Errorf("GET after a closed MULTI: %q: the transaction ran", v)
		}
	})
}

// TestContext: DoContext returns when its context ends, the connection is
// broken from then on, and Close still gives go-redis its connection back.
func TestContext(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		client := newClient(t, s.addr, s.proto)
		p := newPool(t, client)
		c, err := p.GetContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		cc := c.(redigo.ConnWithContext)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = cc.DoContext(ctx, "BLPOP", s.key("empty"), 1)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("BLPOP cut off by its context: %v", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("DoContext returned %v after its 50ms deadline", d)
		}
		if c.Err() == nil {
			t.Error("Err() is nil after a cut-off call")
		}
		if _, err := c.Do("PING"); err == nil {
			t.Error("a cut-off connection still answers")
		}
		c.Close()
		// The BLPOP ends within its 1s block; then the connection is back.
		deadline := time.Now().Add(3 * time.Second)
		for st := client.PoolStats(); st.TotalConns != st.IdleConns; st = client.PoolStats() {
			if time.Now().After(deadline) {
				t.Fatalf("pool stats %+v: the connection did not come back", st)
			}
			time.Sleep(10 * time.Millisecond)
		}

		// A done context sends nothing.
		c, _ = p.GetContext(context.Background())
		done, cancel2 := context.WithCancel(context.Background())
		cancel2()
		if _, err := c.(redigo.ConnWithContext).DoContext(done, "SET", s.key("done"), "x"); !errors.Is(err, context.Canceled) {
			t.Errorf("DoContext on a done context: %v", err)
		}
		c.Close()
		if n, _ := client.Exists(context.Background(), s.key("done")).Result(); n != 0 {
			t.Error("a done context's command ran")
		}
		if _, err := p.GetContext(done); !errors.Is(err, context.Canceled) {
			t.Errorf("GetContext on a done context: %v", err)
		}

		// DoWithTimeout: the wait runs out as redigo's i/o timeout does.
		c, _ = p.GetContext(context.Background())
		_, err = c.(redigo.ConnWithTimeout).DoWithTimeout(50*time.Millisecond, "BLPOP", s.key("empty"), 1)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("DoWithTimeout: %v, want os.ErrDeadlineExceeded", err)
		}
		c.Close()

		// ReceiveContext gives up too.
		c, _ = p.GetContext(context.Background())
		c.Send("BLPOP", s.key("empty"), 1)
		c.Flush()
		ctx3, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel3()
		if _, err := c.(redigo.ConnWithContext).ReceiveContext(ctx3); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ReceiveContext: %v", err)
		}
		c.Close()
	})
}

// TestCloseReturnsConnection: with a pool of one connection, each Close
// gives it back (else the next command would wait for PoolTimeout).
func TestCloseReturnsConnection(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		client := newClientOpts(t, &redis.Options{Addr: s.addr, Protocol: s.proto, PoolSize: 1, PoolTimeout: 200 * time.Millisecond})
		p := newPool(t, client)
		for i := 0; i < 5; i++ {
			c, err := p.GetContext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Do("SET", s.key("one"), i); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			c.Send("GET", s.key("one"))
			c.Flush() // Close reads the pending reply
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if c.Err() == nil {
				t.Error("Err() is nil after Close")
			}
			if _, err := c.Do("PING"); err == nil {
				t.Error("Do after Close answered")
			}
		}
		if st := client.PoolStats(); st.TotalConns != 1 || st.IdleConns != 1 {
			t.Errorf("pool stats %+v, want one idle connection", st)
		}
	})
}

// TestPinned: one connection is one server connection from the first
// command to Close, so WAIT and a blocking pop run where the script ran.
func TestPinned(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		if !s.real() {
			t.Skip("miniredis has no CLIENT ID")
		}
		a, b := s.conn(t), s.conn(t)
		ids := map[int64]bool{}
		for i := 0; i < 3; i++ {
			for _, c := range []redigo.Conn{a, b} {
				id, err := redigo.Int64(c.Do("CLIENT", "ID"))
				if err != nil {
					t.Fatal(err)
				}
				ids[id] = true
			}
		}
		if len(ids) != 2 {
			t.Errorf("two connections used %d server connections, want 2", len(ids))
		}
	})
}

// TestBlocking: a WAIT or a blocking pop longer than the client's
// ReadTimeout goes through go-redis's typed call, which waits for it.
func TestBlocking(t *testing.T) {
	addr := realAddr(t)
	for _, proto := range []int{2, 3} {
		t.Run(protoName(proto), func(t *testing.T) {
			s := newServer(t, addr, proto, nil)
			client := newClientOpts(t, &redis.Options{Addr: addr, Protocol: proto, ReadTimeout: 300 * time.Millisecond})
			p := newPool(t, client)
			c, _ := p.GetContext(context.Background())
			defer c.Close()
			k := s.key("q")
			for _, cmd := range [][]any{
				{"BLPOP", k, 1},
				{"BRPOP", k, "1"},
				{"BRPOPLPUSH", k, s.key("d"), 1},
				{"BLMOVE", k, s.key("d"), "LEFT", "RIGHT", 1},
				{"WAIT", 1, 1000},
			} {
				start := time.Now()
				v, err := c.Do(cmd[0].(string), cmd[1:]...)
				d := time.Since(start)
				want := any(nil)
				if cmd[0] == "WAIT" {
					want = int64(0)
				}
				if err != nil || !reflect.DeepEqual(v, want) || d < 900*time.Millisecond {
					t.Errorf("%v: %#v, %v after %v; want %#v after 1s", cmd, v, err, d, want)
				}
			}
			// A fractional timeout go-redis would round down is refused,
			// before anything is sent.
			_, err := c.Do("BLPOP", k, 1.5)
			if _, ok := err.(redigo.Error); !ok || !strings.Contains(err.Error(), "ReadTimeout") || c.Err() != nil {
				t.Errorf("BLPOP 1.5 over a 300ms ReadTimeout: %v (Err %v)", err, c.Err())
			}
			// A pop that finds an element, in a pipeline with a long WAIT.
			client.RPush(context.Background(), k, "x")
			c.Send("EVAL", "return 1", 0)
			c.Send("WAIT", 1, 1000)
			c.Send("BLPOP", k, 1)
			c.Flush()
			for i, want := range []any{int64(1), int64(0), []any{[]byte(k), []byte("x")}} {
				if v, err := c.Receive(); err != nil || !reflect.DeepEqual(v, want) {
					t.Errorf("reply %d: %#v, %v; want %#v", i, v, err, want)
				}
			}
		})
	}
}

// TestUnsupported: pub/sub is refused, and Receive with nothing pending
// says so; neither breaks the connection.
func TestUnsupported(t *testing.T) {
	servers(t, func(t *testing.T, s *server) {
		c := s.conn(t)
		if _, err := c.Do("SUBSCRIBE", "ch"); err == nil {
			t.Error("SUBSCRIBE accepted")
		}
		if err := c.Send("MONITOR"); err == nil {
			t.Error("MONITOR accepted")
		}
		if _, err := c.Receive(); err == nil {
			t.Error("Receive with nothing pending answered")
		}
		if _, err := c.Do("PING"); err != nil || c.Err() != nil {
			t.Errorf("PING after refused calls: %v, Err %v", err, c.Err())
		}
	})
}

func TestNilPool(t *testing.T) {
	if _, err := NewPool(nil).GetContext(context.Background()); err == nil {
		t.Error("GetContext on a Pool of a nil client: no error")
	}
	var p *Pool
	if _, err := p.GetContext(context.Background()); err == nil {
		t.Error("GetContext on a nil Pool: no error")
	}
	var c *redis.Client
	var cc *redis.ClusterClient
	for _, client := range []redis.UniversalClient{c, cc} {
		if _, err := NewPool(client).GetContext(context.Background()); err == nil {
			t.Errorf("GetContext on a Pool of a nil %T: no error", client)
		}
	}
}

func TestKeySlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3}, // CRC-16/XMODEM check value
		{"foo", 12182},
		{"{user1000}.following", keySlot("user1000")},
		{"{user1000}.followers", keySlot("user1000")},
		{"foo{}{bar}", keySlot("foo{}{bar}")},
		{"foo{{bar}}zap", keySlot("{bar")},
		{"{}", keySlot("{}")},
		{"", 0},
	} {
		if got := keySlot(c.key); got != c.slot {
			t.Errorf("keySlot(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
	if keySlot("foo{}{bar}") == keySlot("bar") {
		t.Error(`"foo{}{bar}": an empty tag must not make "bar" the tag`)
	}
}
