package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress: a run of the main job takes minutes, and `go test -bench`
// prints a benchmark's lines only when it ends. So every round of every
// experiment prints a line of its own straight to stdout, and a ticker
// says what is running whenever nothing was printed for Quiet. A progress
// line starts with "·": never with "Benchmark", which is what a reader of
// `go test -bench` output (report_test.go's parseBench) takes for a
// result.

// Quiet is the longest the main job stays silent: past it the ticker
// prints what is running.
const Quiet = 20 * time.Second

var progress = struct {
	sync.Mutex
	w       io.Writer
	started time.Time // the process's start, near enough: the clock of every line
	last    time.Time // the last line printed
	doing   string    // what runs now, for the ticker; "" between benchmarks
	since   time.Time // when doing began
	ticking bool
	done    chan struct{}
}{w: os.Stdout, started: time.Now(), last: time.Now()}

// Progressf prints a line of progress, "· 2m13s " and the message, and
// restarts the ticker's count of silence.
func Progressf(format string, args ...any) {
	progress.Lock()
	defer progress.Unlock()
	progressLine(fmt.Sprintf(format, args...))
}

// progressLine prints msg as a line of progress; progress is locked.
func progressLine(msg string) {
	now := time.Now()
	fmt.Fprintf(progress.w, "· %s %s\n", clock(now.Sub(progress.started)), msg)
	progress.last = now
}

// clock prints an elapsed time as 1h02m03s, 2m03s or 3s.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}

// Doing says what runs now, for the ticker (and starts it, once): a
// benchmark's setup, a round, a long seed. "" says nothing runs.
func Doing(format string, args ...any) {
	progress.Lock()
	defer progress.Unlock()
	progress.doing, progress.since = fmt.Sprintf(format, args...), time.Now()
	if !progress.ticking && progress.done == nil {
		progress.ticking, progress.done = true, make(chan struct{})
		go tick(progress.done, time.Second)
	}
}

// tick prints what runs whenever nothing was printed for Quiet, checking
// every period, until done closes.
func tick(done chan struct{}, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			progress.Lock()
			stillRunning(now)
			progress.Unlock()
		}
	}
}

// stillRunning prints what runs if nothing was printed for Quiet before
// now; progress is locked.
func stillRunning(now time.Time) {
	if progress.doing != "" && now.Sub(progress.last) >= Quiet {
		progressLine(fmt.Sprintf("still running: %s (%s so far)", progress.doing, clock(now.Sub(progress.since))))
	}
}

// StopProgress stops the ticker (before the verdict table: it would
// print inside it).
func StopProgress() {
	progress.Lock()
	defer progress.Unlock()
	if progress.ticking {
		close(progress.done)
		progress.ticking = false
	}
	progress.doing = ""
}

// quietly runs f with the ticker held back: Go prints a sub-benchmark's
// name and, after it ran, its figures on one line, which a line of
// progress must not split.
func quietly(f func()) {
	progress.Lock()
	defer progress.Unlock()
	f()
}

// topLevel is the top-level benchmark of a (sub-)benchmark's name.
func topLevel(name string) string {
	top, _, _ := strings.Cut(name, "/")
	return top
}
