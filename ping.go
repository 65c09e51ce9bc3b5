package atomicredis

import (
	"context"
	"fmt"
)

// ---------------------------------------------------------------------------
// Ping: the options, the server (every primary of a cluster), the scripts
// and the wake channel's rights, checked at startup or in a probe

// Ping checks, once, what New cannot: it returns the error of an option New
// rejected (wrapping ErrInvalid); then, on every primary the pool reaches,
// that the server answers, that every script loads, and that the engine may
// publish on its wake channel (see "Ping" in the package doc). Call it at
// startup, or in a readiness probe. An error names the node and what
// failed, and wraps the cause. A nil ctx is ErrInvalid.
func (e *Engine) Ping(ctx context.Context) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{"", "", "Ping"}, func(ctx context.Context) error { return e.ping(ctx) })
	}
	return e.ping(ctx)
}

// ping is Ping.
func (e *Engine) ping(ctx context.Context) error {
	if err := e.usable(); err != nil {
		return err
	}
	if ctx == nil {
		return &Error{Err: fmt.Errorf("ping: nil context: %w", ErrInvalid)}
	}
	if e.isClosed() {
		return &Error{Err: fmt.Errorf("ping: %w", ErrClosed)}
	}
	l, err := e.learnLayout(ctx)
	if err != nil {
		return &Error{Err: fmt.Errorf("ping: %w", err)}
	}
	nodes := l.nodes
	if l.single {
		nodes = []node{{addr: "the server"}}
	}
	for _, n := range nodes {
		if err := e.pingNode(ctx, n); err != nil {
			return &Error{Err: fmt.Errorf("ping %s: %w", n.addr, err)}
		}
	}
	return nil
}

// pingNode checks one server on a connection of its own: PING, SCRIPT LOAD
// of every script, and a PUBLISH of an empty message on the engine's wake
// channel (its subscription ignores a message it cannot read).
func (e *Engine) pingNode(ctx context.Context, n node) error {
	c, err := e.conn(ctx, n.key, e.callTimeout)
	if err != nil {
		return err
	}
	defer c.close()
	if _, err := c.Do("PING"); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	for _, s := range everyScript {
		err := s.load(c)
		if s == scriptSuggestOOM && shebangRefused(err) {
			e.plainSuggest.Store(true) // Redis < 7: Suggest runs the plain script
			continue
		}
		if err != nil {
			return fmt.Errorf("SCRIPT LOAD %s: %w", s.name, err)
		}
	}
	if _, err := c.Do("PUBLISH", e.wake.channel, ""); err != nil {
		return fmt.Errorf("PUBLISH %s (the wake channel: grant the user &%s*): %w", e.wake.channel, e.wakeArg, err)
	}
	return nil
}

//END
