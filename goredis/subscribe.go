package goredis

import (
	"context"
	"time"

	"github.com/atomicredis/atomicredis"
	"github.com/redis/go-redis/v9"
)

// Subscribe subscribes to channel through the client's own pub/sub (a
// go-redis connection cannot be put in subscribe mode): Pool is an
// atomicredis.Subscriber, on which an engine wakes its waiters. go-redis
// re-establishes a broken subscription by itself; Receive reports each
// (re)subscription, so the engine knows to have its waiters look for
// what they missed.
func (p *Pool) Subscribe(ctx context.Context, channel string) (atomicredis.Subscription, error) {
	if p == nil || p.client == nil {
		return nil, errNilClient
	}
	if p.workers.isClosed() {
		return nil, errPoolClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &subscription{ps: p.client.Subscribe(ctx, channel)}, nil
}

// subscription is a go-redis PubSub as an atomicredis.Subscription.
type subscription struct{ ps *redis.PubSub }

func (s *subscription) Receive(timeout time.Duration) (payload string, subscribed bool, err error) {
	msg, err := s.ps.ReceiveTimeout(context.Background(), timeout)
	if err != nil {
		return "", false, err
	}
	switch m := msg.(type) {
	case *redis.Message:
		return m.Payload, false, nil
	case *redis.Subscription:
		return "", m.Kind == "subscribe", nil
	}
	return "", false, nil // a PING's reply
}

func (s *subscription) Ping() error { return s.ps.Ping(context.Background()) }

func (s *subscription) Close() error { return s.ps.Close() }
