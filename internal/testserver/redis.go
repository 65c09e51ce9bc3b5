package testserver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Redis is a redis-server of the tests' own: on loopback, without
// persistence, its log and files in Dir.
type Redis struct {
	Port int
	Dir  string

	bin    string
	args   []string // after the common ones
	ownDir bool     // Dir is removed by Stop
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
}

// procAttr, when set (procattr_linux.go), makes every redis-server started
// here die with the test binary, even when a timeout panic skips cleanup.
var procAttr func() *syscall.SysProcAttr

// StartRedis starts a redis-server on a free loopback port, in a
// temporary directory that Stop removes. A port taken meanwhile by someone
// else is replaced by another.
func StartRedis(args ...string) (*Redis, error) {
	dir, err := os.MkdirTemp("", "atomicredis-redis")
	if err != nil {
		return nil, err
	}
	r, err := startOnFreePort(dir, false, args)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.ownDir = true
	return r, nil
}

// StartClusterNode starts a cluster-enabled redis-server in dir (its
// nodes.conf keeps its identity across Start), on a free port whose
// cluster bus port (port + 10000) is free too.
func StartClusterNode(dir string, args ...string) (*Redis, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}, args...)
	return startOnFreePort(dir, true, args)
}

// PrivateRedis starts a redis-server for one test, stopped when it ends;
// it skips the test when no redis-server is on PATH.
func PrivateRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Skip(t, "no redis-server on PATH: this test needs a private server")
	}
	r, err := StartRedis(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Builds are the servers built from ../shared/servers that tests start
// privately, by name, each from the binary its environment variable names
// (.ci/run sets them from build.sh's output).
var Builds = []struct{ Name, Env string }{
	{"valkey-8.0.1", "VALKEY_SERVER"},
	{"redis-8.0-m01", "REDIS8_SERVER"},
}

// PrivateBuild starts the server that the environment variable env names
// (one of Builds) for one test, stopped when it ends; it skips the test,
// saying so, when env is not set.
func PrivateBuild(t testing.TB, name, env string) *Redis {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		Skip(t, fmt.Sprintf("%s not set: the %s run is skipped (.ci/run sets it from ../shared/servers/build.sh)", env, name))
	}
	dir, err := os.MkdirTemp("", "atomicredis-"+name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := startBinaryOnFreePort(bin, dir, false, nil)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	r.ownDir = true
	t.Cleanup(r.Stop)
	return r
}

func startOnFreePort(dir string, cluster bool, args []string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	return startBinaryOnFreePort(bin, dir, cluster, args)
}

func startBinaryOnFreePort(bin, dir string, cluster bool, args []string) (*Redis, error) {
	var last error
	for try := 0; try < 10; try++ {
		port, err := freePort(cluster)
		if err != nil {
			return nil, err
		}
		r := &Redis{Port: port, Dir: dir, bin: bin, args: args}
		if last = r.Start(); last == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("redis-server did not start on 10 ports: %w", last)
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.Port) }

// Start (re)starts the server on its port and directory and waits until
// it answers; a server of someone else on the port does not count.
func (r *Redis) Start() error {
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(r.Port), "--dir", r.Dir,
		"--save", "", "--appendonly", "no", "--logfile", "log",
		// a replica syncs at once rather than after the default 5 s
		"--repl-diskless-sync-delay", "0"}, r.args...)
	r.cmd = exec.Command(r.bin, args...)
	if procAttr != nil {
		r.cmd.SysProcAttr = procAttr()
	}
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(r.cmd, r.done)
	want := "process_id:" + strconv.Itoa(r.cmd.Process.Pid)
	for i := 0; i < 200; i++ {
		select {
		case <-r.done:
			return fmt.Errorf("redis-server on port %d exited: %s", r.Port, r.LastLog(5))
		case <-time.After(25 * time.Millisecond):
		}
		info, err := redis.String(r.Do("INFO", "server"))
		if err == nil && strings.Contains(info, want) {
			return nil
		}
	}
	r.Kill()
	return fmt.Errorf("redis-server on port %d did not answer: %s", r.Port, r.LastLog(5))
}

// Do runs one command on a fresh connection.
func (r *Redis) Do(cmd string, args ...any) (any, error) {
	c, err := redis.Dial("tcp", r.Addr(), redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(cmd, args...)
}

// Alive reports whether the process runs.
func (r *Redis) Alive() bool {
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// Kill ends the server at once (SIGKILL), as a crash would.
func (r *Redis) Kill() {
	if r.Alive() {
		r.cmd.Process.Kill()
		<-r.done
	}
}

// Signal sends sig to the server's process (SIGSTOP, SIGCONT).
func (r *Redis) Signal(sig os.Signal) error {
	if !r.Alive() {
		return fmt.Errorf("redis-server on port %d is not running", r.Port)
	}
	return r.cmd.Process.Signal(sig)
}

// Stop kills the server and removes the directory StartRedis made.
func (r *Redis) Stop() {
	r.Kill()
	if r.ownDir {
		os.RemoveAll(r.Dir)
	}
}

// LastLog is the last n lines of the server's log.
func (r *Redis) LastLog(n int) string {
	b, err := os.ReadFile(filepath.Join(r.Dir, "log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Version is "redis-server 7.0.15" for the server at addr, as its INFO
// says.
func Version(addr string) string {
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		return "redis-server"
	}
	defer c.Close()
	info, _ := redis.String(c.Do("INFO", "server"))
	if v, ok := InfoField(info, "redis_version"); ok {
		return "redis-server " + v
	}
	return "redis-server"
}

// InfoField is the value of field in the text of an INFO reply.
func InfoField(info, field string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v, true
		}
	}
	return "", false
}

// Ports handed out by this process, so that two tests starting servers at
// once do not pick the same one.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// freePort picks a loopback port that is free now and outside the kernel's
// ephemeral range, where a client socket could take it at any moment;
// with cluster, its cluster bus port (port + 10000) likewise.
func freePort(cluster bool) (int, error) {
	lo, hi := ephemeralRange()
	usable := func(p int) bool {
		return p >= 10000 && p <= 65535 && (p < lo || p > hi) && !ports[p] && listenable(p)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for try := 0; try < 2000; try++ {
		p := 10000 + rand.IntN(55536)
		if usable(p) && (!cluster || usable(p+10000)) {
			ports[p] = true
			if cluster {
				ports[p+10000] = true
			}
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port outside the ephemeral range")
}

func listenable(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// ephemeralRange is the kernel's range of ports for client sockets
// (Linux's default when it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if l, err := strconv.Atoi(f[0]); err == nil {
				lo = l
			}
			if h, err := strconv.Atoi(f[1]); err == nil {
				hi = h
			}
		}
	}
	return lo, hi
}
