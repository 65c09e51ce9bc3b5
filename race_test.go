//go:build race

package atomicredis

// raceDetector is true under go test -race, whose instrumentation
// allocates on its own.
const raceDetector = true
