module github.com/atomicredis/atomicredis/goredis

go 1.22

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/atomicredis/atomicredis v0.0.0-20261124044439-ac68a38ee174
	github.com/gomodule/redigo v1.9.3
	github.com/redis/go-redis/v9 v9.7.3
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
)

replace github.com/atomicredis/atomicredis => ../
