//go:build race

package main

// raceBuilt: under `go test -race` testenv builds both labs with -race too,
// which slows them down; the latency measurement says so.
const raceBuilt = true
