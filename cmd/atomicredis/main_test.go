//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
	"go.uber.org/goleak"
)

// The command's tests run it as a user does: built once (with -race when
// the tests are), then started as a process against a real server, the
// one REDIS_ADDR names or a private redis-server. Their bounds are
// generous: a test must hold on a busy machine.

// tool is the built command.
var tool string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "atomicredis-cmd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tool = filepath.Join(dir, "atomicredis")
	args := []string{"build", "-o", tool}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's server and namespace, and a directory for its
// children's files.
type env struct {
	t   *testing.T
	srv *testserver.Server
	dir string
}

func newEnv(t *testing.T) *env {
	var srv *testserver.Server
	if addr := testserver.RedisAddr(); addr != "" {
		srv = testserver.Real(t, "redis-server", addr)
	} else {
		srv = testserver.On(t, "private redis-server", testserver.PrivateRedis(t).Addr())
	}
	return &env{t: t, srv: srv, dir: t.TempDir()}
}

// engine is an engine of the test's own on the server, in the namespace
// the commands are given.
func (v *env) engine() *atomicredis.Engine {
	e := atomicredis.New(v.srv.Pool, atomicredis.WithNamespace(v.srv.NS))
	v.t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// path is a file in the test's directory.
func (v *env) path(name string) string { return filepath.Join(v.dir, name) }

// proc is one run of the command.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	start  time.Time
}

// start starts the command: args after the subcommand get -namespace.
func (v *env) start(args ...string) *proc {
	v.t.Helper()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append([]string{args[0], "-namespace", v.srv.NS}, args[1:]...)
	}
	return startProc(v.t, append(os.Environ(), "REDIS_ADDR="+v.srv.Addr), args...)
}

func startProc(t *testing.T, environ []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(tool, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = environ
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = 5 * time.Second // a grandchild left holding the pipes does not hold up Wait
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits up to bound for the command to end and returns its exit
// status, failing the test if it did not end.
func (p *proc) wait(bound time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(bound):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("atomicredis %s: still running after %v; killed. stdout:\n%s\nstderr:\n%s",
			strings.Join(p.cmd.Args[1:], " "), bound, p.stdout, p.stderr)
	}
	return exitStatus(p.cmd.ProcessState)
}

// waitBounded is wait for a goroutine other than the test's: it kills a
// command still running after bound and returns -1, with an error.
func (p *proc) waitBounded(bound time.Duration) int {
	select {
	case <-p.done:
		return exitStatus(p.cmd.ProcessState)
	case <-time.After(bound):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("atomicredis %s: still running after %v; killed. stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), bound, p.stderr)
		return -1
	}
}

// run runs the command to its end, within bound.
func (v *env) run(bound time.Duration, args ...string) (code int, stdout, stderr string) {
	v.t.Helper()
	p := v.start(args...)
	code = p.wait(bound)
	return code, p.stdout.String(), p.stderr.String()
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 20 ms until it holds or bound passes.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exists reports whether a file is there.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readPID reads a pid a child wrote, and has the test kill it at its end
// should it outlive the test.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) state ...: comm may hold spaces, so the state follows the last ')'
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			return s[i+2] != 'Z'
		}
	} else if errors.Is(err, os.ErrNotExist) {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// stamps is a shell command that appends "start ID" to file, sleeps for
// hold seconds, and appends "end ID": a run of a critical section that
// overlaps finds.
func stamps(file, hold string) string {
	return fmt.Sprintf(`echo "start $$" >> %[1]s; sleep %[2]s; echo "end $$" >> %[1]s`, file, hold)
}

// overlaps reads a file of stamps and returns the most runs it shows
// at once, and how many runs started.
func overlaps(t *testing.T, file string) (most, runs int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch strings.Fields(sc.Text())[0] {
		case "start":
			now++
			runs++
			most = max(most, now)
		case "end":
			now--
		}
	}
	return most, runs
}

func TestMain_Usage(t *testing.T) {
	t.Parallel()
	closed := "127.0.0.1:1" // nothing listens on port 1
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout, or stderr when code is not 0
	}{
		{[]string{"-help"}, 0, "Exit status"},
		{[]string{"help"}, 0, "75  EX_TEMPFAIL"},
		{[]string{"lock", "-help"}, 0, "-grace"},
		{[]string{"semaphore", "-h"}, 0, "-weight"},
		{[]string{"leader", "-help"}, 0, "-watch"},
		{nil, exitUsage, "Usage:"},
		{[]string{"nosuch"}, exitUsage, `unknown command "nosuch"`},
		{[]string{"-addr", closed, "lock"}, exitUsage, "flags go after the command"},
		{[]string{"lock", "-nosuch", "x", "--", "true"}, exitUsage, "flag provided but not defined: -nosuch"},
		{[]string{"lock", "x", "true"}, exitUsage, "no -- after NAME"},
		{[]string{"lock", "x", "-n", "--", "true"}, exitUsage, "flags go before NAME"},
		{[]string{"lock", "x", "--"}, exitUsage, "no CMD"},
		{[]string{"lock", "-wait", "-1s", "x", "--", "true"}, exitUsage, "must not be negative"},
		{[]string{"lock", "-n", "-wait", "1s", "x", "--", "true"}, exitUsage, "-n and -wait"},
		{[]string{"elect", "-wait", "0", "x", "--", "true"}, exitUsage, "cannot try once"},
		{[]string{"unlock", "-addr", closed, "x"}, exitUsage, "say -force"},
		{[]string{"limit", "-addr", closed, "x"}, exitUsage, "1 arguments after the flags, want 2"},
		{[]string{"info", "-addr", closed, "x", "y"}, exitUsage, "2 arguments after the flags, want 1"},
		{[]string{"lock", "-addr", closed, "x", "--", "true"}, exitUnavailable, "connection refused"},
		{[]string{"info", "-addr", closed, "x"}, exitUnavailable, "connection refused"},
		{[]string{"leader", "-addr", closed, "-watch", "x"}, exitUnavailable, "connection refused"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			p := startProc(t, os.Environ(), tc.args...)
			code := p.wait(30 * time.Second)
			out := p.stderr.String()
			if tc.code == 0 {
				out = p.stdout.String()
			}
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Errorf("exit %d, want %d; output, want %q in it:\n%s", code, tc.code, tc.out, out)
			}
		})
	}
}
