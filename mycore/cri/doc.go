// Package cri is our kubelet's client for a container runtime that speaks
// the Container Runtime Interface (CRI v1): containerd on a unix socket, or
// the mock runtime of mylib/fakecri, over a socket or in the same process.
//
// It does not re-implement gRPC plumbing: Dial uses the kubelet's own remote
// client, k8s.io/cri-client/pkg (NewRemoteRuntimeService and
// NewRemoteImageService), exactly as the kubelet does at start-up in
// PreInitRuntimeService (pkg/kubelet/kubelet.go, Kubernetes v1.36.3:
// https://github.com/kubernetes/kubernetes/blob/v1.36.3/pkg/kubelet/kubelet.go).
// InProcess gives the same interfaces over a CRI server in this process,
// with no socket. What the package adds on top:
//
//   - errors that say what is wrong (no socket, nobody listening,
//     permission denied, a runtime that only speaks the removed v1alpha2
//     API) and, when the caller names it (WithStartHint), what to run;
//   - a few calls in the kubelet's shapes for programs that drive one pod
//     by hand: RunPod, StartContainer (CreateContainer + StartContainer),
//     Exec (ExecSync), StopContainer, RemovePod (StopPodSandbox, then
//     RemovePodSandbox), Info, the lists and statuses (see
//     pkg/kubelet/kuberuntime/kuberuntime_sandbox.go and
//     kuberuntime_container.go at v1.36.3), with the kubelet's labels;
//   - reading a container's CRI log file, the format the runtime writes and
//     the kubelet serves for `kubectl logs`;
//   - a Meter that counts every call made through the Client, whoever makes
//     it (instrumented_services.go's place in the kubelet).
//
// Where to find the runtime is the caller's: Dial takes an endpoint, and
// NormalizeEndpoint and SocketPath only convert its forms. Our kubelet's
// runtime manager (mycore/kuberuntime) makes its calls on Runtime and
// Images itself, through its own door that puts each one on its pod's lane
// of the journal; the Meter under it counts them with everyone else's.
package cri
