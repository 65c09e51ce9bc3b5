package atomicredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// ClusterPool makes a *redisc.Cluster an atomicredis.Pool. The engine binds
// each connection to the node serving the object before EVALSHA (redisc
// would route EVALSHA by the script's SHA), follows MOVED after a failover
// or a slot move, and, since redisc connections have no DoContext, carries
// a ctx deadline as a read timeout.
type ClusterPool struct{ *redisc.Cluster }

// GetContext returns a cluster connection, not yet bound to a node.
func (p ClusterPool) GetContext(ctx context.Context) (redis.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.Get(), nil
}

// Locks on a Redis Cluster, through github.com/mna/redisc. With
// WithReplicaAck(1, ...) a grant counts only once a replica has it, so a
// failover cannot hand the lock to a second holder. (No Output: it needs a
// running cluster.)
func Example_cluster() {
	cluster := &redisc.Cluster{
		StartupNodes: []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
		DialOptions:  []redis.DialOption{redis.DialConnectTimeout(time.Second)},
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			return &redis.Pool{
				MaxIdle:     16,
				IdleTimeout: time.Minute,
				Dial:        func() (redis.Conn, error) { return redis.Dial("tcp", addr, opts...) },
			}, nil
		},
	}
	defer cluster.Close()
	if err := cluster.Refresh(); err != nil { // load the slot map
		fmt.Println(err)
		return
	}

	e := atomicredis.New(ClusterPool{cluster}, atomicredis.WithNamespace("app:"),
		atomicredis.WithReplicaAck(1, 100*time.Millisecond))
	ctx := context.Background()
	l, err := e.Lock(ctx, "invoice:42", atomicredis.LockOptions{TTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Unlock(ctx)
	// Hand the resource both: it admits a holder whose fence is higher than
	// any it has seen, or equal with the same token.
	fmt.Println(l.Fence(), l.Token())
}
