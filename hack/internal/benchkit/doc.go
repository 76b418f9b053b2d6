// Package benchkit is what the course's benchmarks (hack/fleetbench,
// hack/kubeletbench) measure with, so that both measure the same way: a
// tool under test runs as a child process whose peak RSS and CPU time come
// from /proc (proc.go); the apiserver's and the controller-manager's own
// request counters say who asked for what (apimetrics.go); the machine's
// load is checked before and watched during each run, because a
// comparison on a busy machine measures the other work (load.go); and
// rounds alternate their order and are summed up by medians (rounds.go).
// Both drive their pods alike — a paced client of their own that creates
// them, watches them come up and deletes them (driver.go) — on a private
// control plane (controlplane.go), take the same --rounds and load flags
// (flags.go), and lay out their tables the same way (table.go).
package benchkit
