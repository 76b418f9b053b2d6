package kuberuntime

import (
	"cmp"
	"context"
	"crypto/tls"
	"maps"
	"net/http"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
)

// ReasonFailedPostStartHook is why a container whose postStart hook failed
// is killed (reasonFailedPostStartHook, kuberuntime_manager.go:564).
const ReasonFailedPostStartHook KillReason = "FailedPostStartHook"

// newHookRunner is the kubelet's lifecycle handler runner, upstream's own
// (lifecycle.NewHandlerRunner, pkg/kubelet/lifecycle/handlers.go:67), with
// the parts kubelet.go:589-599 gives it:
//
//   - exec hooks run through our RunInContainer (CRI ExecSync);
//   - httpGet hooks go to the pod's IP, which the runner asks the runtime
//     for (GetPod + GetPodStatus: hookPods, through the door, as upstream
//     asks its runtime manager), with an HTTP client that accepts any certificate —
//     the kubelet cannot verify a pod's — and follows redirects to the
//     same host only. That client must never carry credentials: a hook's
//     URL is the pod author's;
//   - sleep hooks wait, ending early when the context ends;
//   - an HTTPS hook answered in plain HTTP is retried in HTTP and records
//     a LifecycleHTTPFallback event on the pod.
func newHookRunner(m *Manager, recorder record.EventRecorder) kubecontainer.HandlerRunner {
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet: a pod's certificate cannot be verified
		},
		CheckRedirect: httpprobe.RedirectChecker(false),
	}
	return lifecycle.NewHandlerRunner(client, m, hookPods{m}, recorder)
}

// hookPods answers the hook runner's two questions about a pod
// (podStatusProvider, lifecycle/handlers.go:62-65): its sandboxes, and its
// IPs — those of the newest sandbox if it is ready, as GetPodStatus
// (kuberuntime_manager.go:1998-2108) has them and handlers.go:133-144
// reads them. The calls are about the pod the hook runs for (withAbout).
type hookPods struct{ m *Manager }

func (h hookPods) GetPod(ctx context.Context, uid types.UID) (*kubecontainer.Pod, error) {
	sel := maps.Clone(h.m.labels)
	if sel == nil {
		sel = map[string]string{}
	}
	sel[kubetypes.KubernetesPodUIDLabel] = string(uid)
	sbs, err := h.m.cri.ListPodSandbox(ctx, aboutIn(ctx), &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	if len(sbs) == 0 {
		return nil, kubecontainer.ErrPodNotFound
	}
	slices.SortStableFunc(sbs, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	p := &kubecontainer.Pod{ID: uid, Name: sbs[0].GetMetadata().GetName(), Namespace: sbs[0].GetMetadata().GetNamespace()}
	for _, s := range sbs {
		p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{ID: kubecontainer.ContainerID{ID: s.Id}})
	}
	return p, nil
}

func (h hookPods) GetPodStatus(ctx context.Context, p *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	st := &kubecontainer.PodStatus{ID: p.ID, Name: p.Name, Namespace: p.Namespace}
	if len(p.Sandboxes) == 0 {
		return st, nil
	}
	sb, err := h.m.cri.PodSandboxStatus(ctx, aboutIn(ctx), p.Sandboxes[0].ID.ID)
	if err != nil {
		return nil, err
	}
	if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		st.IPs = sandboxIPs(sb)
	}
	return st, nil
}

// runPostStart is step 4 of startContainer (kuberuntime_container.go:320-338):
// the postStart hook runs right after StartContainer, and the kubelet
// waits for it — the next container of the pod starts only after it (what
// makes a sidecar's postStart a way to order start-up). If it fails, the
// container is killed (its preStop hook runs first, as for any kill) with a
// FailedPostStartHook event whose message does not say why: the hook's
// output may hold secrets, and events are readable by more people than
// the pod's logs. The error's text does say why; it becomes the
// container's Waiting message (the sync result's message upstream).
func (m *Manager) runPostStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id string) error {
	cid := kubecontainer.ContainerID{Type: m.runtimeType(ctx), ID: id}
	msg, err := m.hooks.Run(withAbout(ctx, podAbout(pod).of(c.Name)), cid, pod, c, c.Lifecycle.PostStart)
	if err == nil {
		m.log("  postStart hook of %s/%s done", pod.Name, c.Name)
		return nil
	}
	m.log("  postStart hook of %s/%s failed: %s", pod.Name, c.Name, msg)
	m.recordContainerEvent(pod, c, id, v1.EventTypeWarning, events.FailedPostStartHook, "PostStartHook failed")
	if kerr := m.killContainer(ctx, pod, cid, c.Name, ReasonFailedPostStartHook, nil, nil, "FailedPostStartHook"); kerr != nil {
		m.log("  kill %s/%s after its failed postStart hook: %v", pod.Name, c.Name, kerr)
	}
	return postStartError{msg: msg}
}

// postStartError is ErrPostStartHook with the hook's message.
type postStartError struct{ msg string }

func (e postStartError) Error() string { return e.msg }

// IsPostStartHookError reports whether StartContainer failed because the
// container's postStart hook did (the sync result's reason is then
// PostStartHookError, kubecontainer.ErrPostStartHook).
func IsPostStartHookError(err error) bool {
	_, ok := err.(postStartError)
	return ok
}

// runtimeType is the runtime's name as container IDs carry it
// ("containerd"); the hooks only pass the ID through.
func (m *Manager) runtimeType(ctx context.Context) string {
	if v, err := m.cri.Version(ctx, onNode); err == nil {
		return v.RuntimeName
	}
	return "cri"
}
