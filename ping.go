package atomicredis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Ping: the options, the server (every primary of a cluster), the scripts
// and the wake channel's rights, checked at startup or in a probe

// Ping checks, once, what New cannot: it returns the error of an option
// New rejected (wrapping ErrInvalid); then, on every primary the pool
// reaches (the one server, or on a cluster, through a connection that
// binds, each primary serving slots, as CLUSTER NODES names them), that the
// server answers PING, that every script of the engine loads (SCRIPT LOAD:
// the user may run them), and that the engine may publish on its wake
// channel (a refused PUBLISH inside a script is ignored by design, so
// without the channel rights waits would only be slow). Call it at startup,
// or in a readiness probe. An error names the node and what failed, and
// wraps the cause. A nil ctx is ErrInvalid.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.usable(); err != nil {
		return err
	}
	if ctx == nil {
		return &Error{Err: fmt.Errorf("ping: nil context: %w", ErrInvalid)}
	}
	nodes, err := e.primaries(ctx)
	if err != nil {
		return &Error{Err: fmt.Errorf("ping: %w", err)}
	}
	for _, n := range nodes {
		if err := e.pingNode(ctx, n); err != nil {
			return &Error{Err: fmt.Errorf("ping %s: %w", n.addr, err)}
		}
	}
	return nil
}

// node is a server Ping checks: its address as CLUSTER NODES gives it
// ("the server" on a pool that does not bind), and a key that binds a
// connection to it ("" on such a pool).
type node struct {
	addr, key string
}

// primaries lists the servers Ping checks. A pool whose connections do not
// bind reaches one server. On one that does (a cluster client), one node's
// CLUSTER NODES (a text reply, the same in RESP2 and RESP3) names every
// primary serving slots, and each gets a key in one of its slots.
func (e *Engine) primaries(ctx context.Context) ([]node, error) {
	single := []node{{addr: "the server"}}
	c, done, err := e.conn(ctx, "", e.callTimeout)
	if err != nil {
		return nil, fmt.Errorf("a connection from the pool: %w", err)
	}
	_, bound := c.Conn.(binder)
	var text string
	if bound {
		text, err = redis.String(c.Do("CLUSTER", "NODES"))
	}
	c.close()
	done()
	switch {
	case !bound:
		return single, nil
	case err != nil && strings.Contains(err.Error(), "cluster support disabled"):
		return single, nil // a binding pool on a server that is no cluster
	case err != nil:
		return nil, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	var nodes []node
	for _, line := range strings.Split(text, "\n") {
		// <id> <ip:port@cport[,hostname]> <flags> <primary id> <ping> <pong> <epoch> <link> <slot or range>...
		f := strings.Fields(line)
		if len(f) < 9 || !servesAsPrimary(strings.Split(f[2], ",")) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being imported or migrated
			}
			from, to, isRange := strings.Cut(r, "-")
			if !isRange {
				to = from
			}
			lo, err1 := strconv.Atoi(from)
			hi, err2 := strconv.Atoi(to)
			if err1 != nil || err2 != nil || lo < 0 || hi >= 16384 || lo > hi {
				return nil, fmt.Errorf("CLUSTER NODES: unexpected slots %q of %s", r, addr)
			}
			nodes = append(nodes, node{addr: addr, key: e.ns + "ping:{" + tagIn(lo, hi) + "}"})
			break
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("CLUSTER NODES: no primary serves a slot")
	}
	return nodes, nil
}

// servesAsPrimary reports whether a node with flags (CLUSTER NODES) is a
// primary the cluster has not given up on (fail; "fail?" is one node's
// suspicion only).
func servesAsPrimary(flags []string) bool {
	return slices.Contains(flags, "master") && !slices.Contains(flags, "fail") &&
		!slices.Contains(flags, "noaddr") && !slices.Contains(flags, "handshake")
}

// pingNode checks one server on a connection of its own: PING, SCRIPT LOAD
// of every script, and a PUBLISH of an empty message on the engine's wake
// channel (its subscription ignores a message it cannot read).
func (e *Engine) pingNode(ctx context.Context, n node) error {
	c, done, err := e.conn(ctx, n.key, e.callTimeout)
	if err != nil {
		return err
	}
	defer done()
	defer c.close()
	if _, err := c.Do("PING"); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	for _, s := range everyScript {
		err := s.script.Load(c)
		if s.script == scriptSuggestOOM && shebangRefused(err) {
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

// tagIn returns a hash tag whose slot is in [from, to].
func tagIn(from, to int) string {
	for i := 0; ; i++ {
		tag := strconv.Itoa(i)
		if s := int(hashSlot(tag)); s >= from && s <= to {
			return tag
		}
	}
}

// hashSlot is the cluster slot of a hash tag: CRC-16/XMODEM (polynomial
// 0x1021) modulo 16384, as Redis Cluster hashes keys.
func hashSlot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for j := 0; j < 8; j++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
