package fleetmode

import (
	"context"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/liveview"
	"kubelet-labs/mycore/fleet"
	"kubelet-labs/mycore/journal"
)

// viewPeriod is how often the grid is brought up to date.
const viewPeriod = 2 * time.Second

// serveView starts the live view of the fleet: a grid of its nodes —
// Ready and lease renewal as the apiserver has them (what kubectl get
// nodes shows), pods in each node's pod manager — and the fleet's rate of
// API requests. It watches Nodes and Leases with the admin kubeconfig (not
// the fleet's credential, whose requests are counted), and stops with ctx.
func serveView(ctx context.Context, addr string, admin *rest.Config, f *fleet.Fleet, calls *fleet.Calls, out *labenv.Printer) (stop func(), err error) {
	j := journal.New(journal.Options{Node: "fleet", Backlog: 4 * len(f.Names())})
	v, err := liveview.Start(liveview.Options{Address: addr, Title: "labs/18-mykubelet · fleet of " + strconv.Itoa(len(f.Names())) + " nodes", Fleet: j})
	if err != nil {
		return nil, err
	}
	out.Printf("view    %s   (the live view: every node of the fleet, in a browser)", v.URL())
	if fp := v.Fingerprint(); fp != "" {
		out.Printf("        TLS, a certificate made now: SHA-256 fingerprint %s", fp)
	}
	client, err := kubernetes.NewForConfig(rest.CopyConfig(admin))
	if err != nil {
		_ = v.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchFleet(ctx, client, f, calls, j)
	}()
	return func() { cancel(); <-done; j.Stop(); _ = v.Close() }, nil
}

// nodeState is what the grid shows of one node.
type nodeState struct {
	ready   bool
	renewed time.Time
	pods    int
}

func watchFleet(ctx context.Context, client kubernetes.Interface, f *fleet.Fleet, calls *fleet.Calls, j *journal.Bus) {
	ours := map[string]bool{}
	for _, n := range f.Names() {
		ours[n] = true
	}
	nodes := informers.NewSharedInformerFactory(client, 0)
	leases := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(v1.NamespaceNodeLease))
	nodeLister := nodes.Core().V1().Nodes().Lister()
	leaseLister := leases.Coordination().V1().Leases().Lister()
	nodes.Start(ctx.Done())
	leases.Start(ctx.Done())
	defer nodes.Shutdown()
	defer leases.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Core().V1().Nodes().Informer().HasSynced, leases.Coordination().V1().Leases().Informer().HasSynced) {
		return
	}
	last := map[string]nodeState{}
	tick := time.NewTicker(viewPeriod)
	defer tick.Stop()
	for {
		pods := f.PodsByNode()
		if ns, err := nodeLister.List(labels.Everything()); err == nil {
			for _, n := range ns {
				if !ours[n.Name] {
					continue
				}
				s := nodeState{ready: isReady(n), pods: pods[n.Name]}
				if l, err := leaseLister.Leases(v1.NamespaceNodeLease).Get(n.Name); err == nil {
					s.renewed = renewTime(l)
				}
				if old, ok := last[n.Name]; ok && old == s {
					continue
				}
				last[n.Name] = s
				j.Publish(journal.Entry{Kind: journal.Node, Node: n.Name, Call: "node", NodeReady: s.ready, NodeLeaseRenewed: s.renewed, NodePods: s.pods})
			}
		}
		j.Publish(journal.Entry{Kind: journal.Node, Call: "apiserver", Version: uint64(fleet.Total(calls.Counts()))})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func isReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
