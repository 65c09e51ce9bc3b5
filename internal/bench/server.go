package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// Server is the server the benchmarks measure.
type Server struct {
	Addr       string
	Mini       bool   // miniredis: no server figures, fewer rounds
	Name       string // for the verdict table's heading
	MaxClients int    // its maxclients (CONFIG GET), 0 where it does not say
}

// chosen is the server that PickServer chose (or a test set): what the
// rounds, the readings and the table's heading go by.
var chosen Server

// PickServer chooses the server the benchmarks measure and prints which
// ("bench server: ..."): REDIS_ADDR if set; else a private redis-server
// if one is on PATH; else miniredis, whose figures only show that the
// benchmarks run. BENCH_MINIREDIS=1 chooses miniredis whatever there is.
// stop shuts down a server it started.
func PickServer() (s Server, stop func(), err error) {
	forceMini := os.Getenv("BENCH_MINIREDIS") == "1"
	_, pathErr := exec.LookPath("redis-server")
	switch addr := testserver.RedisAddr(); {
	case addr != "" && !forceMini:
		s = Server{Addr: addr, Name: testserver.Version(addr) + " at " + addr + " (REDIS_ADDR)"}
		fmt.Printf("bench server: %s\n", s.Name)
		stop = func() {}
	case pathErr == nil && !forceMini:
		r, err := testserver.StartRedis()
		if err != nil {
			return Server{}, nil, err
		}
		s = Server{Addr: r.Addr(), Name: "private " + testserver.Version(r.Addr())}
		fmt.Printf("bench server: %s at %s (no persistence)\n", s.Name, s.Addr)
		stop = r.Stop
	default:
		m, err := miniredis.Run()
		if err != nil {
			return Server{}, nil, err
		}
		why := "no redis-server on PATH"
		if forceMini {
			why = "BENCH_MINIREDIS=1"
		}
		s = Server{Addr: m.Addr(), Mini: true, Name: "miniredis (" + why + ": Go's Lua interpreter, not Redis)"}
		fmt.Printf("bench server: miniredis (%s): figures measure miniredis's Go Lua interpreter, not Redis\n", why)
		stop = m.Close
	}
	s.MaxClients = maxClients(s.Addr)
	chosen = s
	return s, stop, nil
}

// maxClients is the server's maxclients (CONFIG GET maxclients), or 0
// where it does not answer (miniredis, a server whose ACL forbids CONFIG).
func maxClients(addr string) int {
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	v, err := redis.Strings(c.Do("CONFIG", "GET", "maxclients"))
	if err != nil || len(v) != 2 {
		return 0
	}
	n, _ := strconv.Atoi(v[1])
	return n
}

// PoolLimit is the most connections one pool of the benchmarks opens: an
// eighth of the server's maxclients, at most 512 and at least 8 (a
// server that does not say: 512), so that the pools a run holds at once
// (an experiment's, the setup's, a benchmark's own, the engines' wake
// subscriptions) stay well below maxclients on any server. A benchmark
// needs fewer: 64 clients in its largest crowd; 10,000 locks renewed
// through one pool queue for its connections.
func PoolLimit() int {
	if chosen.MaxClients <= 0 {
		return 512
	}
	return min(max(chosen.MaxClients/8, 8), 512)
}

// Limit gives p the benchmarks' PoolLimit and has a caller that finds
// every connection busy wait for one (Wait), rather than fail; it
// returns p.
func Limit(p *redis.Pool) *redis.Pool {
	p.MaxActive, p.Wait = PoolLimit(), true
	return p
}

// Env is an experiment's connections to the chosen server: Pool, whose
// connections count the commands they send in Sent and their round trips
// in Trips (a Do, with what was sent before it, or a Flush), and Admin, a
// connection of its own (INFO, setup and cleanup).
type Env struct {
	Pool  *redis.Pool
	Admin redis.Conn
	Sent  *atomic.Int64
	Trips *atomic.Int64
}

// NewEnv opens an Env on the chosen server, with up to maxIdle idle
// connections in its pool and at most PoolLimit in all (a caller waits
// for one), and closes it when b ends.
func NewEnv(b testing.TB, maxIdle int) *Env {
	b.Helper()
	addr := chosen.Addr
	env := &Env{Sent: new(atomic.Int64), Trips: new(atomic.Int64)}
	env.Pool = Limit(&redis.Pool{
		MaxIdle:     maxIdle,
		IdleTimeout: time.Minute,
		Dial: func() (redis.Conn, error) {
			c, err := redis.Dial("tcp", addr)
			if err != nil {
				return nil, err
			}
			return countedConn{c, env.Sent, env.Trips}, nil
		},
	})
	admin, err := redis.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	env.Admin = admin
	b.Cleanup(func() { env.Pool.Close(); admin.Close() })
	return env
}

// Read takes ServerCounts through the admin connection. Its own INFO
// calls are left out of every Usage, but not out of the CPU.
func (env *Env) Read() (ServerCounts, error) { return ReadServer(env.Admin, env.Sent.Load()) }

// countedConn counts the commands sent through it, and its round trips.
type countedConn struct {
	redis.Conn
	n, trips *atomic.Int64
}

// count counts a Do's command and its round trip. Do(""), which reads
// the replies of what was sent (a pool's Close), counts as neither.
func (c countedConn) count(cmd string) {
	if cmd != "" {
		c.n.Add(1)
		c.trips.Add(1)
	}
}

func (c countedConn) Do(cmd string, args ...any) (any, error) {
	c.count(cmd)
	return c.Conn.Do(cmd, args...)
}

func (c countedConn) Flush() error {
	c.trips.Add(1)
	return c.Conn.Flush()
}

func (c countedConn) Send(cmd string, args ...any) error {
	c.n.Add(1)
	return c.Conn.Send(cmd, args...)
}

func (c countedConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	c.count(cmd)
	return redis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c countedConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	c.count(cmd)
	return redis.DoWithTimeout(c.Conn, d, cmd, args...)
}

func (c countedConn) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(c.Conn, ctx)
}

func (c countedConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.Conn, d)
}

// ServerCounts is what the server had done at one moment: calls and
// microseconds by command (INFO commandstats; commands that scripts call
// are counted too, and inside their script's time) and CPU seconds, user
// + sys (INFO cpu); beside them the commands the clients had sent and
// this process's CPU. On miniredis only the clients' figures are known.
type ServerCounts struct {
	At     time.Time
	Calls  map[string]float64
	Usec   map[string]float64
	CPU    float64
	Sent   int64   // commands the clients had sent (an Env's pool)
	Client float64 // this process's CPU seconds, user + sys
	mini   bool
}

// ReadServer takes ServerCounts through admin, a connection of its own to
// the server measured; sent is the clients' count of commands.
func ReadServer(admin redis.Conn, sent int64) (ServerCounts, error) {
	s := ServerCounts{At: time.Now(), Sent: sent, Calls: map[string]float64{}, Usec: map[string]float64{},
		Client: processCPU(), mini: chosen.Mini}
	if s.mini {
		return s, nil
	}
	var info string
	for _, section := range []string{"commandstats", "cpu"} {
		v, err := redis.String(admin.Do("INFO", section))
		if err != nil {
			return s, fmt.Errorf("INFO %s: %w", section, err)
		}
		info += v
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			cmd, stats, _ := strings.Cut(rest, ":")
			for _, kv := range strings.Split(stats, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					s.Calls[cmd] = f
				case "usec":
					s.Usec[cmd] = f
				}
			}
		}
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				s.CPU += f
			}
		}
	}
	return s, nil
}

// Usage is what happened between two ServerCounts.
type Usage struct {
	Wall   time.Duration
	Cmds   float64 // commands clients sent
	Calls  float64 // every command the server ran, scripts' included (0 on miniredis)
	Usec   float64 // the server's time in the commands clients sent (0 on miniredis)
	CPU    float64 // server CPU seconds (0 on miniredis)
	Client float64 // this process's CPU seconds (the clients', and the INFO calls')
}

// Commands that only clients send: script calls, and blocking pops
// (scripts cannot block).
var (
	scriptCalls  = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}
	blockingPops = map[string]bool{"blpop": true, "brpop": true, "blmove": true, "brpoplpush": true, "blmpop": true}
)

// To is the usage from s to t. The server's commandstats count the
// commands scripts call as well; the ones clients sent are the script
// calls and blocking pops when any script ran (atomicredis sends nothing
// else), and every command when none did (the book's code). A plain
// command sent beside scripts (the Lua market's ZRANGE) is left out of
// Cmds and Usec. EXEC's time is that of the commands it ran, which
// commandstats counts under their own names too: Usec leaves it out, so
// that each command's time counts once (EXEC's own, about 0.2 µs a queued
// command, is lost). miniredis: Cmds is the clients' own count.
func (s ServerCounts) To(t ServerCounts) Usage {
	u := Usage{Wall: t.At.Sub(s.At), CPU: t.CPU - s.CPU, Client: t.Client - s.Client}
	if s.mini {
		u.Cmds = float64(t.Sent - s.Sent)
		return u
	}
	var scripts, pops, scriptUsec, popUsec, allUsec float64
	for cmd, n := range t.Calls {
		if cmd == "info" { // the admin's
			continue
		}
		d, du := n-s.Calls[cmd], t.Usec[cmd]-s.Usec[cmd]
		u.Calls += d
		if cmd != "exec" {
			allUsec += du
		}
		switch {
		case scriptCalls[cmd]:
			scripts, scriptUsec = scripts+d, scriptUsec+du
		case blockingPops[cmd]:
			pops, popUsec = pops+d, popUsec+du
		}
	}
	u.Cmds, u.Usec = scripts+pops, scriptUsec+popUsec
	if scripts == 0 {
		u.Cmds, u.Usec = u.Calls, allUsec
	}
	return u
}

// ToCommands is the usage from s to t of a client that sends the
// commands sent (commandstats names: "evalsha", "set", ...) and no other:
// commands its scripts call are inside their script's time, and the
// admin's INFO, a client's handshake and the like are left out. Calls
// stays 0.
func (s ServerCounts) ToCommands(t ServerCounts, sent []string) Usage {
	u := Usage{Wall: t.At.Sub(s.At), CPU: t.CPU - s.CPU, Client: t.Client - s.Client}
	for _, cmd := range sent {
		u.Cmds += t.Calls[cmd] - s.Calls[cmd]
		u.Usec += t.Usec[cmd] - s.Usec[cmd]
	}
	return u
}
