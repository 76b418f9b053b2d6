// Lab 05 joins a node to the cluster the way a kubelet does, end to end:
// bootstrap token → CSR (approved by the controller-manager, or by you with
// --approve=manual) → node credentials → Node registered (created; on
// AlreadyExists read instead) → status posted
// with Ready=True → the real lease controller renewing every 10 s. It keeps
// the node alive until Ctrl-C; `kubectl get nodes` shows it Ready.
//
//	go run ./labs/05-register-node
//	go run ./labs/05-register-node --approve=manual   # you run kubectl certificate approve
package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/lease"
	"kubelet-labs/mycore/node"
)

type options struct {
	kubeconfig     string
	nodeName       string
	token          string
	tokenFile      string
	leaseSeconds   int
	statusEvery    time.Duration
	forceBootstrap bool
	timeout        time.Duration
	noTaint        bool
	approve        string
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "05-register-node",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.nodeName, "node-name", labnames.Node05, "name of the node to join")
			labenv.RegisterTokenFlags(fs, &o.token, &o.tokenFile, "bootstrap token from lab 03 (default: make one, 10 min; in the auto-approve group only for --approve=auto)")
			fs.StringVar(&o.approve, "approve", "auto", "who approves the node's CSR: auto (the controller-manager), admin (the lab, as kubectl certificate approve does) or manual (you run the kubectl certificate approve command it prints)")
			fs.IntVar(&o.leaseSeconds, "node-lease-duration-seconds", lease.DefaultLeaseDurationSeconds, "lease duration; the lease is renewed every quarter of it (kubelet: nodeLeaseDurationSeconds)")
			fs.DurationVar(&o.statusEvery, "node-status-update-frequency", node.DefaultStatusUpdateFrequency, "how often the node status is checked (written only on change or every 5m)")
			fs.BoolVar(&o.forceBootstrap, "force-bootstrap", false, "request a new certificate even if nodes/NAME in the state folder holds valid credentials")
			fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
			fs.BoolVar(&o.noTaint, "no-taint", false, "register without the "+node.NoRuntimeTaint.Key+" NoSchedule taint (on kind, pods could then be scheduled here and stay Pending)")
		},
		Check: func() error { _, err := o.check(); return err },
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

// check refuses flags that make no sense before the cluster is contacted,
// and returns who approves.
func (o options) check() (bootstrap.ApproveMode, error) {
	if o.leaseSeconds < 1 || o.leaseSeconds > 3600 {
		return "", fmt.Errorf("--node-lease-duration-seconds=%d: want 1..3600 (the kubelet's default is 40)", o.leaseSeconds)
	}
	if o.statusEvery <= 0 || o.timeout <= 0 {
		return "", fmt.Errorf("--node-status-update-frequency and --timeout must be positive")
	}
	approve, err := bootstrap.ParseApproveMode(o.approve)
	if err != nil {
		return "", err
	}
	if _, err := labenv.ResolveToken(o.token, o.tokenFile); err != nil {
		return "", err
	}
	// Before any folder is made from it: "../x" would escape nodes/.
	return approve, labenv.CheckNodeName(o.nodeName)
}

// joined is what the test gets once the node is Ready.
type joined struct {
	join    *bootstrap.JoinResult
	agent   *node.Agent
	created bool
	elapsed time.Duration // start (token) → Ready
}

func run(ctx context.Context, o options, out *labenv.Printer, onReady func(*joined)) error {
	start := time.Now()
	approve, err := o.check()
	if err != nil {
		return err
	}
	token, err := labenv.ResolveToken(o.token, o.tokenFile)
	if err != nil {
		return err
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return err
	}
	at := func() string { return fmt.Sprintf("[%5.2fs]", time.Since(start).Seconds()) }
	jctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	out.Printf("joining %s as node %s", cfg.Host, o.nodeName)
	out.Printf("%s TLS bootstrap", at())
	res, err := bootstrap.Join(jctx, bootstrap.JoinOptions{
		Admin: cfg, Token: token, NodeName: o.nodeName, Dir: dir, Approve: approve,
		Timeout: o.timeout, Force: o.forceBootstrap,
		Log: out.Indented(),
	})
	if err != nil {
		return err
	}
	nodeCfg, err := res.Creds.RESTConfig()
	if err != nil {
		return err
	}

	// From here on, everything is done as system:node:NAME.
	cfgNode := node.Config{Name: o.nodeName, Labels: map[string]string{node.LabLabel: "05-register-node"}}
	if !o.noTaint {
		cfgNode.Taints = []v1.Taint{node.NoRuntimeTaint}
	}
	var last time.Time
	var lastMu sync.Mutex
	agent, err := node.NewAgent(nodeCfg, node.AgentOptions{
		Node: cfgNode, LeaseDurationSeconds: int32(o.leaseSeconds), StatusUpdateFrequency: o.statusEvery,
		Log: func(f string, a ...any) { out.Printf("  "+time.Now().Format("15:04:05.0")+" "+f, a...) },
		OnRenewal: func(r lease.Renewal) {
			lastMu.Lock()
			gap := ""
			if !last.IsZero() {
				gap = fmt.Sprintf(" (+%.1fs)", r.Time.Sub(last).Seconds())
			}
			if r.Err == nil && r.Status < 300 {
				last = r.Time
			}
			lastMu.Unlock()
			switch {
			case r.Err != nil:
				out.Printf("  %s lease %s failed: %v (the lease controller retries)", r.Time.Format("15:04:05.0"), r.Verb, r.Err)
			case r.Status >= 300:
				out.Printf("  %s lease %s failed: HTTP %d (the lease controller retries)", r.Time.Format("15:04:05.0"), r.Verb, r.Status)
			default:
				out.Printf("  %s lease %sd%s", r.Time.Format("15:04:05.0"), r.Verb, gap)
			}
		},
		OnStatusPatched: func(n *v1.Node) {
			out.Printf("  %s status posted: %s", time.Now().Format("15:04:05.0"), conditions(n))
		},
	})
	if err != nil {
		return err
	}
	n, created, err := agent.Register(jctx)
	if err != nil {
		return err
	}
	if created {
		out.Printf("%s register    Node %s created", at(), n.Name)
	} else {
		out.Printf("%s register    Node %s: create said AlreadyExists (registered %s), so we read it and go on with it", at(), n.Name, n.CreationTimestamp.Format(time.RFC3339))
	}
	out.Printf("%s heartbeat   status every %s (written on change, or every %s); lease kube-node-lease/%s: %s, renewed every %s (= %.2f × %s)",
		at(), o.statusEvery, node.DefaultStatusReportFrequency, o.nodeName, agent.LeaseDuration, agent.RenewInterval, lease.RenewIntervalFraction, agent.LeaseDuration)
	if err := agent.Start(ctx); err != nil {
		return err
	}
	defer agent.Stop()

	// Ready as everybody sees it: the Node's Ready condition, and a Lease.
	err = wait.PollUntilContextCancel(jctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := agent.Client.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := node.GetCondition(&n.Status, v1.NodeReady)
		if c == nil || c.Status != v1.ConditionTrue {
			return false, nil
		}
		_, err = agent.Heartbeat.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, o.nodeName, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("node %s did not become Ready with a Lease within %s: %w", o.nodeName, o.timeout, err)
	}
	elapsed := time.Since(start)
	how := "token → CSR → credentials → Node → status → Lease"
	if res.Skipped {
		how = "TLS bootstrap skipped: credentials were valid"
	}
	out.Printf("node %s is Ready, %s after start (%s)", o.nodeName, elapsed.Round(10*time.Millisecond), how)
	out.Printf("  kubectl get nodes %s -o wide", o.nodeName)
	out.Printf("  kubectl get lease -n kube-node-lease %s -w", o.nodeName)
	out.Printf("heartbeats (Ctrl-C to stop; the node turns Ready=Unknown one node-monitor-grace-period after the last):")
	if onReady != nil {
		onReady(&joined{join: res, agent: agent, created: created, elapsed: elapsed})
	}

	<-ctx.Done()
	agent.Stop()
	out.Printf("stopped at %s: no more heartbeats. The Node and its Lease stay, as when a kubelet dies.", time.Now().Format("15:04:05"))
	return nil
}

func conditions(n *v1.Node) string {
	var parts []string
	for _, c := range n.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return strings.Join(parts, " ")
}
