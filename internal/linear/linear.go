// Package linear records histories of calls to atomicredis and checks them
// linearizable with porcupine against models of its objects: an exclusive
// lock with fences, a read-write lock, a weighted semaphore whose limit
// changes, LockAll over a group of names, and an election; and the lock,
// semaphore and election again across a failover to a replica that may
// have missed the last writes (failover.go). Only tests import it.
//
// A history is recorded by a Recorder, one monotonic clock for every
// goroutine. Each model is partitioned by name (a group of names for
// LockAll), so that each partition is small enough to check: porcupine's
// cost grows fast with the operations and open calls of one partition.
//
// A call's answer is Ok (it took effect), No (the server refused it: no
// effect) or Unknown (no answer it can trust: either). An acquisition that
// failed without an answer is recorded as an Unknown acquisition and the
// library's abandon of it (which releases whatever it took); one whose
// effect may still land after the call returned (the abandon went on in
// the background, or a release's reply was lost) is open: its return is
// placed after every other event.
package linear

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is what a call's answer says it did.
type Result int8

const (
	Ok      Result = iota // it took effect
	No                    // the server refused it: nothing changed
	Unknown               // no answer to trust: it may have taken effect or not
)

func (r Result) String() string {
	switch r {
	case Ok:
		return "ok"
	case No:
		return "no"
	}
	return "?"
}

// Input is a model's input: the name of the partition it belongs to, ""
// for an event every partition sees (a restart), and what it does.
type Input interface {
	part() string
	op() Op
}

// Recorder records calls of many goroutines as porcupine operations, by one
// monotonic clock.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	open  []int // indexes into ops of open calls
}

// NewRecorder starts a recorder's clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Call is one call under way: when it began, and who made it.
type Call struct {
	r      *Recorder
	client int
	at     int64
}

// Begin notes that client makes a call, now.
func (r *Recorder) Begin(client int) Call {
	return Call{r: r, client: client, at: r.now()}
}

// now is the time since the recorder started, by the monotonic clock
// (time.Since reads it).
func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// End records the call, in, and its answer, out, now. The input comes
// with the answer: a token is known only once a grant names it.
func (c Call) End(in Input, out any) { c.r.add(c, in, out, c.r.now(), false) }

// Open records a call whose effect may land at any time after it began,
// after it returned too: its return is placed after every other event.
func (c Call) Open(in Input, out any) { c.r.add(c, in, out, 0, true) }

func (r *Recorder) add(c Call, in Input, out any, ret int64, open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if open {
		r.open = append(r.open, len(r.ops))
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: c.client, Input: in, Call: c.at, Output: out, Return: ret})
}

// Len is how many calls were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Operations is the history so far, open calls returning after every
// other event.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := append([]porcupine.Operation(nil), r.ops...)
	end := r.now()
	for _, op := range ops {
		end = max(end, op.Return)
	}
	for _, i := range r.open {
		ops[i].Return = end + 1
	}
	return ops
}

// Opened is how many open calls the history holds.
func (r *Recorder) Opened() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

// partition groups ops by their input's part; an op of part "" (a
// restart) goes into every group.
func partition(ops []porcupine.Operation) [][]porcupine.Operation {
	byPart := map[string][]porcupine.Operation{}
	var all []porcupine.Operation
	for _, op := range ops {
		p := op.Input.(Input).part()
		if p == "" {
			all = append(all, op)
			continue
		}
		byPart[p] = append(byPart[p], op)
	}
	parts := make([]string, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	out := make([][]porcupine.Operation, 0, len(parts))
	for _, p := range parts {
		out = append(out, append(byPart[p], all...))
	}
	return out
}

// Verdict is porcupine's verdict on ops under m, within timeout.
func Verdict(m porcupine.Model, ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(m, ops, timeout)
}

// Check fails t unless ops are linearizable under m, decided within
// timeout (an Unknown verdict fails too), and logs what it checked and how
// long that took. On a failure it writes porcupine's visualization to a
// file and logs its path, and the smallest failing partition's operations.
func Check(t testing.TB, what string, m porcupine.Model, ops []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	parts := m.Partition(ops)
	largest := 0
	for _, p := range parts {
		largest = max(largest, len(p))
	}
	start := time.Now()
	res, info := Verdict(m, ops, timeout)
	took := time.Since(start)
	t.Logf("%s: %d operations in %d partitions (the largest %d): %s, checked in %v", what, len(ops), len(parts), largest, res, took.Round(time.Millisecond))
	if res == porcupine.Ok {
		return
	}
	if res == porcupine.Unknown {
		t.Errorf("%s: the checker did not decide within %v: Unknown fails", what, timeout)
		if p := undecided(m, parts, timeout/10); p != nil {
			t.Logf("a partition the checker does not decide alone within %v, %d operations:\n%s", timeout/10, len(p), Describe(m, p))
		}
		return
	}
	t.Errorf("%s: the history is not linearizable", what)
	if path, err := visualize(m, info, what); err != nil {
		t.Logf("writing the visualization: %v", err)
	} else {
		t.Logf("porcupine's visualization: %s", path)
	}
	if p := smallestIllegal(m, parts, timeout); p != nil {
		t.Logf("the smallest failing partition, %d operations:\n%s", len(p), Describe(m, p))
	}
}

// visualize writes info's visualization to a file of its own in
// os.TempDir (a test's TempDir goes with the test) and returns its path.
func visualize(m porcupine.Model, info porcupine.LinearizationInfo, what string) (string, error) {
	f, err := os.CreateTemp("", "linear-"+strings.NewReplacer("/", "-", " ", "-").Replace(what)+"-*.html")
	if err != nil {
		return "", err
	}
	f.Close()
	path, _ := filepath.Abs(f.Name())
	return path, porcupine.VisualizePath(m, info, path)
}

// smallestIllegal is the smallest of parts the checker finds illegal alone.
func smallestIllegal(m porcupine.Model, parts [][]porcupine.Operation, timeout time.Duration) []porcupine.Operation {
	one := m
	one.Partition = nil
	var best []porcupine.Operation
	for _, p := range parts {
		if best != nil && len(p) >= len(best) {
			continue
		}
		if res, _ := Verdict(one, p, timeout); res == porcupine.Illegal {
			best = p
		}
	}
	return best
}

// undecided is the first of parts, largest first, the checker does not
// decide alone within timeout.
func undecided(m porcupine.Model, parts [][]porcupine.Operation, timeout time.Duration) []porcupine.Operation {
	one := m
	one.Partition = nil
	parts = append([][]porcupine.Operation(nil), parts...)
	sort.SliceStable(parts, func(i, j int) bool { return len(parts[i]) > len(parts[j]) })
	for _, p := range parts {
		if res, _ := Verdict(one, p, timeout); res == porcupine.Unknown {
			return p
		}
	}
	return nil
}

// Describe lists ops by call time, one a line, with their times in
// microseconds since the recorder began (an open call returns last).
func Describe(m porcupine.Model, ops []porcupine.Operation) string {
	ops = append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "  client %d [%d, %d] %s\n", op.ClientId, op.Call/1e3, op.Return/1e3, m.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// nondeterministic makes a porcupine model from a step that returns every
// state a call may leave (none: the call could not have answered so).
func nondeterministic[S comparable, I Input, O any](init S, step func(S, I, O) []S, describe func(I, O) string) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{init} },
		Step: func(state, in, out any) []any {
			next := step(state.(S), in.(I), out.(O))
			res := make([]any, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		DescribeOperation: func(in, out any) string { return describe(in.(I), out.(O)) },
		DescribeState:     func(s any) string { return fmt.Sprintf("%+v", s) },
	}
	return nm.ToModel()
}

// Unknowns counts the calls in ops that got no answer to trust: not an
// Unknown acquisition recorded beside its own call's grant (a read-write
// lock's, which an earlier attempt of the call may have made).
func Unknowns(ops []porcupine.Operation) int {
	type key struct {
		client int
		call   int64
	}
	granted := map[key]bool{}
	for _, op := range ops {
		if out, ok := op.Output.(LockOut); ok && out.Result == Ok {
			granted[key{op.ClientId, op.Call}] = true
		}
	}
	n := 0
	for _, op := range ops {
		if _, lock := op.Output.(LockOut); lock && granted[key{op.ClientId, op.Call}] {
			continue // an RW grant's Unknown twin: its call was answered
		}
		if resultOf(op.Output) == Unknown {
			n++
		}
	}
	return n
}

// MostOpen is the most open calls (those Operations places after every
// other event, opened of them) that one of m's partitions of ops holds:
// the checker's cost grows fast with them.
func MostOpen(m porcupine.Model, ops []porcupine.Operation, opened int) int {
	if opened == 0 {
		return 0 // the calls that returned last are not open ones
	}
	last := int64(0)
	for _, op := range ops {
		last = max(last, op.Return)
	}
	most := 0
	for _, p := range m.Partition(ops) {
		k := 0
		for _, op := range p {
			if op.Return == last {
				k++
			}
		}
		most = max(most, k)
	}
	return most
}

// Named is the operations of ops in partition name (a name, or a LockAll
// group), restarts included.
func Named(ops []porcupine.Operation, name string) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		if p := op.Input.(Input).part(); p == name || p == "" {
			out = append(out, op)
		}
	}
	return out
}
