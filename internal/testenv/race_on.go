//go:build race

package testenv

// raceEnabled: this test binary runs under the race detector, so the labs
// it builds and runs are built with -race too.
const raceEnabled = true
