// Package plegruntime is the container runtime as the kubelet's PLEG sees it: a
// kubecontainer.Runtime (k8s.io/kubernetes/pkg/kubelet/container, v1.36.3)
// over any CRI v1 endpoint — our mock (mylib/fakecri) or containerd.
//
// The kubelet's own implementation is kuberuntime's kubeGenericRuntimeManager
// (pkg/kubelet/kuberuntime/kuberuntime_manager.go), built by
// NewKubeGenericRuntimeManager from some forty dependencies. The PLEG needs
// three of its methods only:
//
//   - GetPods(ctx, all): every sandbox and container, grouped into pods by
//     the io.kubernetes.pod.* labels the kubelet put on them
//     (kuberuntime_manager.go:456-553);
//   - GetPod(ctx, uid): the same for one pod (:440);
//   - GetPodStatus(ctx, pod): one PodSandboxStatus per sandbox and one
//     ContainerStatus per container (:1998-2108, kuberuntime_container.go:650).
//
// This package implements those three the way kuberuntime does, and every
// other method of the interface returns an error wrapping ErrNotImplemented,
// so that code which reaches them fails with a sentence instead of a nil
// pointer panic.
//
// RelistEvents is the other side, the PLEG's own diff of two lists into
// events (pkg/kubelet/pleg/generic.go:252-490), written out for the
// build-it stage pleg-relist: the labs run the kubelet's PLEG, and lab 07
// prints a line when RelistEvents disagrees with what it sent.
package plegruntime
