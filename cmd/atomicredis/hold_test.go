//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/atomicredis/atomicredis/internal/testserver"
)

// TestLock_NoOverlap: 20 lock commands started at once on one name run
// their CMDs one at a time, every one of them.
func TestLock_NoOverlap(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	file := v.path("stamps")
	const n = 20
	var wg sync.WaitGroup
	codes := make([]int, n)
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = v.start("lock", "-wait", "2m", "cron", "--", "sh", "-c", stamps(file, "0.05"))
	}
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = p.waitBounded(2 * time.Minute)
		}()
	}
	wg.Wait()
	for i, code := range codes {
		if code != 0 {
			t.Errorf("run %d: exit %d; stderr:\n%s", i, code, procs[i].stderr)
		}
	}
	if most, runs := overlaps(t, file); most != 1 || runs != n {
		t.Errorf("%d runs, at most %d at once; want %d runs, one at a time", runs, most, n)
	}
}

// TestLock_TryHeld: on a held name, -n and -wait exit 75 and run nothing.
func TestLock_TryHeld(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine()
	l, err := e.TryLock(context.Background(), "cron", atomicredis.LockOptions{TTL: time.Minute, Owner: "the test"})
	if err != nil {
		t.Fatal(err)
	}
	marker := v.path("ran")
	for _, tc := range []struct {
		flags  []string
		least  time.Duration // it waits at least this long
		stderr string
	}{
		{[]string{"-n"}, 0, `not acquired: held by "the test"`},
		{[]string{"-wait", "0"}, 0, "not acquired"},
		{[]string{"-wait", "500ms"}, 500 * time.Millisecond, "not acquired"},
		{[]string{"-n", "-q"}, 0, ""},
	} {
		args := append(append([]string{"lock"}, tc.flags...), "cron", "--", "touch", marker)
		began := time.Now()
		code, _, stderr := v.run(30*time.Second, args...)
		took := time.Since(began)
		if code != exitTempFail || exists(marker) {
			t.Errorf("%v: exit %d, CMD ran %v; want %d, CMD not run", tc.flags, code, exists(marker), exitTempFail)
		}
		if tc.stderr == "" && stderr != "" || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: stderr %q, want %q", tc.flags, stderr, tc.stderr)
		}
		if took < tc.least {
			t.Errorf("%v: gave up after %v, want at least %v", tc.flags, took, tc.least)
		}
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := v.run(30*time.Second, "lock", "-n", "cron", "--", "touch", marker); code != 0 || !exists(marker) {
		t.Errorf("on a free name: exit %d, CMD ran %v; stderr:\n%s", code, exists(marker), stderr)
	}
	bad := v.path("bad")
	if code, _, stderr := v.run(30*time.Second, "lock", "-n", "a{b}", "--", "touch", bad); code != exitUsage || exists(bad) ||
		!strings.Contains(stderr, "invalid argument") {
		t.Errorf("a name with braces: exit %d, CMD ran %v, stderr %q; want %d, CMD not run, ErrInvalid's text", code, exists(bad), stderr, exitUsage)
	}
}

// TestLock_LostStopsCMD: a lock freed by unlock -force while CMD runs
// stops CMD's whole process group with SIGTERM, and with SIGKILL after
// -grace when SIGTERM does not end it; the command exits exitLost within
// the renewal period (a third of -ttl) plus the grace.
func TestLock_LostStopsCMD(t *testing.T) {
	const ttl, grace = 3 * time.Second, 2 * time.Second
	renewal := ttl / 3
	for _, tc := range []struct {
		name   string
		script string // writes ready when it runs, and bg: the pid of a process it started
		killed bool   // it ignores SIGTERM
	}{
		{"term", `sleep 60 & echo $! > bg; trap 'echo TERM >> got; exit 0' TERM; echo ready > ready; wait`, false},
		{"kill", `trap '' TERM; sleep 60 & echo $! > bg; echo ready > ready; while :; do sleep 0.1; done`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t)
			p := v.start("lock", "-ttl", ttl.String(), "-grace", grace.String(), "cron", "--",
				"sh", "-c", "cd "+v.dir+" || exit 1; "+tc.script)
			waitFor(t, 30*time.Second, "CMD running", func() bool { return exists(v.path("ready")) })
			bg := readPID(t, v.path("bg"))
			unlocking := time.Now()
			if code, out, stderr := v.run(30*time.Second, "unlock", "-force", "cron"); code != 0 || out != "lock \"cron\" freed\n" {
				t.Fatalf("unlock -force: exit %d, stdout %q; stderr:\n%s", code, out, stderr)
			}
			freed := time.Now()            // the lock was freed between unlocking and freed
			const margin = 3 * time.Second // a busy machine
			code := p.wait(renewal + grace + margin + 10*time.Second)
			took, least := time.Since(freed), time.Since(unlocking)
			if code != exitLost {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitLost, p.stderr)
			}
			if bound := renewal + grace + margin; took > bound {
				t.Errorf("ended %v after the lock was freed; want within %v (a renewal period, the grace and %v)", took, bound, margin)
			}
			if tc.killed {
				if least < grace || !strings.Contains(p.stderr.String(), "SIGKILL") {
					t.Errorf("ended at most %v after the lock was freed, stderr:\n%s\nwant SIGKILL after the grace (%v)", least, p.stderr, grace)
				}
			} else if b, _ := os.ReadFile(v.path("got")); string(b) != "TERM\n" {
				t.Errorf("CMD got %q, want TERM once", b)
			}
			waitFor(t, 5*time.Second, "the process CMD started gone", func() bool { return !alive(bg) })
		})
	}
}

// TestLock_Signals: SIGINT and SIGTERM to the command reach CMD, once;
// the command exits with CMD's status, and the lock is free after.
func TestLock_Signals(t *testing.T) {
	t.Parallel()
	script := `trap 'echo INT >> got; exit 5' INT; trap 'echo TERM >> got; exit 6' TERM; echo ready > ready; while :; do sleep 0.1; done`
	for _, tc := range []struct {
		sig  syscall.Signal
		cmd  []string
		code int
		got  string
	}{
		{syscall.SIGINT, []string{"sh", "-c", script}, 5, "INT\n"},
		{syscall.SIGTERM, []string{"sh", "-c", script}, 6, "TERM\n"},
		{syscall.SIGINT, []string{"sh", "-c", "echo ready > ready; exec sleep 60"}, 128 + 2, ""},
		{syscall.SIGTERM, []string{"sh", "-c", "echo ready > ready; exec sleep 60"}, 128 + 15, ""},
	} {
		t.Run(tc.sig.String()+" "+strconv.Itoa(tc.code), func(t *testing.T) {
			t.Parallel()
			v := newEnv(t)
			e := v.engine()
			p := v.start(append([]string{"lock", "cron", "--", "sh", "-c", `cd "$0" && exec "$@"`, v.dir}, tc.cmd...)...)
			waitFor(t, 30*time.Second, "CMD running", func() bool { return exists(v.path("ready")) })
			p.cmd.Process.Signal(tc.sig)
			if code := p.wait(30 * time.Second); code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, p.stderr)
			}
			if b, _ := os.ReadFile(v.path("got")); string(b) != tc.got {
				t.Errorf("CMD got %q, want %q", b, tc.got)
			}
			if info, err := e.LockInfo(context.Background(), "cron"); err != nil || info.Held {
				t.Errorf("after: %+v, %v; want the lock free", info, err)
			}
		})
	}
}

// TestLock_SignalWhileWaiting: a signal ends a wait; CMD never runs, and
// the queue keeps nothing of the command: the lock is free once its
// holder unlocks.
func TestLock_SignalWhileWaiting(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine()
	ctx := context.Background()
	l, err := e.TryLock(ctx, "cron", atomicredis.LockOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	marker := v.path("ran")
	p := v.start("lock", "cron", "--", "touch", marker)
	waitFor(t, 30*time.Second, "the command queued", func() bool {
		info, err := e.LockInfo(ctx, "cron")
		return err == nil && info.Waiting == 1
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 128+15 || exists(marker) {
		t.Errorf("exit %d, CMD ran %v; want %d, CMD not run; stderr:\n%s", code, exists(marker), 128+15, p.stderr)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := e.LockInfo(ctx, "cron"); err != nil || info.Held || info.Waiting != 0 {
		t.Errorf("after the holder unlocked: %+v, %v; want the lock free, nobody waiting", info, err)
	}
}

// TestLock_ChildStatus: CMD's status is the command's; when it is one of
// the command's own codes, stderr says it was CMD's. CMD gets the fence
// and token in its environment.
func TestLock_ChildStatus(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var wg sync.WaitGroup
	for _, tc := range []struct {
		cmd    []string
		code   int
		stderr string
	}{
		{[]string{"sh", "-c", "exit 3"}, 3, ""},
		{[]string{"sh", "-c", "exit 75"}, 75, `CMD exited 75: its own status, not atomicredis's "not acquired"`},
		{[]string{"sh", "-c", "exit 79"}, 79, `CMD exited 79: its own status, not atomicredis's "holding lost"`},
		{[]string{v.path("nosuch")}, exitNotFound, "no such file"},
		{[]string{"nosuch-atomicredis-cmd"}, exitNotFound, "not found"},
		{[]string{v.dir}, exitCannotRun, "permission denied"},
	} {
		p := v.start(append([]string{"lock", "-wait", "1m", "cron", "--"}, tc.cmd...)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, stderr := p.waitBounded(30*time.Second), p.stderr.String()
			if code != tc.code || tc.stderr == "" && stderr != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("%v: exit %d, stderr %q; want %d, %q", tc.cmd, code, stderr, tc.code, tc.stderr)
			}
		}()
	}
	wg.Wait()
	code, out, stderr := v.run(30*time.Second, "lock", "-owner", "me", "cron", "--", "sh", "-c",
		`echo "$ATOMICREDIS_FENCE $ATOMICREDIS_TOKEN"; "$0" info -json -namespace "$1" cron`, tool, v.srv.NS)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var info struct{ Lock lockJSON }
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &info) != nil {
		t.Fatalf("exit %d, stdout %q; stderr:\n%s", code, out, stderr)
	}
	if want := strconv.FormatInt(info.Lock.Fence, 10) + " " + info.Lock.Token; lines[0] != want || info.Lock.Owner != "me" {
		t.Errorf("CMD's environment says %q, info %+v; want the holder's fence and token, %q, owner me", lines[0], info.Lock, want)
	}
}

// TestLock_KilledCommandKillsCMD: when the command is killed (SIGKILL,
// which it cannot catch), CMD is killed too (Linux's parent-death
// signal): nobody would stop it once the lease ran out.
func TestLock_KilledCommandKillsCMD(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("a parent-death signal is Linux's")
	}
	v := newEnv(t)
	p := v.start("lock", "cron", "--", "sh", "-c", "echo $$ > "+v.path("pid")+"; echo > "+v.path("ready")+"; while :; do sleep 0.1; done")
	waitFor(t, 30*time.Second, "CMD running", func() bool { return exists(v.path("ready")) })
	pid := readPID(t, v.path("pid"))
	p.cmd.Process.Kill()
	p.wait(30 * time.Second)
	waitFor(t, 5*time.Second, "CMD gone", func() bool { return !alive(pid) })
}

// TestSemaphore_Limit: semaphore -limit 2 never runs three CMDs at once,
// and runs them all.
func TestSemaphore_Limit(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	file := v.path("stamps")
	const n = 6
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = v.start("semaphore", "-limit", "2", "-wait", "2m", "pool", "--", "sh", "-c", stamps(file, "0.3"))
	}
	for i, p := range procs {
		if code := p.wait(2 * time.Minute); code != 0 {
			t.Errorf("run %d: exit %d; stderr:\n%s", i, code, p.stderr)
		}
	}
	if most, runs := overlaps(t, file); most > 2 || runs != n {
		t.Errorf("%d runs, at most %d at once; want %d runs, at most 2 at once", runs, most, n)
	}
}

// TestElect_Handover: two elect commands in turn: the second leads once
// the first's CMD ended, and leader -watch prints each leader, with the
// term CMD was given; a third that may wait only a while exits 75.
func TestElect_Handover(t *testing.T) {
	v := newEnv(t)
	file := v.path("stamps")
	watch := v.start("leader", "-watch", "-json", "vote")
	// CMD runs until the test creates go-VALUE.
	lead := func(value string) *proc {
		t.Helper()
		return v.start("elect", "-ttl", "3s", "-value", value, "vote", "--", "sh", "-c",
			`cd "$0" || exit 1; echo "$ATOMICREDIS_FENCE" >> terms; echo "start $$" >> stamps; `+
				`while [ ! -e go-$1 ]; do sleep 0.05; done; echo "end $$" >> stamps`, v.dir, value)
	}
	leaders := func() []leaderJSON {
		var got []leaderJSON
		for _, line := range strings.Split(strings.TrimSpace(watch.stdout.String()), "\n") {
			var l leaderJSON
			if json.Unmarshal([]byte(line), &l) != nil || !l.Leader {
				continue
			}
			if n := len(got); n == 0 || got[n-1].Value != l.Value || got[n-1].Term != l.Term {
				got = append(got, l) // a new leader, not the same one read again
			}
		}
		return got
	}
	a := lead("a")
	waitFor(t, 30*time.Second, "a leads", func() bool { return len(leaders()) == 1 })
	marker := v.path("ran")
	if code, _, stderr := v.run(30*time.Second, "elect", "-wait", "300ms", "-value", "c", "vote", "--", "touch", marker); code != exitTempFail || exists(marker) {
		t.Errorf("elect -wait 300ms while a leads: exit %d, CMD ran %v; want %d, CMD not run; stderr:\n%s", code, exists(marker), exitTempFail, stderr)
	}
	b := lead("b")
	time.Sleep(time.Second) // b campaigns, most likely queued by now: either way it leads only after a
	os.WriteFile(v.path("go-a"), nil, 0o644)
	waitFor(t, 30*time.Second, "b leads", func() bool { return len(leaders()) == 2 })
	os.WriteFile(v.path("go-b"), nil, 0o644)
	for name, p := range map[string]*proc{"a": a, "b": b} {
		if code := p.wait(time.Minute); code != 0 {
			t.Errorf("elect %s: exit %d; stderr:\n%s", name, code, p.stderr)
		}
	}
	b2, _ := os.ReadFile(v.path("terms"))
	terms, got := strings.Fields(string(b2)), leaders()
	if len(terms) != 2 || len(got) != 2 || got[0].Value != "a" || got[1].Value != "b" ||
		strconv.FormatInt(got[0].Term, 10) != terms[0] || strconv.FormatInt(got[1].Term, 10) != terms[1] || got[1].Term <= got[0].Term {
		t.Errorf("leader -watch printed %+v, CMDs had terms %v; want a then b, at the terms their CMDs had, growing", got, terms)
	}
	if most, runs := overlaps(t, file); most != 1 || runs != 2 {
		t.Errorf("%d runs, at most %d at once; want 2, one at a time", runs, most)
	}
	if code, out, _ := v.run(30*time.Second, "leader", "vote"); code != exitNoLeader || out != "no leader\n" {
		t.Errorf("leader after both resigned: exit %d, %q; want %d, no leader", code, out, exitNoLeader)
	}
	watch.cmd.Process.Signal(syscall.SIGINT)
	if code := watch.wait(30 * time.Second); code != 128+2 {
		t.Errorf("leader -watch after SIGINT: exit %d, want %d; stderr:\n%s", code, 128+2, watch.stderr)
	}
}

// TestLock_RedisGone: when Redis goes away while CMD runs, the lease
// runs out unextended: CMD gets SIGTERM, the command exits 79 within the
// lease plus the grace, and says why.
func TestLock_RedisGone(t *testing.T) {
	t.Parallel()
	const ttl, grace = 3 * time.Second, 2 * time.Second
	srv := testserver.PrivateRedis(t)
	dir := t.TempDir()
	p := startProc(t, append(os.Environ(), "REDIS_ADDR="+srv.Addr()), "lock", "-ttl", ttl.String(), "-grace", grace.String(), "cron", "--",
		"sh", "-c", `cd "$0" || exit 1; trap 'echo TERM >> got; exit 0' TERM; echo > ready; while :; do sleep 0.1; done`, dir)
	waitFor(t, 30*time.Second, "CMD running", func() bool { return exists(filepath.Join(dir, "ready")) })
	srv.Kill()
	gone := time.Now()
	const margin = 5 * time.Second // a busy machine; the release's and Close's attempts on the dead server
	code := p.wait(ttl + grace + margin + 10*time.Second)
	if took, bound := time.Since(gone), ttl+grace+margin; code != exitLost || took > bound {
		t.Errorf("exit %d %v after Redis went; want %d within %v; stderr:\n%s", code, took, exitLost, bound, p.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "got")); string(b) != "TERM\n" {
		t.Errorf("CMD got %q, want TERM once", b)
	}
	if stderr := p.stderr.String(); !strings.Contains(stderr, "an extension failed") || !strings.Contains(stderr, "was lost while CMD ran") {
		t.Errorf("stderr:\n%s\nwant the failed extensions and the loss told", stderr)
	}
}
