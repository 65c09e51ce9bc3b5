package goredis

import (
	"context"
	"testing"

	"github.com/atomicredis/atomicredis"
)

// Engine.Ping through a go-redis cluster client: its connections bind, so
// Ping reaches every primary by CLUSTER SLOTS and a key of each one's
// slots, over RESP2 and RESP3.
func TestPingCluster(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(protoName(proto), func(t *testing.T) {
			e := atomicredis.New(newPool(t, newClusterClient(t, proto)))
			defer e.Close(context.Background())
			if err := e.Ping(context.Background()); err != nil {
				t.Fatalf("Ping: %v", err)
			}
		})
	}
}
