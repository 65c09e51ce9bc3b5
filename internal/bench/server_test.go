package bench

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"github.com/gomodule/redigo/redis"
)

// counts are ServerCounts of redis-server at one moment.
func counts(at time.Time, calls, usec map[string]float64) ServerCounts {
	return ServerCounts{At: at, Calls: calls, Usec: usec}
}

// To counts each command's server time once: EXEC's time holds the
// commands it ran, which commandstats counts under their own names too
// (measured on redis-server 7.0.15: MULTI, 2,000 ZADD, EXEC gave ZADD
// 1,853 µs and EXEC 2,184 µs), and a script's time holds its commands.
func TestUsageCountsEachCommandOnce(t *testing.T) {
	at := time.Now()
	zero := counts(at, map[string]float64{}, map[string]float64{})
	book := counts(at, map[string]float64{"multi": 1, "zadd": 2000, "exec": 1}, map[string]float64{"multi": 1, "zadd": 1853, "exec": 2184})
	if u := zero.To(book); u.Usec != 1854 || u.Cmds != 2002 {
		t.Errorf("MULTI, 2,000 ZADD, EXEC: %v µs in %v commands; want 1854 µs (EXEC's left out) in 2002", u.Usec, u.Cmds)
	}
	lua := counts(at, map[string]float64{"evalsha": 10, "get": 30}, map[string]float64{"evalsha": 100, "get": 9})
	if u := zero.To(lua); u.Usec != 100 || u.Cmds != 10 {
		t.Errorf("10 EVALSHA calling 30 GET: %v µs in %v commands; want 100 in 10", u.Usec, u.Cmds)
	}
}

// ToCommands counts only the commands a client names: not the INFO that
// read the counts, nor a handshake, nor what its scripts call.
func TestToCommandsCountsWhatTheClientSends(t *testing.T) {
	at := time.Now()
	s := counts(at, map[string]float64{"evalsha": 5, "info": 2}, map[string]float64{"evalsha": 50, "info": 20})
	s.CPU, s.Client = 1, 2
	u := s.ToCommands(ServerCounts{At: at.Add(time.Second),
		Calls: map[string]float64{"evalsha": 15, "info": 4, "hello": 1, "get": 30},
		Usec:  map[string]float64{"evalsha": 150, "info": 40, "hello": 3, "get": 9}, CPU: 1.5, Client: 2.25},
		[]string{"evalsha", "eval"})
	if u.Cmds != 10 || u.Usec != 100 || u.CPU != 0.5 || u.Client != 0.25 || u.Wall != time.Second {
		t.Errorf("%+v; want 10 commands, 100 µs, 0.5 s of the server's CPU, 0.25 s of the clients', 1s", u)
	}
}

// On miniredis only the clients' count of commands is known.
func TestUsageOnMiniredis(t *testing.T) {
	s, u := ServerCounts{Sent: 3, mini: true}, ServerCounts{Sent: 10, Calls: map[string]float64{"evalsha": 99}}
	if got := s.To(u); got.Cmds != 7 || got.Usec != 0 {
		t.Errorf("%+v; want 7 commands and no server time", got)
	}
}

// A budget of operations is shared by a round's visits, each doing at
// least one; one of time likewise.
func TestBudgetShare(t *testing.T) {
	for _, c := range []struct {
		bu     Budget
		passes int
		want   Budget
	}{
		{Budget{N: 100}, 10, Budget{N: 10}},
		{Budget{N: 5}, 10, Budget{N: 1}},
		{Budget{D: time.Second}, 4, Budget{D: 250 * time.Millisecond}},
		{Budget{N: 7}, 1, Budget{N: 7}},
	} {
		if got := c.bu.share(c.passes); got != c.want {
			t.Errorf("%+v over %d visits: %+v, want %+v", c.bu, c.passes, got, c.want)
		}
	}
	start := time.Now()
	if !(Budget{N: 2}).More(1, start) || (Budget{N: 2}).More(2, start) || !(Budget{D: time.Nanosecond}).More(0, start) {
		t.Error("More")
	}
}

// Tally sums a round's visits.
func TestTally(t *testing.T) {
	var tl Tally
	tl.Add(Usage{Wall: time.Second, Cmds: 2, Calls: 3, Usec: 4, CPU: 5, Client: 6}, 7, 8)
	tl.Add(Usage{Wall: time.Second, Cmds: 2, Calls: 3, Usec: 4, CPU: 5, Client: 6}, 7, 8)
	if want := (Tally{Usage{2 * time.Second, 4, 6, 8, 10, 12}, 14, 16}); tl != want {
		t.Errorf("%+v, want %+v", tl, want)
	}
}

// choose makes s the chosen server for the test's length.
func choose(t *testing.T, s Server) {
	saved := chosen
	chosen = s
	t.Cleanup(func() { chosen = saved })
}

// readAround runs work on env's pool and returns the usage around it.
func readAround(t *testing.T, env *Env, work func(c redis.Conn) error) (Usage, ServerCounts, ServerCounts) {
	t.Helper()
	s1, err := env.Read()
	if err != nil {
		t.Fatal(err)
	}
	c := env.Pool.Get()
	err = work(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := env.Read()
	if err != nil {
		t.Fatal(err)
	}
	return s1.To(s2), s1, s2
}

// On redis-server the counts are the server's own (INFO commandstats),
// the admin's INFO left out: the book's plain commands each count, and
// of a script only its call, though the server ran the commands it called
// too.
func TestReadServerOnRedis(t *testing.T) {
	r := testserver.PrivateRedis(t)
	choose(t, Server{Addr: r.Addr()})
	env := NewEnv(t, 2)
	u, _, _ := readAround(t, env, func(c redis.Conn) error {
		for i := 0; i < 5; i++ {
			if _, err := c.Do("SET", "k", i); err != nil {
				return err
			}
		}
		_, err := c.Do("GET", "k")
		return err
	})
	if u.Cmds != 6 || u.Calls != 6 || u.Usec < 0 || u.Wall <= 0 {
		t.Errorf("5 SET and a GET: %+v; want 6 commands, 6 calls", u)
	}
	u, s1, s2 := readAround(t, env, func(c redis.Conn) error {
		for i := 0; i < 3; i++ {
			if _, err := c.Do("EVAL", "return redis.call('GET', KEYS[1])", 1, "k"); err != nil {
				return err
			}
		}
		return nil
	})
	if u.Cmds != 3 || u.Calls != 6 {
		t.Errorf("3 EVAL calling GET: %+v; want 3 commands, 6 calls", u)
	}
	if got := s1.ToCommands(s2, []string{"eval"}); got.Cmds != 3 || got.Usec != u.Usec {
		t.Errorf("3 EVAL, ToCommands: %+v; want 3 commands in %v µs", got, u.Usec)
	}
	if env.Sent.Load() != 9 || env.Trips.Load() != 9 {
		t.Errorf("the pool counted %d commands sent in %d round trips, want 9 in 9", env.Sent.Load(), env.Trips.Load())
	}
	sent, trips := env.Sent.Load(), env.Trips.Load()
	c := env.Pool.Get()
	defer c.Close()
	for i := 0; i < 3; i++ {
		c.Send("GET", "k")
	}
	if _, err := c.Do("GET", "k"); err != nil { // one round trip with the 3 sent
		t.Fatal(err)
	}
	c.Send("GET", "k")
	c.Flush()
	if _, err := c.Receive(); err != nil {
		t.Fatal(err)
	}
	if s, tr := env.Sent.Load()-sent, env.Trips.Load()-trips; s != 5 || tr != 2 {
		t.Errorf("3 GET sent, then Do, then Send, Flush, Receive: %d commands in %d round trips, want 5 in 2", s, tr)
	}
}

// On miniredis the commands are the clients' own count, and the server's
// figures are 0.
func TestReadServerOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	choose(t, Server{Addr: m.Addr(), Mini: true})
	env := NewEnv(t, 2)
	u, _, _ := readAround(t, env, func(c redis.Conn) error {
		if err := c.Send("SET", "k", 1); err != nil {
			return err
		}
		_, err := c.Do("GET", "k")
		return err
	})
	if u.Cmds != 2 || u.Calls != 0 || u.Usec != 0 || u.CPU != 0 {
		t.Errorf("SET and GET on miniredis: %+v; want 2 commands and no server figures", u)
	}
}

// The benchmarks' pools stay well below the server's maxclients: an
// eighth of it, at most 512 (what a server that does not say gets) and at
// least 8; a caller finding every connection busy waits for one.
func TestPoolLimit(t *testing.T) {
	saved := chosen
	t.Cleanup(func() { chosen = saved })
	for maxClients, want := range map[int]int{10000: 512, 1000: 125, 100: 12, 20: 8, 0: 512} {
		chosen.MaxClients = maxClients
		if got := PoolLimit(); got != want {
			t.Errorf("maxclients %d: PoolLimit %d, want %d", maxClients, got, want)
		}
	}
	chosen.MaxClients = 10000
	if p := Limit(&redis.Pool{}); p.MaxActive != 512 || !p.Wait {
		t.Errorf("Limit: MaxActive %d, Wait %v; want 512, true", p.MaxActive, p.Wait)
	}
	m := miniredis.RunT(t)
	if n := maxClients(m.Addr()); n != 0 {
		t.Errorf("maxclients of a miniredis: %d, want 0 (it does not say)", n)
	}
}
