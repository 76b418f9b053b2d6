// Package kubelet wires chapter 3's pieces into one running node: the pod
// source (an informer on pods bound to the node), the pod manager, the pod
// workers, the PLEG over a CRI runtime, the pod cache between them, a
// runtime manager that starts and stops containers, and the status manager
// that reports back. It is the kubelet's Kubelet struct cut to those parts
// (pkg/kubelet/kubelet.go, Kubernetes v1.36.3; line numbers refer to that
// file unless another is named):
//
//	informer ──PodUpdate──▶ syncLoop ──UpdatePod──▶ pod workers ──▶ Syncer
//	   PLEG  ──events────▶    │                       ▲  waits on     │ SyncPod/KillPod
//	housekeeping ─tick──▶     │                       │  pod cache    ▼
//	                          └─ HandlePodCleanups    └── PLEG ◀── CRI runtime
//	                                                  status manager ──▶ apiserver
//
// What a learner should take from it: nothing here talks to the runtime
// and the apiserver in one step. Config says what should run, the PLEG
// says what does run, the workers reconcile one pod at a time, and the
// status manager posts what the runtime shows — never what was asked.
package kubelet
