package main

import (
	"time"

	"kubelet-labs/hack/internal/benchkit"
)

// The measuring this benchmark shares with hack/kubeletbench (children
// sampled from /proc, the apiserver's and the controller-manager's
// request counters, the machine's load, round orders and medians, and the
// driver that creates, watches and deletes the pods) lives in
// hack/internal/benchkit, so that both measure the same way; these are
// its names here.

// child is a tool under test, run as a process of its own.
type child = benchkit.Child

var (
	startChild              = benchkit.StartChild
	requestTotals           = benchkit.RequestTotals
	controllerManagerTotals = benchkit.ControllerManagerTotals
	minus                   = benchkit.Minus
	delta                   = benchkit.Delta
	onResource              = benchkit.OnResource
	procLoadAvg1            = benchkit.ProcLoadAvg1
	machineCPU              = benchkit.MachineCPU
	selfCPU                 = benchkit.SelfCPU
	roundOrder              = benchkit.RoundOrder
	spreadValue             = benchkit.SpreadValue
	machine                 = benchkit.Machine
)

// medianValue is benchkit.MedianValue (a generic function has no value
// to assign).
func medianValue[T int | int64 | float64 | time.Duration](v []T) T { return benchkit.MedianValue(v) }
