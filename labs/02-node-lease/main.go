// Lab 02 shows why a node is Ready: because it keeps renewing its Lease.
// It joins a node (lab 05's code), renews the lease with the real lease
// controller, then stops — as if the kubelet died — and times how long the
// node lifecycle controller takes to mark it Ready=Unknown. Then it resumes
// and posts Ready=True again, as a restarted kubelet would.
//
//	go run ./labs/02-node-lease
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/lease"
	"kubelet-labs/mycore/node"
)

type options struct {
	kubeconfig   string
	nodeName     string
	token        string
	tokenFile    string
	leaseSeconds int
	renewFor     time.Duration
	resume       bool
	timeout      time.Duration
	renewer      string
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "02-node-lease",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.nodeName, "node-name", labnames.Node02, "the node; joins like lab 05 if it has no credentials yet")
			labenv.RegisterTokenFlags(fs, &o.token, &o.tokenFile, "bootstrap token from lab 03 for the join (default: make one)")
			fs.IntVar(&o.leaseSeconds, "node-lease-duration-seconds", lease.DefaultLeaseDurationSeconds, "lease duration; renewed every quarter of it. Keep the controller-manager's --node-monitor-grace-period well above the renew interval")
			fs.DurationVar(&o.renewFor, "renew-for", 25*time.Second, "how long to renew before stopping")
			fs.BoolVar(&o.resume, "resume", true, "after the node went Unknown, start renewing again and wait for Ready=True")
			fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for each transition")
			fs.StringVar(&o.renewer, "lease-renewer", "kubelet", "who renews the Lease: kubelet (upstream's lease controller, as the kubelet runs it) or ours (mycore/lease's Renewer: the lease-renew build-it stage, docs/build-it.md)")
		},
		Check: func() error { return o.check() },
		Run: func(ctx context.Context, out *labenv.Printer) error {
			_, err := run(ctx, o, out)
			return err
		},
	})
}

// check refuses flags that make no sense, before anything starts.
func (o options) check() error {
	if o.leaseSeconds < 1 || o.leaseSeconds > 3600 {
		return fmt.Errorf("--node-lease-duration-seconds=%d: want 1..3600 (the kubelet's default is 40)", o.leaseSeconds)
	}
	if o.renewer != "" && o.renewer != "kubelet" && o.renewer != "ours" {
		return fmt.Errorf("--lease-renewer=%q: want kubelet or ours", o.renewer)
	}
	if o.renewFor < 0 || o.timeout <= 0 {
		return fmt.Errorf("--renew-for must not be negative and --timeout must be positive")
	}
	if _, err := labenv.ResolveToken(o.token, o.tokenFile); err != nil {
		return err
	}
	// Before the name becomes a folder in the state folder.
	return labenv.CheckNodeName(o.nodeName)
}

// timeline is what the lab measured.
type timeline struct {
	RenewInterval time.Duration
	Renewals      []time.Time // lease writes seen before the stop
	StoppedAt     time.Time
	LastRenew     time.Time // the Lease's spec.renewTime after the stop
	UnknownAt     time.Time // when we saw Ready leave True
	Unknown       v1.NodeCondition
	ResumedAt     time.Time
	ReadyAt       time.Time
}

// NotReadyAfter is the time from the last renewal to Ready=Unknown.
func (t *timeline) NotReadyAfter() time.Duration { return t.UnknownAt.Sub(t.LastRenew) }

func clock(t time.Time) string { return t.Format("15:04:05.0") }

func run(ctx context.Context, o options, out *labenv.Printer) (*timeline, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	token, err := labenv.ResolveToken(o.token, o.tokenFile)
	if err != nil {
		return nil, err
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return nil, err
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return nil, err
	}

	// 1. A node with its own credentials (lab 05's join; skipped when the
	// credentials in .labs/nodes/NAME are still good).
	res, err := bootstrap.Join(ctx, bootstrap.JoinOptions{
		Admin: cfg, Token: token, NodeName: o.nodeName, Dir: dir, Approve: bootstrap.ApproveAuto, Timeout: o.timeout,
	})
	if err != nil {
		return nil, err
	}
	how := "joined just now (TLS bootstrap)"
	if res.Skipped {
		how = "credentials from an earlier run"
	}
	out.Printf("node %s: %s, %s", o.nodeName, res.Node.Username, how)
	nodeCfg, err := res.Creds.RESTConfig()
	if err != nil {
		return nil, err
	}

	tl := &timeline{}
	var mu sync.Mutex
	renewed := make(chan time.Time, 1)
	agent, err := node.NewAgent(nodeCfg, node.AgentOptions{
		Node:                 node.Config{Name: o.nodeName, Labels: map[string]string{node.LabLabel: "02-node-lease"}, Taints: []v1.Taint{node.NoRuntimeTaint}},
		LeaseDurationSeconds: int32(o.leaseSeconds),
		OurLeaseRenewer:      o.renewer == "ours",
		Log:                  func(f string, a ...any) { out.Printf("  "+clock(time.Now())+" "+f, a...) },
		OnRenewal: func(r lease.Renewal) {
			if errors.Is(r.Err, context.Canceled) {
				return // we stopped it
			}
			if r.Err != nil || r.Status >= 300 {
				out.Printf("  %s lease %s failed (%v, HTTP %d): the lease controller retries", clock(r.Time), r.Verb, r.Err, r.Status)
				return
			}
			mu.Lock()
			tl.Renewals = append(tl.Renewals, r.Time)
			mu.Unlock()
			select {
			case renewed <- r.Time:
			default:
			}
			out.Printf("  %s lease %sd", clock(r.Time), r.Verb)
		},
		OnStatusPatched: func(n *v1.Node) {
			out.Printf("  %s status posted by the node: %s", clock(time.Now()), conditions(n))
		},
	})
	if err != nil {
		return nil, err
	}
	tl.RenewInterval = agent.RenewInterval
	if _, created, err := agent.Register(ctx); err != nil {
		return nil, err
	} else if created {
		out.Printf("  Node %s created", o.nodeName)
	}

	// 2. Heartbeat for a while.
	out.Printf("heartbeat: lease kube-node-lease/%s of %s, renewed every %s (0.25 × %s); for %s",
		o.nodeName, agent.LeaseDuration, agent.RenewInterval, agent.LeaseDuration, o.renewFor)
	if err := agent.Start(ctx); err != nil {
		return nil, err
	}
	defer agent.Stop()
	if _, _, err := waitReady(ctx, admin, o.nodeName, o.timeout, isTrue); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.renewFor):
	}

	// 3. Stop, as if the kubelet died, and watch the control plane notice.
	agent.Stop()
	tl.StoppedAt = time.Now()
	l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, o.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the lease: %w", err)
	}
	tl.LastRenew = l.Spec.RenewTime.Time
	out.Printf("%s stop: no more lease renewals or status updates (as if the kubelet died)", clock(tl.StoppedAt))
	out.Printf("           lease last renewed at %s (spec.renewTime)", clock(tl.LastRenew))
	out.Printf("           waiting for the node lifecycle controller (kube-controller-manager, --node-monitor-grace-period)...")
	c, at, err := waitReady(ctx, admin, o.nodeName, o.timeout, func(c *v1.NodeCondition) bool { return !isTrue(c) })
	if err != nil {
		return nil, fmt.Errorf("%w (is kube-controller-manager running? its node lifecycle controller marks nodes Unknown)", err)
	}
	tl.UnknownAt, tl.Unknown = at, *c
	out.Printf("%s Ready=%s  %s: %s  — %.1fs after the last renewal", clock(at), c.Status, c.Reason, c.Message, tl.NotReadyAfter().Seconds())
	if n, err := admin.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{}); err == nil {
		out.Printf("           conditions now: %s", conditions(n))
	}

	if !o.resume {
		out.Printf("summary: lease last renewed at %s; node Ready=%s at %s (+%.1fs)", clock(tl.LastRenew), c.Status, clock(at), tl.NotReadyAfter().Seconds())
		return tl, nil
	}

	// 4. Resume: the node writes Ready=True itself — the lifecycle
	// controller only ever sets Unknown.
	tl.ResumedAt = time.Now()
	out.Printf("%s resume: status loop and lease controller start again", clock(tl.ResumedAt))
	if err := agent.Start(ctx); err != nil {
		return nil, err
	}
	c, at, err = waitReady(ctx, admin, o.nodeName, o.timeout, isTrue)
	if err != nil {
		return nil, err
	}
	tl.ReadyAt = at
	out.Printf("%s Ready=True  %s: %s  — %.1fs after resuming", clock(at), c.Reason, c.Message, at.Sub(tl.ResumedAt).Seconds())
	out.Printf("           (nobody else sets it back: the kubelet must post Ready=True itself)")
	// Let the resumed lease controller finish its first renewal before we stop.
	for waiting := true; waiting; {
		select {
		case t := <-renewed:
			waiting = t.Before(tl.ResumedAt)
		case <-time.After(agent.RenewInterval + 5*time.Second):
			waiting = false
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	agent.Stop()
	out.Printf("summary: lease last renewed at %s; node Ready=%s at %s (+%.1fs); Ready=True again %.1fs after the heartbeat resumed",
		clock(tl.LastRenew), tl.Unknown.Status, clock(tl.UnknownAt), tl.NotReadyAfter().Seconds(), tl.ReadyAt.Sub(tl.ResumedAt).Seconds())
	return tl, nil
}

func isTrue(c *v1.NodeCondition) bool { return c != nil && c.Status == v1.ConditionTrue }

// waitReady watches the Node (as admin: the observer, like kubectl get
// nodes -w) until it has a Ready condition that satisfies ok, and returns
// it with the time it was seen. A Node without a Ready condition (just
// created, or edited by hand) never matches.
func waitReady(parent context.Context, admin kubernetes.Interface, name string, timeout time.Duration, ok func(*v1.NodeCondition) bool) (*v1.NodeCondition, time.Time, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return admin.CoreV1().Nodes().List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return admin.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	var found *v1.NodeCondition
	var at time.Time
	_, err := watchtools.UntilWithSync(ctx, lw, &v1.Node{}, nil, func(ev watch.Event) (bool, error) {
		n, isNode := ev.Object.(*v1.Node)
		if !isNode || ev.Type == watch.Deleted {
			return false, nil
		}
		c := node.GetCondition(&n.Status, v1.NodeReady)
		if c == nil {
			return false, nil // not posted yet (or removed): nothing to judge
		}
		if ok(c) {
			found, at = c.DeepCopy(), time.Now()
			return true, nil
		}
		return false, nil
	})
	switch {
	case found != nil:
		return found, at, nil
	case parent.Err() != nil:
		return nil, time.Time{}, parent.Err()
	case ctx.Err() != nil:
		return nil, time.Time{}, fmt.Errorf("node %s: the Ready condition did not change as expected within %s", name, timeout)
	}
	return nil, time.Time{}, err
}

func conditions(n *v1.Node) string {
	var parts []string
	for _, c := range n.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return strings.Join(parts, " ")
}
