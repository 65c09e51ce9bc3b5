package atomicredis

import (
	"context"
	"fmt"
	"net"
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
// binds, each primary serving slots, as CLUSTER SLOTS names them), that the
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

// node is a server Ping checks: its address as CLUSTER SLOTS gives it
// ("the server" on a pool that does not bind), and a key that binds a
// connection to it ("" on such a pool).
type node struct {
	addr, key string
}

// primaries lists the servers Ping checks. A pool whose connections do not
// bind reaches one server. On one that does (a cluster client), one node's
// CLUSTER SLOTS names every primary serving slots, and each gets a key in
// one of its slots.
func (e *Engine) primaries(ctx context.Context) ([]node, error) {
	single := []node{{addr: "the server"}}
	c, done, err := e.conn(ctx, "", e.callTimeout)
	if err != nil {
		return nil, fmt.Errorf("a connection from the pool: %w", err)
	}
	_, bound := c.Conn.(binder)
	var ranges []any
	if bound {
		ranges, err = redis.Values(c.Do("CLUSTER", "SLOTS"))
	}
	c.close()
	done()
	switch {
	case !bound:
		return single, nil
	case err != nil && strings.Contains(err.Error(), "cluster support disabled"):
		return single, nil // a binding pool on a server that is no cluster
	case err != nil:
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	var nodes []node
	seen := map[string]bool{}
	for _, r := range ranges {
		v, _ := redis.Values(r, nil)
		if len(v) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected range %v", r)
		}
		from, err1 := redis.Int(v[0], nil)
		to, err2 := redis.Int(v[1], nil)
		primary, _ := redis.Values(v[2], nil)
		if err1 != nil || err2 != nil || len(primary) < 2 || from < 0 || to >= 16384 || from > to {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected range %v", r)
		}
		host, _ := redis.String(primary[0], nil)
		port, _ := redis.Int(primary[1], nil)
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		if !seen[addr] {
			seen[addr] = true
			nodes = append(nodes, node{addr: addr, key: e.ns + "ping:{" + tagIn(from, to) + "}"})
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("CLUSTER SLOTS: no primary serves a slot")
	}
	return nodes, nil
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
