// Package peers holds only benchmarks: atomicredis, on redigo and through
// its goredis adapter, against bsm/redislock, go-redsync/redsync and
// rueidislock on one redis-server. See bench_test.go.
package peers
