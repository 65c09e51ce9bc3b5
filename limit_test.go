package atomicredis

// A semaphore's stored limit that differs from the caller's Limit is
// reported: the stored one rules, and a deploy that changed Limit must
// see why it has no effect.

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/atomicredis/atomicredis/internal/testserver"
)

// syncBuffer is a bytes.Buffer safe for a logger on several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// An acquisition whose Limit differs from the stored limit reports it once
// per (engine, name, stored limit), granted or refused: an
// EventLimitDiffers whose Err names both limits, and a WARN log line.
// Agreeing limits and Limit 0 report nothing.
func TestStoredLimitDiffersIsReported(t *testing.T) {
	servers(t, func(t *testing.T, s *testserver.Server) {
		ctx := ctxT(t)
		rec := &recorder{}
		var logs syncBuffer
		e := engine(s, WithObserver(rec.observe), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		differs := func() []string {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var out []string
			for _, ev := range rec.events {
				if ev.Type == EventLimitDiffers {
					var ae *Error
					if !errors.As(ev.Err, &ae) || ev.Object != "semaphore" || ev.Name != ae.Name {
						t.Errorf("event %+v: want Object semaphore and an *Error naming it", ev)
					}
					out = append(out, ev.Name+": "+ae.Err.Error())
				}
			}
			return out
		}
		try := func(name string, limit int) error {
			_, err := e.TryAcquireSemaphore(ctx, name, SemaphoreOptions{Limit: limit})
			return err
		}
		if err := try("s", 2); err != nil { // stores 2
			t.Fatal(err)
		}
		if err := try("s", 2); err != nil {
			t.Fatal(err)
		}
		if got := differs(); len(got) != 0 {
			t.Fatalf("agreeing limits reported: %q", got)
		}
		// A deploy asks 3: refused (the stored 2 are held), reported once.
		for i := 0; i < 3; i++ {
			if err := try("s", 3); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("Limit 3 over a stored 2, both held: %v, want ErrNotAcquired", err)
			}
		}
		if err := try("s", 0); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("Limit 0: %v", err)
		}
		// The administrator raises it to 5: Limit 3 is granted under the
		// stored 5, and that is a new value to report, once.
		if err := e.SetSemaphoreLimit(ctx, "s", 5); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := try("s", 3); err != nil {
				t.Fatalf("Limit 3 under a stored 5: %v", err)
			}
		}
		if err := try("s", 5); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"s: stored limit 2 rules, not Limit 3 (SetSemaphoreLimit changes it)",
			"s: stored limit 5 rules, not Limit 3 (SetSemaphoreLimit changes it)",
		}
		if got := differs(); !slices.Equal(got, want) {
			t.Errorf("reported:\n%q\nwant\n%q", got, want)
		}
		if n := strings.Count(logs.String(), `level=WARN msg="atomicredis: limit differs" object=semaphore name=s`); n != 2 {
			t.Errorf("%d WARN lines, want 2:\n%s", n, logs.String())
		}
		// Another engine has its own memory: it reports the same again.
		other := engine(s, WithObserver(rec.observe))
		if _, err := other.TryAcquireSemaphore(ctx, "s", SemaphoreOptions{Limit: 3}); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("a fifth permit under 5: %v", err)
		}
		if got := differs(); len(got) != 3 || got[2] != want[1] {
			t.Errorf("the other engine: reported %q", got)
		}
	})
}

// An engine remembers at most limitsRemembered reported (name, limit)
// pairs; past that, one is forgotten for each new one.
func TestStoredLimitMemoryIsBounded(t *testing.T) {
	s := testserver.Mini(t)
	n := 0
	e := New(s.Pool, WithObserver(func(ev Event) { n++ }))
	obj, err := e.object(kindSem, "s")
	if err != nil {
		t.Fatal(err)
	}
	for i := range limitsRemembered + 500 {
		e.limitDiffers(obj, int64(i+2), 1)
	}
	e.limitDiffers(obj, limitsRemembered+500+2, 1) // the last one: remembered
	e.limitDiffers(obj, limitsRemembered+500+2, 1)
	if len(e.limits) != limitsRemembered || n != limitsRemembered+501 {
		t.Errorf("%d remembered, %d reported; want %d and %d", len(e.limits), n, limitsRemembered, limitsRemembered+501)
	}
	if got := fmt.Sprint(EventLimitDiffers); got != "limit differs" {
		t.Errorf("EventLimitDiffers prints %q", got)
	}
}
