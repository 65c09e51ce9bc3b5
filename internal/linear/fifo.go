package linear

import (
	"fmt"
	"sort"
	"time"
)

// Grant is a grant as FIFO judges it: of a lock or a semaphore's permit,
// whose fences give the order of its grants (a semaphore's waiters too are
// admitted strictly in arrival order, whatever their weights).
type Grant struct {
	Name, Token string
	Fence       int64
	Began       time.Time // when its call began
	Joined      time.Time // when its caller was told it was queued; zero if never
}

// FIFO says how each grant that broke arrival order did, a line each: a
// call that began after a waiter was told it was queued, and was granted
// before it (a handoff past the head of the queue, or a jump of it). The
// waiters' queue entries must outlast the run, so that no waiter leaves the
// queue but by its grant.
//
// The order is the clients' clock's, not the server's arrival numbers: a
// queue that empties and fills again within one millisecond of the
// server's clock gives the new entry the number an earlier one had
// (lib/queue.lua's q_join), so the numbers order only entries that were
// queued together, which the history cannot tell.
func FIFO(grants []Grant) []string {
	byName := map[string][]Grant{}
	for _, g := range grants {
		byName[g.Name] = append(byName[g.Name], g)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		gs := byName[n]
		for _, a := range gs { // a: a waiter queued ahead
			if a.Joined.IsZero() {
				continue
			}
			for _, b := range gs {
				if b.Fence < a.Fence && b.Began.After(a.Joined) {
					out = append(out, fmt.Sprintf("%s: %s began %v after %s was told it was queued, and was granted fence %d before its %d", n, b.Token, b.Began.Sub(a.Joined), a.Token, b.Fence, a.Fence))
				}
			}
		}
	}
	return out
}
