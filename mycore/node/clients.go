package node

import (
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
)

// The kubelet's default limits of its event client: eventRecordQPS 50,
// eventBurst 100 (pkg/kubelet/apis/config/v1beta1/defaults.go:117-122).
const (
	EventRecordQPS = 50
	EventBurst     = 100
)

// newNodeClient is the node's ordinary client, whose events go through a
// client of their own, as the kubelet splits them: its KubeClient has
// kubeAPIQPS/kubeAPIBurst, its EventClient a copy of the same config with
// eventRecordQPS/eventBurst (cmd/kubelet/app/server.go:727-730), so each
// has its own token bucket.
//
// Why it matters: one client-go clientset has one rate limiter for all
// its calls. With events on it, a hundred pods starting at once write
// some 300 events (Pulled, Created, Started for each) into the same
// 50-a-second bucket as the status manager's GET and PATCH of each pod:
// on the mock CRI, where the runtime answers at once, each pod's Running
// then waits behind its neighbours' events (issue 41: create → Running
// p50 7.9 s against the kubelet's 3.5 s, status posts at 12 a second).
//
// Only CoreV1().Events and EventsV1() are the event client's; everything
// else, the pod informer's list and watch included, is the ordinary one's.
func newNodeClient(cfg *rest.Config) (kubernetes.Interface, error) {
	main, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ev := rest.CopyConfig(cfg)
	// a limiter set on cfg would be shared by the copy: the events' own
	ev.QPS, ev.Burst, ev.RateLimiter = EventRecordQPS, EventBurst, nil
	events, err := kubernetes.NewForConfig(ev)
	if err != nil {
		return nil, err
	}
	return &nodeClient{Clientset: main, core: coreWithEvents{main.CoreV1(), events.CoreV1()}, events: events.EventsV1()}, nil
}

// nodeClient is a clientset whose event calls go through another one.
type nodeClient struct {
	*kubernetes.Clientset
	core   typedcorev1.CoreV1Interface
	events eventsv1.EventsV1Interface
}

func (c *nodeClient) CoreV1() typedcorev1.CoreV1Interface  { return c.core }
func (c *nodeClient) EventsV1() eventsv1.EventsV1Interface { return c.events }

// coreWithEvents is core/v1 with Events from the event client.
type coreWithEvents struct {
	typedcorev1.CoreV1Interface
	events typedcorev1.CoreV1Interface
}

func (c coreWithEvents) Events(namespace string) typedcorev1.EventInterface {
	return c.events.Events(namespace)
}
