// Package mykubelet wires chapter 3's pieces into one running node: the pod
// sources (a reflector on pods bound to the node, and the static pod
// manifests of a folder), the pod manager, the pod workers, the PLEG over a
// CRI runtime, the pod cache between them, a runtime manager that starts
// and stops containers, the status manager that reports back, the mirror
// client that shows each static pod in the apiserver, and the log rotator
// that keeps container logs within bounds (mycore/logrotate). It is the
// kubelet's Kubelet struct cut to those parts (pkg/kubelet/kubelet.go,
// Kubernetes v1.36.3; line numbers refer to that file unless another is
// named):
//
//	apiserver──PodUpdate──▶ syncLoop ──UpdatePod──▶ pod workers ──▶ Syncer
//	  files  ──PodUpdate──▶   │                       ▲  waits on     │ SyncPod/KillPod
//	   PLEG  ──events────▶    │                       │  pod cache    ▼
//	housekeeping ─tick──▶     │                       └── PLEG ◀── CRI runtime
//	                          └─ HandlePodCleanups    status manager ──▶ apiserver
//	                                                  mirror pods   ──▶ apiserver
//
// The PLEG is upstream's, imported (pkg/kubelet/pleg, NewGenericPLEG,
// generic.go:135): there is no PLEG package in mycore. It reads the
// runtime through mycore/plegruntime; docs/architecture.md says why.
//
// The clock is given (Options.Clock, nil for the real one): the PLEG, the
// back-offs, the pod workers, the prober, the status manager and
// housekeeping all read it, so a test steps it instead of sleeping.
//
// A static pod runs from a file alone; the apiserver only shows it, as a
// mirror pod that SyncPod creates (and replaces when the manifest
// changes), that carries the static pod's status, and that housekeeping
// deletes once the static pod is gone. Deleting a mirror pod stops
// nothing: the next sync makes it again. Housekeeping waits until both
// sources have delivered their first list: before that, pods of the
// silent source look gone.
//
// What a learner should take from it: nothing here talks to the runtime
// and the apiserver in one step. Config says what should run, the PLEG
// says what does run, the workers reconcile one pod at a time, and the
// status manager posts what the runtime shows — never what was asked.
package mykubelet
