package kuberuntime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
)

// criDoor is the one way this package reaches the runtime. The Manager
// holds the door, never the runtime service behind it, so no CRI call can
// be made around it: each method makes one CRI call, times it and publishes
// it as one journal.CRI entry — call, latency, failure — on the lane of the
// pod the caller says it is about. A new CRI call is one more method here.
//
// Upstream's runtime manager wraps its services the same way, for its
// metrics: newInstrumentedRuntimeService and
// newInstrumentedImageManagerService (instrumented_services.go:35-48, at
// kuberuntime_manager.go:258-259 in v1.36.3) record every operation's
// count, latency and errors (RuntimeOperations*, pkg/kubelet/metrics).
// That is the cri.Client's Meter here, under this door, counting every
// caller's calls (the PLEG's relists too); the door adds what only this
// package knows — the pod — for the live view's lanes.
type criDoor struct {
	rt  internalapi.RuntimeService
	img internalapi.ImageManagerService
	// ctx carries the client's logger into the kubelet's remote client.
	ctx     func(context.Context) context.Context
	journal *journal.Bus
}

// newCRIDoor is the door to c's runtime; nil for no runtime (a Manager
// that only computes).
func newCRIDoor(c *cri.Client, j *journal.Bus) *criDoor {
	if c == nil {
		return nil
	}
	return &criDoor{rt: c.Runtime, img: c.Images, ctx: c.Context, journal: j}
}

// about is what a CRI call is about — the pod (the live view's lane; ""
// for the node: a list, the runtime's version, an image) and the container
// in it — and what the terminal prints of the call. Only the caller knows
// which pod an ID belongs to, so every method of the door takes one.
type about struct {
	pod, uid, container string
	// before, if set, is printed (an entry with no latency yet) just
	// before the call: one that may take long, as a StopContainer that
	// waits out the grace period, shows it has begun.
	before *line
	// after, if set, is the call's printed line once it returned: "" for
	// none (say, when it failed: the caller reports that its own way).
	after func(r returned) string
}

// line is a printed line, formatted only if anything reads the journal.
type line struct {
	format string
	args   []any
}

// returned is how a call went: the ID it made (RunPodSandbox,
// CreateContainer), how long it took, its error, and whether that error
// is a stop's or a remove's NotFound — done (idempotent).
type returned struct {
	id   string
	took time.Duration
	err  error
	gone bool
}

// onNode is a call about no pod.
var onNode = about{}

// podAbout is a call about pod (nil: about no pod).
func podAbout(pod *v1.Pod) about {
	if pod == nil {
		return onNode
	}
	return about{pod: pod.Namespace + "/" + pod.Name, uid: string(pod.UID)}
}

// runningPodAbout is a call about a pod as the runtime knows it.
func runningPodAbout(p kubecontainer.Pod) about {
	return about{pod: p.Namespace + "/" + p.Name, uid: string(p.ID)}
}

// labelsAbout is a call about what the runtime listed, named by the
// labels the kubelet put on it (labels.go): its pod and, on a container,
// the container's name.
func labelsAbout(l map[string]string) about {
	ns, name := l[kubetypes.KubernetesPodNamespaceLabel], l[kubetypes.KubernetesPodNameLabel]
	if ns == "" && name == "" {
		return about{container: l[kubetypes.KubernetesContainerNameLabel]}
	}
	return about{pod: ns + "/" + name, uid: l[kubetypes.KubernetesPodUIDLabel], container: l[kubetypes.KubernetesContainerNameLabel]}
}

// sandboxAbout is a call about a listed sandbox, named by its metadata.
func sandboxAbout(md *runtimeapi.PodSandboxMetadata) about {
	if md == nil {
		return onNode
	}
	return about{pod: md.Namespace + "/" + md.Name, uid: md.Uid}
}

// of is the call about one container of the pod.
func (a about) of(container string) about {
	a.container = container
	return a
}

// announce prints a line before the call.
func (a about) announce(format string, args ...any) about {
	a.before = &line{format, args}
	return a
}

// saying prints a line once the call succeeded (or, for a stop or a
// remove, found its object gone).
func (a about) saying(format string, args ...any) about {
	a.after = func(r returned) string {
		if r.err != nil && !r.gone {
			return ""
		}
		return fmt.Sprintf(format, args...)
	}
	return a
}

// said prints the line f makes of how the call went.
func (a about) said(f func(r returned) string) about {
	a.after = f
	return a
}

// aboutKey carries an about through a context, for the calls that reach
// the door through an interface of upstream's with no room for one: a
// hook's ExecSync (RunInContainer) and its pod IP (hookPods).
type aboutKey struct{}

// withAbout is ctx whose CRI calls are about a.
func withAbout(ctx context.Context, a about) context.Context {
	return context.WithValue(ctx, aboutKey{}, a)
}

// aboutIn is what ctx's CRI calls are about: onNode unless withAbout said.
func aboutIn(ctx context.Context) about {
	a, _ := ctx.Value(aboutKey{}).(about)
	a.before, a.after = nil, nil
	return a
}

// entry is the journal's record of one call.
func (a about) entry(call string, took time.Duration) journal.Entry {
	return journal.Entry{Kind: journal.CRI, Pod: a.pod, UID: a.uid, Container: a.container, Call: call, Took: took}
}

// idempotent are the calls the CRI spec requires to succeed on an object
// already gone; containerd 1.6 says NotFound instead, which the kubelet
// (and so this package) counts as done, not as a failure.
var idempotent = map[string]bool{"StopContainer": true, "RemoveContainer": true, "StopPodSandbox": true, "RemovePodSandbox": true}

// through makes one call through the door: the line before it, the call
// with the client's context, then its entry.
func through[T any](ctx context.Context, d *criDoor, a about, call string, f func(context.Context) (T, error)) (T, error) {
	if a.before != nil && d.journal.Heard() {
		d.journal.Say(a.entry(call, 0), a.before.format, a.before.args...)
	}
	start := time.Now()
	v, err := f(d.ctx(ctx))
	if d.journal.Heard() {
		r := returned{took: time.Since(start), err: err, gone: idempotent[call] && isNotFound(err)}
		if id, ok := any(v).(string); ok {
			r.id = id
		}
		e := a.entry(call, r.took)
		e.Failed = err != nil && !r.gone
		if a.after != nil {
			e.Text = a.after(r)
		}
		d.journal.Publish(e)
	}
	return v, err
}

// done is through for a call that returns only an error.
func done(ctx context.Context, d *criDoor, a about, call string, f func(context.Context) error) error {
	_, err := through(ctx, d, a, call, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// The calls, in the order of cri-api's RuntimeService and
// ImageManagerService. Their names are the CRI methods', as the journal's
// Call says them.

func (d *criDoor) Version(ctx context.Context, a about) (*runtimeapi.VersionResponse, error) {
	return through(ctx, d, a, "Version", func(ctx context.Context) (*runtimeapi.VersionResponse, error) {
		return d.rt.Version(ctx, "")
	})
}

func (d *criDoor) Status(ctx context.Context, a about) (*runtimeapi.StatusResponse, error) {
	return through(ctx, d, a, "Status", func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return d.rt.Status(ctx, false)
	})
}

// RunPodSandbox with the runtime's default handler ("": runc); a
// RuntimeClass would name another.
func (d *criDoor) RunPodSandbox(ctx context.Context, a about, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	return through(ctx, d, a, "RunPodSandbox", func(ctx context.Context) (string, error) {
		return d.rt.RunPodSandbox(ctx, cfg, "")
	})
}

func (d *criDoor) StopPodSandbox(ctx context.Context, a about, id string) error {
	return done(ctx, d, a, "StopPodSandbox", func(ctx context.Context) error { return d.rt.StopPodSandbox(ctx, id) })
}

func (d *criDoor) RemovePodSandbox(ctx context.Context, a about, id string) error {
	return done(ctx, d, a, "RemovePodSandbox", func(ctx context.Context) error { return d.rt.RemovePodSandbox(ctx, id) })
}

// PodSandboxStatus is the sandbox's status (not verbose).
func (d *criDoor) PodSandboxStatus(ctx context.Context, a about, id string) (*runtimeapi.PodSandboxStatus, error) {
	resp, err := through(ctx, d, a, "PodSandboxStatus", func(ctx context.Context) (*runtimeapi.PodSandboxStatusResponse, error) {
		return d.rt.PodSandboxStatus(ctx, id, false)
	})
	return resp.GetStatus(), err
}

func (d *criDoor) ListPodSandbox(ctx context.Context, a about, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return through(ctx, d, a, "ListPodSandbox", func(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
		return d.rt.ListPodSandbox(ctx, filter)
	})
}

func (d *criDoor) CreateContainer(ctx context.Context, a about, sandboxID string, cfg *runtimeapi.ContainerConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error) {
	return through(ctx, d, a, "CreateContainer", func(ctx context.Context) (string, error) {
		return d.rt.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
	})
}

func (d *criDoor) StartContainer(ctx context.Context, a about, id string) error {
	return done(ctx, d, a, "StartContainer", func(ctx context.Context) error { return d.rt.StartContainer(ctx, id) })
}

// StopContainer: the runtime sends the stop signal, waits up to timeout
// seconds, then SIGKILLs (kill.go).
func (d *criDoor) StopContainer(ctx context.Context, a about, id string, timeout int64) error {
	return done(ctx, d, a, "StopContainer", func(ctx context.Context) error { return d.rt.StopContainer(ctx, id, timeout) })
}

func (d *criDoor) RemoveContainer(ctx context.Context, a about, id string) error {
	return done(ctx, d, a, "RemoveContainer", func(ctx context.Context) error { return d.rt.RemoveContainer(ctx, id) })
}

func (d *criDoor) ListContainers(ctx context.Context, a about, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return through(ctx, d, a, "ListContainers", func(ctx context.Context) ([]*runtimeapi.Container, error) {
		return d.rt.ListContainers(ctx, filter)
	})
}

// ContainerStatus is the container's status (not verbose).
func (d *criDoor) ContainerStatus(ctx context.Context, a about, id string) (*runtimeapi.ContainerStatus, error) {
	resp, err := through(ctx, d, a, "ContainerStatus", func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return d.rt.ContainerStatus(ctx, id, false)
	})
	return resp.GetStatus(), err
}

func (d *criDoor) UpdateContainerResources(ctx context.Context, a about, id string, res *runtimeapi.ContainerResources) error {
	return done(ctx, d, a, "UpdateContainerResources", func(ctx context.Context) error {
		return d.rt.UpdateContainerResources(ctx, id, res)
	})
}

// ExecSync runs cmd in the container and waits for it (timeout 0: no
// limit). A non-zero exit is an error, utilexec.CodeExitError, as the
// kubelet's remote client reports it.
func (d *criDoor) ExecSync(ctx context.Context, a about, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	type output struct{ stdout, stderr []byte }
	out, err := through(ctx, d, a, "ExecSync", func(ctx context.Context) (output, error) {
		o, e, err := d.rt.ExecSync(ctx, id, cmd, timeout)
		return output{o, e}, err
	})
	return out.stdout, out.stderr, err
}

// ImageStatus is the image's status, nil if the runtime does not have it.
func (d *criDoor) ImageStatus(ctx context.Context, a about, image string) (*runtimeapi.Image, error) {
	resp, err := through(ctx, d, a, "ImageStatus", func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return d.img.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	})
	return resp.GetImage(), err
}

// PullImage with the registry credentials auth (nil: none) and no
// sandbox config.
func (d *criDoor) PullImage(ctx context.Context, a about, image string, auth *runtimeapi.AuthConfig) error {
	_, err := through(ctx, d, a, "PullImage", func(ctx context.Context) (string, error) {
		return d.img.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, auth, nil)
	})
	return err
}
