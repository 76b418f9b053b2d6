package labpod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/plegruntime"
)

// Load decodes a pod manifest, strictly (a misspelt field is an error, as
// with kubectl): the file at path, or def — the lab's own — if path is "".
func Load(path string, def []byte) (*v1.Pod, error) {
	data, name := def, "the lab's pod.yaml"
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("--pod: %w", err)
		}
		name = path
	}
	obj, _, err := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("%s is a %T, not a Pod", name, obj)
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s: the pod has no containers", name)
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	return pod, nil
}

// Create makes pod in the apiserver. A pod of the same name left by an
// interrupted run is removed first; on a young cluster it waits for the
// namespace's default ServiceAccount, without which admission refuses pods.
func Create(ctx context.Context, c kubernetes.Interface, pod *v1.Pod, log func(string, ...any)) (*v1.Pod, error) {
	pods := c.CoreV1().Pods(pod.Namespace)
	old, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		log("removing pod %s/%s (uid %s) left by an earlier run", old.Namespace, old.Name, old.UID)
		if err := Remove(ctx, c, old); err != nil {
			return nil, err
		}
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for ServiceAccount %s/default (the controller-manager makes it): %w", pod.Namespace, err)
	}
	return pods.Create(ctx, pod, metav1.CreateOptions{})
}

// Remove deletes pod for good: grace period 0 with its UID as a
// precondition — what the kubelet's status manager sends once nothing of
// the pod runs any more (status/status_manager.go:1209-1216, after
// canBeDeleted), and only for the pod it ran, never a new one of the same
// name. It waits until it is gone.
func Remove(ctx context.Context, c kubernetes.Interface, pod *v1.Pod) error {
	zero := int64(0)
	err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return Gone(ctx, c, pod)
	})
}

// Gone reports whether pod no longer exists in the apiserver (deleted, or
// replaced by a new pod of the same name): what the kubelet's pod workers
// know when the garbage collector asks whether a pod's content may go.
func Gone(ctx context.Context, c kubernetes.Interface, pod *v1.Pod) (bool, error) {
	got, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return got.UID != pod.UID, nil
}

// CleanRuntime removes from the runtime every sandbox (with its
// containers) of pods named namespace/name: leftovers of an interrupted
// run. The course's containerd keeps them across runs.
func CleanRuntime(ctx context.Context, c *cri.Client, namespace, name string) (int, error) {
	sbs, err := c.Pods(ctx, map[string]string{cri.LabelPodNamespace: namespace, cri.LabelPodName: name})
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, sb := range sbs {
		errs = append(errs, c.RemovePod(ctx, sb.Id, 0))
	}
	return len(sbs), errors.Join(errs...)
}

// RunningPod is what the kubelet hands to KillPod: the pod's status from
// the runtime, converted to what still runs
// (kubecontainer.ConvertPodStatusToRunningPod, as killPod in
// kubelet_pods.go does).
func RunningPod(ctx context.Context, c *cri.Client, pod *v1.Pod) (kubecontainer.Pod, *kubecontainer.PodStatus, error) {
	r := plegruntime.New(c)
	p, err := r.GetPod(ctx, pod.UID)
	if err != nil {
		return kubecontainer.Pod{}, nil, err
	}
	st, err := r.GetPodStatus(ctx, p)
	if err != nil {
		return kubecontainer.Pod{}, nil, err
	}
	return kubecontainer.ConvertPodStatusToRunningPod(r.Type(), st), st, nil
}

// WaitLogged waits until the container's log has a line containing text
// (the lab's containers print "ready" once their SIGTERM trap is set), or
// timeout passes; it reports which.
func WaitLogged(ctx context.Context, c *cri.Client, id, text string, timeout time.Duration) bool {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		lines, err := c.ContainerLog(ctx, id)
		if err != nil {
			return false, nil // the runtime may not have opened the file yet
		}
		for _, l := range lines {
			if strings.Contains(l.Text, text) {
				return true, nil
			}
		}
		return false, nil
	})
	return err == nil
}

// Cleanup removes what a lab made, also after an error or Ctrl-C (it uses
// a context of its own): the pod's sandboxes and containers from the
// runtime, then the pod object for good. It says what it removed.
func Cleanup(client kubernetes.Interface, c *cri.Client, pod *v1.Pod, log func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if n, err := CleanRuntime(ctx, c, pod.Namespace, pod.Name); err != nil {
		log("cleanup: %v", err)
	} else if n > 0 {
		log("cleanup: removed %d sandbox(es) of %s/%s and their containers from the runtime", n, pod.Namespace, pod.Name)
	}
	if gone, err := Gone(ctx, client, pod); err == nil && gone {
		return
	}
	if err := Remove(ctx, client, pod); err != nil {
		log("cleanup: %v", err)
		return
	}
	log("cleanup: DELETE pods/%s gracePeriodSeconds=0 (uid precondition): pod %s/%s is gone", pod.Name, pod.Namespace, pod.Name)
}

// Start makes the runtime match pod with our SyncPod (a sandbox if there
// is none, then each container that is not running) and waits until each
// container printed "ready" — its SIGTERM trap is set, so a stop that
// follows meets the container as the manifest describes it.
func Start(ctx context.Context, m *kuberuntime.Manager, c *cri.Client, pod *v1.Pod, log func(string, ...any)) error {
	_, status, err := RunningPod(ctx, c, pod)
	if errors.Is(err, kubecontainer.ErrPodNotFound) {
		status, err = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, nil
	}
	if err != nil {
		return err
	}
	if r := m.SyncPod(ctx, pod, status, kuberuntime.PodIPs{NodeName: pod.Spec.NodeName}, nil); r.Error() != nil {
		return r.Error()
	}
	running, _, err := RunningPod(ctx, c, pod)
	if err != nil {
		return err
	}
	for _, ct := range running.Containers {
		if !WaitLogged(ctx, c, ct.ID.ID, "ready", 10*time.Second) {
			log("(container %s printed no \"ready\" within 10s: going on anyway)", ct.Name)
		}
	}
	return nil
}
