package bench

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// withProgress sends progress lines to a buffer for the test's length.
func withProgress(t *testing.T) *strings.Builder {
	var out strings.Builder
	progress.Lock()
	w, doing, last, since := progress.w, progress.doing, progress.last, progress.since
	progress.w, progress.doing, progress.last = &out, "", time.Now()
	progress.Unlock()
	t.Cleanup(func() {
		progress.Lock()
		progress.w, progress.doing, progress.last, progress.since = w, doing, last, since
		progress.Unlock()
	})
	return &out
}

// resultLine is report_test.go's benchLine: what a reader of `go test
// -bench` output takes for a result. A progress line must not look like
// one.
var resultLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// A line of progress says what runs and since when, and is never taken
// for a benchmark's result; the ticker speaks only after Quiet of silence,
// and only while something runs.
func TestProgressLines(t *testing.T) {
	out := withProgress(t)
	Progressf("%s round %d/%d", "BenchmarkRenew", 2, 3)
	progress.Lock()
	progress.doing, progress.since = "BenchmarkRenew round 2/3, per-holding", time.Now().Add(-40*time.Second)
	last := progress.last
	stillRunning(last.Add(Quiet - time.Second)) // not yet quiet for long enough
	stillRunning(last.Add(Quiet))
	progress.doing = ""
	stillRunning(progress.last.Add(2 * Quiet)) // nothing runs: nothing to say
	progress.Unlock()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (a round, then one tick):\n%s", len(lines), out)
	}
	if !regexp.MustCompile(`^· \d+(m\d\ds)?s? BenchmarkRenew round 2/3$`).MatchString(lines[0]) {
		t.Errorf("round line %q", lines[0])
	}
	if !strings.Contains(lines[1], "still running: BenchmarkRenew round 2/3, per-holding (1m00s so far)") {
		t.Errorf("tick line %q", lines[1])
	}
	for _, l := range lines {
		if resultLine.MatchString(l) {
			t.Errorf("%q reads as a benchmark's result", l)
		}
	}
	for d, want := range map[time.Duration]string{3 * time.Second: "3s", 125 * time.Second: "2m05s", 3725 * time.Second: "1h02m05s"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}

// The machine's trouble is told from the library's: a refusing server, a
// dropped connection, a call out of time; a wrong reply is no trouble.
func TestTrouble(t *testing.T) {
	for err, want := range map[error]string{
		redis.Error("ERR max number of clients reached"):                                                    "maxclients",
		fmt.Errorf("atomicredis: lock \"renew1780\": %w", redis.Error("ERR max number of clients reached")): "maxclients",
		fmt.Errorf("dial: %w", syscall.ECONNREFUSED):                                                        "connection",
		redis.ErrPoolExhausted:                                                 "pool",
		fmt.Errorf("unlock: %w", errContextDeadline()):                         "out of time",
		redis.Error("OOM command not allowed when used memory > 'maxmemory'."): "memory",
	} {
		if got := Trouble(err); !strings.Contains(got, want) {
			t.Errorf("Trouble(%v) = %q, want it to say %q", err, got, want)
		}
	}
	for _, err := range []error{nil, errors.New("v4 counts 3, v3 4"), redis.Error("WRONGTYPE Operation against a key holding the wrong kind of value")} {
		if got := Trouble(err); got != "" {
			t.Errorf("Trouble(%v) = %q, want none: the library's error fails the run", err, got)
		}
	}
}

func errContextDeadline() error {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	return ctx.Err()
}
