package goredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// noteMoved records that slot now lives at addr, and asks go-redis to
// reload its map of the cluster in the background.
func (p *Pool) noteMoved(slot int, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moved == nil {
		p.moved = map[int]string{}
	}
	p.moved[slot] = addr
	p.cluster.ReloadState(context.Background())
}

// movedTo returns, and forgets, the address a MOVED reply named for slot.
func (p *Pool) movedTo(slot int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr := p.moved[slot]
	delete(p.moved, slot)
	return addr
}

// clusterConn is a connection of a cluster client: routed by go-redis
// until Bind pins it.
type clusterConn struct {
	conn
	client *redis.ClusterClient
	ctx    context.Context // GetContext's, for the slot lookup in Bind
	bound  bool
}

// Bind pins the connection to one pooled connection of the primary that
// owns the slot of keys, which must all hash to one slot; what was sent
// before went through go-redis's routing. It is an error to Bind twice,
// with no key, or with commands queued or replies pending.
func (c *clusterConn) Bind(keys ...string) error {
	if len(keys) == 0 {
		return errors.New("goredis: Bind needs at least one key")
	}
	slot := keySlot(keys[0])
	for _, k := range keys[1:] {
		if s := keySlot(k); s != slot {
			return fmt.Errorf("goredis: Bind: keys %q (slot %d) and %q (slot %d) are in different slots", keys[0], slot, k, s)
		}
	}
	c.mu.Lock()
	switch {
	case c.err != nil:
		err := c.err
		c.mu.Unlock()
		return err
	case c.bound:
		c.mu.Unlock()
		return errors.New("goredis: Bind: connection already bound")
	case len(c.queued) > 0 || len(c.batches) > 0 || c.busy > 0:
		c.mu.Unlock()
		return errors.New("goredis: Bind: commands pending on the connection")
	}
	c.mu.Unlock()
	node, err := c.client.MasterForKey(c.ctx, keys[0])
	if addr := c.pool.movedTo(slot); addr != "" && (err != nil || node.Options().Addr != addr) {
		// The slot moved, and go-redis's map (which it reloads in the
		// background, from any node, which may not know yet) still names
		// the old owner: pin the node the MOVED reply named, as redisc
		// does, if go-redis knows it.
		if n := c.nodeAt(addr); n != nil {
			node, err = n, nil
		}
	}
	if err != nil {
		return fmt.Errorf("goredis: Bind %q: %w", keys[0], err)
	}
	pc := node.Conn()
	c.mu.Lock()
	c.exec, c.pinned, c.cluster, c.bound = pc, pc, c.client, true
	c.readTimeout, c.deadlines = node.Options().ReadTimeout, deadlinesOf(node.Options())
	c.mu.Unlock()
	return nil
}

// nodeAt returns go-redis's client of the node at addr, a primary or a
// replica (a promoted one), or nil. ForEachShard reloads go-redis's map of
// the cluster first.
func (c *clusterConn) nodeAt(addr string) *redis.Client {
	var mu sync.Mutex
	var node *redis.Client
	_ = c.client.ForEachShard(c.ctx, func(_ context.Context, n *redis.Client) error {
		if n.Options().Addr == addr {
			mu.Lock()
			node = n
			mu.Unlock()
		}
		return nil
	})
	return node
}

// keySlot is the Redis Cluster hash slot of key: CRC16 of the key, or of
// its hash tag (the part between the first '{' and the next '}', if not
// empty), modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021), as Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
