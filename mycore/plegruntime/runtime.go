package plegruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	internalapi "k8s.io/cri-api/pkg/apis"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/utils/clock"

	"kubelet-labs/mycore/cri"
)

// ErrNotImplemented is wrapped by every method this runtime leaves out.
var ErrNotImplemented = errors.New("not implemented in kubelet-labs")

// Runtime is a kubecontainer.Runtime backed by one CRI endpoint.
type Runtime struct {
	runtime internalapi.RuntimeService
	// withLogger puts the CRI client's logger into each call's context: the
	// kubelet's client logs every failed call at error level through
	// klog.FromContext, which our own errors make redundant.
	withLogger func(context.Context) context.Context

	clock clock.PassiveClock
	// only: labels every listed sandbox and container must carry.
	only map[string]string

	mu         sync.Mutex
	name       string // the runtime's name from Version, e.g. "containerd"
	apiVersion string // the CRI version it speaks, e.g. "v1"
}

var _ kubecontainer.Runtime = (*Runtime)(nil)

// New wraps a connected CRI client. It makes no call: the runtime's name
// (the scheme of container IDs, "containerd://…") is asked for on first use.
func New(c *cri.Client, opts ...Option) *Runtime {
	r := &Runtime{runtime: c.Runtime, withLogger: c.Context, clock: clock.RealClock{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Option changes a Runtime.
type Option func(*Runtime)

// WithClock sets the clock that stamps each list (kubecontainer.Pod's
// Timestamp, which the PLEG stores with the pod's status in the cache).
// kuberuntime uses the wall clock; a lab that drives the PLEG on a fake
// clock passes the same one, so both times in the cache agree.
func WithClock(c clock.PassiveClock) Option { return func(r *Runtime) { r.clock = c } }

// WithLabels makes GetPods see only sandboxes and containers that carry
// these labels. A kubelet owns its runtime and lists everything in it;
// the course runs several lab nodes (and tests) on one containerd, so each
// node labels what it creates and looks only at that — as if each had a
// runtime of its own. Without it, a node would take another node's pods
// for orphans and stop them.
func WithLabels(l map[string]string) Option { return func(r *Runtime) { r.only = l } }

// Type is the runtime's name as the kubelet records it in container IDs.
// Before the first successful Version call it is "cri".
func (r *Runtime) Type() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.name == "" {
		return "cri"
	}
	return r.name
}

// runtimeName learns the runtime's name once, the way the kubelet does at
// start-up (NewKubeGenericRuntimeManager calls Version and keeps RuntimeName).
func (r *Runtime) runtimeName(ctx context.Context) string {
	r.mu.Lock()
	known := r.name
	r.mu.Unlock()
	if known != "" {
		return known
	}
	if _, err := r.Version(ctx); err != nil {
		return "cri"
	}
	return r.Type()
}

// Version asks the runtime for its name and version.
func (r *Runtime) Version(ctx context.Context) (kubecontainer.Version, error) {
	ctx = r.withLogger(ctx)
	v, err := r.runtime.Version(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("CRI Version: %w", err)
	}
	r.mu.Lock()
	r.name, r.apiVersion = v.RuntimeName, v.RuntimeApiVersion
	r.mu.Unlock()
	return parseVersion(v.RuntimeVersion)
}

// APIVersion is the CRI version learnt by the last Version call, as
// kuberuntime caches it ("v1"; the client refuses anything else at Dial).
func (r *Runtime) APIVersion() (kubecontainer.Version, error) {
	r.mu.Lock()
	v := r.apiVersion
	r.mu.Unlock()
	if v == "" {
		return nil, errors.New("runtime API version not known yet: call Version first")
	}
	return parseVersion(v)
}

// Status reports the runtime's conditions (RuntimeReady, NetworkReady).
func (r *Runtime) Status(ctx context.Context) (*kubecontainer.RuntimeStatus, error) {
	ctx = r.withLogger(ctx)
	resp, err := r.runtime.Status(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("CRI Status: %w", err)
	}
	s := &kubecontainer.RuntimeStatus{}
	for _, c := range resp.GetStatus().GetConditions() {
		s.Conditions = append(s.Conditions, kubecontainer.RuntimeCondition{
			Type: kubecontainer.RuntimeConditionType(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message,
		})
	}
	return s, nil
}

// runtimeVersion compares versions semantically (1.10 > 1.9) when they
// parse, as kuberuntime's newRuntimeVersion does (kuberuntime_manager.go:388);
// CRI API versions such as "v1" do not, and compare as strings.
type runtimeVersion struct {
	s string
	v *utilversion.Version // nil when s does not parse
}

func parseVersion(s string) (kubecontainer.Version, error) {
	if s == "" {
		return nil, errors.New("the runtime reported an empty version")
	}
	v, err := utilversion.ParseSemantic(s)
	if err != nil {
		v, _ = utilversion.ParseGeneric(s)
	}
	return runtimeVersion{s: s, v: v}, nil
}

func (r runtimeVersion) String() string { return r.s }

func (r runtimeVersion) Compare(other string) (int, error) {
	if r.v != nil {
		return r.v.Compare(other)
	}
	return strings.Compare(r.s, other), nil
}
