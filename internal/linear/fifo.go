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
	Arrival     int64     // the arrival number the server gave its queue entry; 0 if it never queued
}

// FIFO says how each grant that broke arrival order did, a line each. Two
// orders are held:
//
//   - the server's, between waiters: a waiter granted before one whose
//     entry the server numbered earlier (a handoff past the head). The
//     numbers grow across a name's whole history on a server whose clock
//     moves between scripts (lib/queue.lua's q_join), so any two entries
//     of a name compare (not miniredis's: leave Arrival 0 there);
//   - the clients' clock, for a call that never queued (or whose number
//     is unknown): one that began after a waiter was told it was queued,
//     and was granted before it (a jump of the queue).
//
// The waiters' queue entries must outlast the run, so that no waiter
// leaves the queue but by its grant.
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
			if a.Joined.IsZero() && a.Arrival == 0 {
				continue
			}
			for _, b := range gs {
				if b.Fence >= a.Fence {
					continue
				}
				switch {
				case a.Arrival > 0 && b.Arrival > 0: // both queued: the server's order
					if b.Arrival > a.Arrival {
						out = append(out, fmt.Sprintf("%s: %s arrived after %s (the server's numbers %d, %d), and was granted fence %d before its %d", n, b.Token, a.Token, b.Arrival, a.Arrival, b.Fence, a.Fence))
					}
				case !a.Joined.IsZero() && b.Began.After(a.Joined):
					out = append(out, fmt.Sprintf("%s: %s began %v after %s was told it was queued, and was granted fence %d before its %d", n, b.Token, b.Began.Sub(a.Joined), a.Token, b.Fence, a.Fence))
				}
			}
		}
	}
	return out
}
