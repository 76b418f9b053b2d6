//go:build race

package main

// raceBuilt: under `go test -race` testenv builds the lab with -race too,
// which multiplies its memory and slows it down; the measurement says so.
const raceBuilt = true
