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
// The cluster's layout: which primaries serve slots, each with a key that
// binds a connection to it, and which one serves each slot (Ping checks
// every primary; the renewer pipelines to each)

// node is a primary: its address as CLUSTER NODES gives it ("the server"
// on a pool that does not bind), and a key that binds a connection to it
// ("" on such a pool).
type node struct {
	addr, key string
}

// layout is how the engine reaches the server: one server that is no
// cluster, or a cluster's primaries and which serves each slot.
type layout struct {
	single bool
	nodes  []node
	slots  [16384]int16 // index in nodes; -1 if no primary serves it
}

// learnLayout learns the layout. A pool whose connections do not bind
// reaches one server; on one that does (a cluster client), one node's
// CLUSTER NODES (a text reply, the same in RESP2 and RESP3) says which
// primary serves which slot, unless the server is no cluster.
func (e *Engine) learnLayout(ctx context.Context) (*layout, error) {
	c, err := e.conn(ctx, "", e.callTimeout)
	if err != nil {
		return nil, fmt.Errorf("a connection from the pool: %w", err)
	}
	_, bound := c.Conn.(binder)
	var text string
	if bound {
		text, err = redis.String(c.Do("CLUSTER", "NODES"))
	}
	c.close()
	l := &layout{}
	switch {
	case !bound:
		l.single = true
	case err != nil && strings.Contains(err.Error(), "cluster support disabled"):
		l.single = true // a binding pool on a server that is no cluster
	case err != nil:
		return nil, fmt.Errorf("CLUSTER NODES: %w", err)
	default:
		if err := l.parse(e.ns, text); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// parse reads CLUSTER NODES: the primaries serving slots, and their slots.
// Each primary's key (in namespace ns) lies in its first range.
func (l *layout) parse(ns, text string) error {
	for i := range l.slots {
		l.slots[i] = -1
	}
	for _, line := range strings.Split(text, "\n") {
		// <id> <ip:port@cport[,hostname]> <flags> <primary id> <ping> <pong> <epoch> <link> <slot or range>...
		f := strings.Fields(line)
		if len(f) < 9 || !servesAsPrimary(strings.Split(f[2], ",")) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		at := int16(len(l.nodes))
		for _, rng := range f[8:] {
			if strings.HasPrefix(rng, "[") {
				continue // a slot being imported or migrated
			}
			from, to, isRange := strings.Cut(rng, "-")
			if !isRange {
				to = from
			}
			lo, err1 := strconv.Atoi(from)
			hi, err2 := strconv.Atoi(to)
			if err1 != nil || err2 != nil || lo < 0 || hi >= len(l.slots) || lo > hi {
				return fmt.Errorf("CLUSTER NODES: unexpected slots %q of %s", rng, addr)
			}
			if int(at) == len(l.nodes) {
				l.nodes = append(l.nodes, node{addr: addr, key: ns + "ping:{" + tagIn(lo, hi) + "}"})
			}
			for s := lo; s <= hi; s++ {
				l.slots[s] = at
			}
		}
	}
	if len(l.nodes) == 0 {
		return fmt.Errorf("CLUSTER NODES: no primary serves a slot")
	}
	return nil
}

// servesAsPrimary reports whether a node with flags (CLUSTER NODES) is a
// primary the cluster has not given up on (fail; "fail?" is one node's
// suspicion only).
func servesAsPrimary(flags []string) bool {
	return slices.Contains(flags, "master") && !slices.Contains(flags, "fail") &&
		!slices.Contains(flags, "noaddr") && !slices.Contains(flags, "handshake")
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
