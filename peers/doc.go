// Package peers holds only benchmarks: atomicredis against bsm/redislock
// and go-redsync/redsync on one redis-server. See bench_test.go.
package peers
