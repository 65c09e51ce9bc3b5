module github.com/atomicredis/atomicredis

go 1.22

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/anishathalye/porcupine v1.3.1
	github.com/gomodule/redigo v1.9.3
	github.com/google/uuid v1.6.0
	github.com/mna/redisc v1.4.0
	go.uber.org/goleak v1.3.0
)

require github.com/yuin/gopher-lua v1.1.1 // indirect
