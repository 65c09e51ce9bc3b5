package goredis

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: a Pool's
// workers after its Close, an engine's watchdogs or wake subscription after
// Engine.Close, a go-redis client's after its Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
