// Package lease is our kubelet's node heartbeat: a Lease in kube-node-lease
// named after the node, renewed every quarter of its duration by the real
// lease controller, k8s.io/component-helpers/apimachinery/lease — the same
// code the kubelet runs (pkg/kubelet/kubelet.go, v1.36.3, NewMainKubelet:
// lease.NewController(... renewInterval ...)).
//
// The node lifecycle controller in kube-controller-manager reads the Lease's
// renewTime: a node whose lease was not renewed for
// --node-monitor-grace-period becomes Ready=Unknown.
//
// One departure, for fleet mode only (Config.ReadAfterUnknownUpdate): after
// a renewal whose answer was lost, read the Lease before the next one
// rather than meet a 409 Conflict (readback.go).
//
// Renewer (renewer.go, renew_step.go) is our own copy of that controller
// with every wait on an injected clock: the lease-renew build-it stage,
// judged by unit tests. The labs keep running upstream's.
package lease

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"
)

const (
	// RenewIntervalFraction is the kubelet's nodeLeaseRenewIntervalFraction
	// (pkg/kubelet/kubelet.go, v1.36.3): renew every quarter of the lease.
	RenewIntervalFraction = 0.25
	// DefaultLeaseDurationSeconds is the kubelet's nodeLeaseDurationSeconds
	// default: 40 s, so it renews every 10 s.
	DefaultLeaseDurationSeconds = 40
	// MinRenewInterval guards against a classic unit bug: multiplying the
	// number of seconds instead of the Duration, time.Duration(40*0.25),
	// is 10 ns — a hot loop of Lease updates.
	MinRenewInterval = 250 * time.Millisecond
)

// RenewInterval is how often a lease of leaseDuration is renewed. It
// multiplies the Duration (nanoseconds) by the fraction, as the kubelet does:
// time.Duration(float64(40*time.Second) * 0.25) = 10s. Multiplying the
// number of seconds instead, time.Duration(40*0.25), is 10 nanoseconds.
func RenewInterval(leaseDuration time.Duration) time.Duration {
	return time.Duration(float64(leaseDuration) * RenewIntervalFraction)
}

// Config is one node's lease.
type Config struct {
	// Client must authenticate as the node (system:node:NAME): the Node
	// authorizer lets a node touch only its own Lease.
	Client               kubernetes.Interface
	NodeName             string
	LeaseDurationSeconds int32 // default DefaultLeaseDurationSeconds
	// OnRepeatedFailure runs when an update fails more than once in a row
	// (the kubelet closes its connections there, to get a fresh one).
	OnRepeatedFailure func()
	Clock             clock.Clock // default: real time
	// ReadAfterUnknownUpdate: after an update whose answer was lost, read
	// the Lease before the next one instead of meeting a 409 Conflict
	// (see readBackClient). Fleet mode sets it; a kubelet does not.
	ReadAfterUnknownUpdate bool
}

// Durations returns the lease duration and renew interval, refusing values
// that would hammer the apiserver.
func (c Config) Durations() (lease, renew time.Duration, err error) {
	secs := c.LeaseDurationSeconds
	if secs == 0 {
		secs = DefaultLeaseDurationSeconds
	}
	if secs < 1 {
		return 0, 0, fmt.Errorf("node lease duration %ds: must be at least 1s", secs)
	}
	lease = time.Duration(secs) * time.Second
	renew = RenewInterval(lease)
	if renew < MinRenewInterval {
		return 0, 0, fmt.Errorf("renew interval %s is below %s: that is a hot loop, not a heartbeat", renew, MinRenewInterval)
	}
	return lease, renew, nil
}

// NewController builds the upstream lease controller for a node lease, with
// the kubelet's arguments: holder and lease name = node name, namespace
// kube-node-lease, owner reference to the Node (so the Lease is deleted with
// it). Run it with go c.Run(ctx); cancelling ctx stops renewing. (Do not call
// its Stop: that deletes the Lease, which a kubelet never does.)
//
// The controller retries by itself: a failed update is retried up to 5
// times at once, a failed get/create with backoff 200 ms → 7 s, and after
// that it waits for the next interval — it never gives up, never exits.
func NewController(ctx context.Context, c Config) (lease.Controller, time.Duration, error) {
	if c.Client == nil || c.NodeName == "" {
		return nil, 0, fmt.Errorf("lease: Client and NodeName are required")
	}
	leaseDur, renew, err := c.Durations()
	if err != nil {
		return nil, 0, err
	}
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	client := c.Client
	if c.ReadAfterUnknownUpdate {
		client = newReadBackClient(client, clk)
	}
	ctl := lease.NewController(clk, client, c.NodeName, int32(leaseDur/time.Second), c.OnRepeatedFailure,
		renew, c.NodeName, corev1.NamespaceNodeLease, setNodeOwner(ctx, c.Client, c.NodeName))
	return ctl, renew, nil
}

// setNodeOwner is the kubelet's SetNodeOwnerFunc (pkg/kubelet/util/
// nodelease.go, v1.36.3): until the Lease has an owner reference to the
// Node, look the Node up and add one. An error blocks only the creation.
func setNodeOwner(ctx context.Context, c kubernetes.Interface, nodeName string) func(*coordinationv1.Lease) error {
	return func(l *coordinationv1.Lease) error {
		if len(l.OwnerReferences) > 0 {
			return nil
		}
		node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: corev1.SchemeGroupVersion.Version, Kind: "Node", Name: nodeName, UID: node.UID,
		}}
		return nil
	}
}

// Renewal is one write of the Lease as seen on the wire.
type Renewal struct {
	Time   time.Time
	Verb   string // "create" or "update"
	Status int    // HTTP status, 0 if the request failed
	Err    error
}

// ObserveRenewals makes every client built from cfg report its writes of
// the node's Lease to fn: how the labs print each heartbeat without asking
// the apiserver.
func ObserveRenewals(cfg *rest.Config, nodeName string, fn func(Renewal)) {
	prefix := "/apis/coordination.k8s.io/v1/namespaces/" + corev1.NamespaceNodeLease + "/leases"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			verb := ""
			switch {
			case req.Method == http.MethodPut && req.URL.Path == prefix+"/"+nodeName:
				verb = "update"
			case req.Method == http.MethodPost && strings.TrimSuffix(req.URL.Path, "/") == prefix:
				verb = "create"
			}
			resp, err := rt.RoundTrip(req)
			if verb == "" {
				return resp, err
			}
			if err != nil {
				fn(Renewal{Time: time.Now(), Verb: verb, Err: err})
				return resp, err
			}
			// The write is done when client-go has read the answer: report on Close.
			resp.Body = &notifyingBody{ReadCloser: resp.Body, done: func(readErr error) {
				fn(Renewal{Time: time.Now(), Verb: verb, Status: resp.StatusCode, Err: readErr})
			}}
			return resp, nil
		})
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// notifyingBody calls done once, when the body is closed, with the error
// that ended reading it (nil after a clean EOF).
type notifyingBody struct {
	io.ReadCloser
	done    func(error)
	readErr error
	once    sync.Once
}

func (b *notifyingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.readErr = err
	}
	return n, err
}

func (b *notifyingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(b.readErr) })
	return err
}
