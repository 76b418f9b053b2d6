// Package cri is our kubelet's client for a container runtime that speaks
// the Container Runtime Interface (CRI v1) on a unix socket: in this course,
// the containerd started by scripts/containerd-up.sh, or the mock runtime of
// mylib/fakecri.
//
// It does not re-implement gRPC plumbing: Dial uses the kubelet's own remote
// client, k8s.io/cri-client/pkg (NewRemoteRuntimeService and
// NewRemoteImageService), exactly as the kubelet does at start-up in
// PreInitRuntimeService (pkg/kubelet/kubelet.go, Kubernetes v1.36.3:
// https://github.com/kubernetes/kubernetes/blob/v1.36.3/pkg/kubelet/kubelet.go).
// What this package adds is what a learner needs on top:
//
//   - where the socket is (the labs read /var/lib/kubelet-labs/containerd/env
//     written by the up script; flags and CONTAINER_RUNTIME_ENDPOINT override it);
//   - errors that say what is wrong and what to do (containerd not running,
//     permission denied, a runtime that only speaks the removed v1alpha2 API);
//   - the few calls the kubelet makes for one pod, in the kubelet's order:
//     RunPodSandbox, CreateContainer + StartContainer, ExecSync,
//     StopContainer, StopPodSandbox, RemovePodSandbox (see
//     pkg/kubelet/kuberuntime/kuberuntime_sandbox.go and
//     kuberuntime_container.go at v1.36.3);
//   - reading a container's CRI log file, the format the runtime writes and
//     the kubelet serves for `kubectl logs`.
//
// Test helpers that start or find a runtime live in the critest subpackage.
package cri
