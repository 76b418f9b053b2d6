// Package kuberuntime is our kubelet's runtime manager: the CRI side of
// running a pod. It is a compact rewrite of the kubelet's
// kubeGenericRuntimeManager (pkg/kubelet/kuberuntime, Kubernetes v1.36.3),
// whose constructor takes some forty parameters and writes checkpoints
// under its root folder; line numbers in comments refer to that package at
// v1.36.3 unless another file is named.
//
//   - door.go: the one way to the runtime. Every CRI call goes through
//     it and is published on the journal (mycore/journal) as a CRI entry
//     of the pod it is about, with its latency — upstream's
//     instrumented_services.go, which records the same for its metrics.
//   - sandbox.go, container.go, labels.go: a v1.Pod becomes CRI requests —
//     RunPodSandbox, then CreateContainer + StartContainer per container —
//     with the labels and annotations the kubelet writes, so the pod cache
//     (mycore/plegruntime) reads back restart counts and container hashes.
//   - security.go: the pod's securityContext as the CRI's sandbox and
//     container security contexts; what it does not map is refused.
//   - hooks.go: postStart and preStop hooks through upstream's handler
//     runner; events.go: the container and image events.
//   - hosts.go, termination.go (nodemounts.go): the files the kubelet
//     mounts in every container, /etc/hosts and the termination log.
//   - dns.go: the pod's /etc/resolv.conf, which the runtime writes from
//     the sandbox config — upstream's own DNS configurer
//     (pkg/kubelet/network/dns), imported.
//   - kill.go: stopping containers and pods (killContainer, KillPod).
//   - gc.go: removing what is dead (kuberuntime_gc.go).
package kuberuntime
