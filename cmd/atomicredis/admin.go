package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/atomicredis/atomicredis"
)

// admin parses an admin subcommand's arguments (nameArgs: how many, NAME
// and the rest), has check refuse what it cannot mean (check may be nil),
// reaches Redis and runs f with the engine and the arguments.
func (c *cli) admin(ctx context.Context, args []string, nameArgs int, check func([]string) error, f func(context.Context, *atomicredis.Engine, []string) error) int {
	if code, ok := c.parse(args); !ok {
		return code
	}
	rest := c.fs.Args()
	switch {
	case len(rest) == 0:
		return c.fail(usagef("no NAME"))
	case len(rest) != nameArgs:
		return c.fail(usagef("%d arguments after the flags, want %d (flags go before NAME)", len(rest), nameArgs))
	}
	if check != nil {
		if err := check(rest); err != nil {
			return c.fail(err)
		}
	}
	e, closeEngine, err := c.engine(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer closeEngine()
	if err := f(ctx, e, rest); err != nil {
		return c.fail(err)
	}
	return 0
}

func runUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("unlock", "atomicredis unlock -force NAME", stdout, stderr)
	force := c.fs.Bool("force", false, "required: free the lock whoever holds it")
	check := func([]string) error {
		if !*force {
			return usagef("unlock frees a lock whoever holds it: say -force")
		}
		return nil
	}
	return c.admin(ctx, args, 1, check, func(ctx context.Context, e *atomicredis.Engine, args []string) error {
		freed, err := e.ForceUnlock(ctx, args[0])
		switch {
		case err != nil:
			return err
		case freed:
			fmt.Fprintf(c.stdout, "lock %q freed\n", args[0])
		default:
			fmt.Fprintf(c.stdout, "lock %q was free\n", args[0])
		}
		return nil
	})
}

func runLimit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("limit", "atomicredis limit NAME N", stdout, stderr)
	var n int
	check := func(args []string) (err error) {
		if n, err = strconv.Atoi(args[1]); err != nil {
			return usagef("limit %q: not a whole number", args[1])
		}
		return nil
	}
	return c.admin(ctx, args, 2, check, func(ctx context.Context, e *atomicredis.Engine, args []string) error {
		if err := e.SetSemaphoreLimit(ctx, args[0], n); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "semaphore %q: limit %d\n", args[0], n)
		return nil
	})
}

// lockJSON and semaphoreJSON are info's -json output; leaderJSON is
// leader's. Leases are in ms.
type lockJSON struct {
	Held    bool   `json:"held"`
	Owner   string `json:"owner"`
	Fence   int64  `json:"fence"`
	Token   string `json:"token"`
	TTLms   int64  `json:"ttl_ms"`
	Waiting int    `json:"waiting"`
}

type semaphoreJSON struct {
	Limit   int          `json:"limit"`
	Holders int          `json:"holders"`
	Held    int          `json:"held"`
	Waiting int          `json:"waiting"`
	Permits []permitJSON `json:"permits"`
}

type permitJSON struct {
	Owner  string `json:"owner"`
	Fence  int64  `json:"fence"`
	Token  string `json:"token"`
	TTLms  int64  `json:"ttl_ms"`
	Weight int    `json:"weight"`
}

type leaderJSON struct {
	Leader bool   `json:"leader"`
	Value  string `json:"value"`
	Term   int64  `json:"term"`
	TTLms  int64  `json:"ttl_ms"`
}

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("info", "atomicredis info [-json] NAME", stdout, stderr)
	asJSON := c.fs.Bool("json", false, "print JSON: {\"name\", \"lock\", \"semaphore\"}, leases in ms")
	return c.admin(ctx, args, 1, nil, func(ctx context.Context, e *atomicredis.Engine, args []string) error {
		name := args[0]
		li, err := e.LockInfo(ctx, name)
		if err != nil {
			return err
		}
		si, err := e.SemaphoreInfo(ctx, name)
		if err != nil {
			return err
		}
		if *asJSON {
			return printInfoJSON(c.stdout, name, li, si)
		}
		printInfo(c.stdout, name, li, si)
		return nil
	})
}

func printInfo(w io.Writer, name string, li atomicredis.LockInfo, si atomicredis.SemaphoreInfo) {
	if li.Held {
		fmt.Fprintf(w, "lock %q: held by %q, fence %d, lease %v left, %d waiting, token %s\n",
			name, li.Owner, li.Fence, ms(li.TTL), li.Waiting, li.Token)
	} else {
		fmt.Fprintf(w, "lock %q: free, %d waiting\n", name, li.Waiting)
	}
	limit := "no limit stored"
	if si.Limit > 0 {
		limit = "limit " + strconv.Itoa(si.Limit)
	}
	fmt.Fprintf(w, "semaphore %q: %s, %d permit(s) holding %d, %d waiting\n", name, limit, si.Holders, si.Held, si.Waiting)
	for _, p := range si.Permits {
		fmt.Fprintf(w, "  permit held by %q, weight %d, fence %d, lease %v left, token %s\n", p.Owner, p.Weight, p.Fence, ms(p.TTL), p.Token)
	}
}

func printInfoJSON(w io.Writer, name string, li atomicredis.LockInfo, si atomicredis.SemaphoreInfo) error {
	out := struct {
		Name      string        `json:"name"`
		Lock      lockJSON      `json:"lock"`
		Semaphore semaphoreJSON `json:"semaphore"`
	}{Name: name,
		Lock: lockJSON{Held: li.Held, Owner: li.Owner, Fence: li.Fence, Token: li.Token, TTLms: li.TTL.Milliseconds(), Waiting: li.Waiting},
		Semaphore: semaphoreJSON{Limit: si.Limit, Holders: si.Holders, Held: si.Held, Waiting: si.Waiting,
			Permits: make([]permitJSON, 0, len(si.Permits))},
	}
	for _, p := range si.Permits {
		out.Semaphore.Permits = append(out.Semaphore.Permits,
			permitJSON{Owner: p.Owner, Fence: p.Fence, Token: p.Token, TTLms: p.TTL.Milliseconds(), Weight: p.Weight})
	}
	return json.NewEncoder(w).Encode(out)
}

func runLeader(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI("leader", "atomicredis leader [-watch] [-json] NAME", stdout, stderr)
	asJSON := c.fs.Bool("json", false, "print JSON lines: {\"leader\", \"value\", \"term\", \"ttl_ms\"}")
	watch := c.fs.Bool("watch", false, "print every change of leader or value, until a signal ends it (exit 128+n)")
	code := 0
	if ran := c.admin(ctx, args, 1, nil, func(ctx context.Context, e *atomicredis.Engine, args []string) error {
		el := e.Election(args[0], atomicredis.ElectionOptions{})
		if *watch {
			var err error
			code, err = c.watchLeader(ctx, e, el, args[0], *asJSON)
			return err
		}
		l, err := el.Leader(ctx)
		if err != nil && !errors.Is(err, atomicredis.ErrNoLeader) {
			return err
		}
		if err != nil {
			code = exitNoLeader
		}
		return printLeader(c.stdout, l, *asJSON)
	}); ran != 0 {
		return ran
	}
	return code
}

// watchLeader prints the election's state, then every change, until a
// signal comes (code 128+n). The channel closing otherwise (the engine
// closed) is an error.
func (c *cli) watchLeader(ctx context.Context, e *atomicredis.Engine, el *atomicredis.Election, name string, asJSON bool) (int, error) {
	if _, err := e.HashTag(name); err != nil { // Observe closes its channel on a bad name, saying nothing
		return 0, err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := el.Observe(ctx)
	for {
		select {
		case s := <-sigs:
			cancel()
			for range ch { // Observe's goroutine ends with ctx and closes ch
			}
			return signalStatus(s), nil
		case l, ok := <-ch:
			if !ok {
				return 0, fmt.Errorf("atomicredis: election %q: the watch ended", name)
			}
			if err := printLeader(c.stdout, l, asJSON); err != nil {
				return 0, err
			}
		}
	}
}

// printLeader prints one state of an election: a line of "VALUE TERM
// LEASE", tab-separated, or "no leader"; or a JSON line.
func printLeader(w io.Writer, l atomicredis.Leader, asJSON bool) error {
	leads := l != (atomicredis.Leader{})
	if asJSON {
		return json.NewEncoder(w).Encode(leaderJSON{Leader: leads, Value: l.Value, Term: l.Term, TTLms: l.TTL.Milliseconds()})
	}
	var err error
	if leads {
		_, err = fmt.Fprintf(w, "%s\t%d\t%v\n", l.Value, l.Term, ms(l.TTL))
	} else {
		_, err = fmt.Fprintln(w, "no leader")
	}
	return err
}

// ms is d rounded to the millisecond, for printing.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
