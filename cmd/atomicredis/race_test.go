//go:build race

package main

// raceEnabled: the tests run with -race, and so does the command they build.
const raceEnabled = true
