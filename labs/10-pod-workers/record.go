package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"kubelet-labs/mycore/podworkers"
)

// workerRecord keeps the pod workers' steps of this run in the node's
// folder, workers.log, one line each as printed. Why a file: the workers
// live only in the lab's process, and what the walk-through makes them do
// — a sync that waited for the pod cache, a pod that went terminating by
// itself, a grace period shortened — leaves no trace in the apiserver (the
// lab posts no status) nor in the runtime (the mock ends with the lab);
// make check LAB=10 reads it.
type workerRecord struct {
	mu sync.Mutex
	f  *os.File
}

// newWorkerRecord starts the record of a run, replacing the last run's.
func newWorkerRecord(path string) (*workerRecord, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &workerRecord{f: f}, nil
}

// add records one step; a failed write loses the line, not the step.
func (r *workerRecord) add(e podworkers.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = fmt.Fprintf(r.f, "%s worker    %s\n", time.Now().Format("15:04:05.000"), e)
}

func (r *workerRecord) Close() error { return r.f.Close() }
