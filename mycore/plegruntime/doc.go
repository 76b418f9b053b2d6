// Package plegruntime is the container runtime as the kubelet's PLEG sees
// it — the read side only: a kubecontainer.Runtime
// (k8s.io/kubernetes/pkg/kubelet/container, v1.36.3) whose GetPods, GetPod
// and GetPodStatus list and inspect any CRI v1 endpoint, our mock
// (mylib/fakecri) or containerd, and whose SyncPod, KillPod and the rest
// return ErrNotImplemented. It is not the PLEG (there is no mycore/pleg: the
// labs import upstream's, pkg/kubelet/pleg, whose NewGenericPLEG takes a
// kubecontainer.Runtime — generic.go:135), and it is not what starts and
// stops containers: that is mycore/kuberuntime.Manager, whose SyncPod and
// KillPod our kubelet (mycore/mykubelet) calls.
//
// Why one upstream struct is two packages here. The kubelet's
// kubeGenericRuntimeManager (pkg/kubelet/kuberuntime/kuberuntime_manager.go)
// is both: the PLEG's runtime and the one SyncPod; it is built by
// NewKubeGenericRuntimeManager from some forty dependencies. The course
// needs the read side first and alone — lab 07 runs the PLEG over the mock,
// with no cluster, well before labs 15-17 write the runtime manager —
// and the PLEG calls three methods only:
//
//   - GetPods(ctx, all): every sandbox and container, grouped into pods by
//     the io.kubernetes.pod.* labels the kubelet put on them
//     (kuberuntime_manager.go:456-553);
//   - GetPod(ctx, uid): the same for one pod (:440);
//   - GetPodStatus(ctx, pod): one PodSandboxStatus per sandbox and one
//     ContainerStatus per container (:1998-2108, kuberuntime_container.go:650).
//
// This package implements those three the way kuberuntime does. The other
// methods exist only because Go wants the whole interface: each returns an
// error wrapping ErrNotImplemented that names the method, so code which
// reaches one fails with a sentence instead of a nil pointer panic, and
// says where the real one is. They are stubs, not a second runtime manager:
// mycore/kuberuntime.Manager.SyncPod takes what our node has (the pod's IPs
// and the node's name) instead of the interface's pull secrets, so it does
// not implement kubecontainer.Runtime and is never handed to the PLEG.
// Upstream code that wants a kubecontainer.Runtime to read pods — the PLEG,
// the lifecycle hooks' handler runner (mycore/kuberuntime hooks.go) — gets
// this one.
//
// RelistEvents is the other side, the PLEG's own diff of two lists into
// events (pkg/kubelet/pleg/generic.go:252-490), written out for the
// build-it stage pleg-relist: the labs run the kubelet's PLEG, and lab 07
// prints a line when RelistEvents disagrees with what it sent.
package plegruntime
