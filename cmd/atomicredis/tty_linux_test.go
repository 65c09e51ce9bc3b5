package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal: its controlling side and the terminal.
func openPTY(t *testing.T) (control, term *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { control.Close() })
	var unlock int32
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, control.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Skipf("unlocking the pseudo-terminal: %v", errno)
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, control.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Skipf("the pseudo-terminal's number: %v", errno)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { term.Close() })
	return control, term
}

// TestLock_Terminal: at a terminal, CMD reads it (its process group is
// given the terminal), Ctrl-C reaches CMD once, and the shell that ran
// the command has the terminal back once it ended.
func TestLock_Terminal(t *testing.T) {
	v := newEnv(t)
	control, term := openPTY(t)
	cmdScript := `read line; echo "$line" > in; trap 'echo INT >> got; exit 5' INT; echo ready > ready; while :; do sleep 0.1; done`
	shell := exec.Command("sh", "-c", `"$0" lock -namespace "$1" cron -- sh -c "$2"; echo $? > status; read after; echo "$after" > after`,
		tool, v.srv.NS, cmdScript)
	shell.Dir = v.dir
	shell.Env = append(os.Environ(), "REDIS_ADDR="+v.srv.Addr)
	shell.Stdin, shell.Stdout, shell.Stderr = term, term, term
	// A session of its own whose controlling terminal is term: the shell's
	// process group is the terminal's foreground group, as at a login.
	shell.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		shell.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-shell.Process.Pid, syscall.SIGKILL)
		<-done
	})
	go func() { // what the terminal shows: read, so that it never fills
		b := make([]byte, 4096)
		for {
			if _, err := control.Read(b); err != nil {
				return
			}
		}
	}()
	control.WriteString("one\n")
	waitFor(t, 30*time.Second, "CMD read the terminal", func() bool { return exists(v.path("ready")) })
	control.WriteString("\x03") // Ctrl-C
	waitFor(t, 30*time.Second, "the command ended", func() bool { return exists(v.path("status")) })
	control.WriteString("two\n")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the shell did not read the terminal after the command")
	}
	for file, want := range map[string]string{"in": "one\n", "got": "INT\n", "status": "5\n", "after": "two\n"} {
		if b, _ := os.ReadFile(v.path(file)); string(b) != want {
			t.Errorf("%s: %q, want %q", file, b, want)
		}
	}
}
