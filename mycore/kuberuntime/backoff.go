package kuberuntime

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// This file is the backoff-key build-it stage: the crash-loop back-off's
// key and its check before a container starts again, as the runtime
// manager has them (pkg/kubelet/kuberuntime/helpers.go:190-207 and
// kuberuntime_manager.go:1908-1940, v1.36.3). SyncPod (sync.go) calls
// doBackOff before each start; lastExited (sync.go) finds the exit.

// backoffKey is upstream's GetBackoffKey (helpers.go:190-207): the key
// under which one container of one pod keeps its crash-loop back-off. It
// is the 64-bit FNV-1a hash (hash/fnv.New64a), in lowercase hexadecimal
// (strconv.FormatUint(…, 16)), of these fields joined with "/": the pod's
// name, namespace and UID, the container's name, its image and its
// resources (container.Resources.String()). Changing the image or the
// resources — both can change while the pod lives — gives a new key,
// hence a fresh back-off; nothing else of the spec does.
//
//stage:backoff-key
func backoffKey(pod *v1.Pod, c *v1.Container) string {
	key := []string{pod.Name, pod.Namespace, string(pod.UID), c.Name, c.Image, c.Resources.String()}
	h := fnv.New64a()
	h.Write([]byte(strings.Join(key, "/")))
	return strconv.FormatUint(h.Sum64(), 16)
}

// doBackOff is the runtime manager's doBackOff (kuberuntime_manager.go:
// 1908-1940): may container c start again now? With no backOff, or no
// exited instance of c (lastExited), yes: return nil, "". Otherwise, with
// FinishedAt the newest exit and key = backoffKey(pod, c):
//   - if backOff.IsInBackOffSince(key, FinishedAt), no: return
//     kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff,
//     FinishedAt + backOff.Get(key)) — the pod worker retries exactly
//     then — and the message "back-off WAIT restarting failed
//     container=NAME pod=POD_NAMESPACE(UID)";
//   - else yes, and backOff.Next(key, FinishedAt) first: the next exit
//     waits twice as long (the first restart is free).
//
//stage:backoff-key
func doBackOff(pod *v1.Pod, c *v1.Container, podStatus *kubecontainer.PodStatus, backOff *flowcontrol.Backoff) (error, string) {
	if backOff == nil {
		return nil, ""
	}
	last := lastExited(podStatus, c.Name)
	if last == nil {
		return nil, ""
	}
	key := backoffKey(pod, c)
	if backOff.IsInBackOffSince(key, last.FinishedAt) {
		wait := backOff.Get(key)
		return kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff, last.FinishedAt.Add(wait)),
			fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", wait, c.Name, pod.Name, pod.Namespace, pod.UID)
	}
	backOff.Next(key, last.FinishedAt)
	return nil, ""
}
