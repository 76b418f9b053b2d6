package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/mycore/bootstrap"
)

// The kubelet's default client rate limits.
const (
	KubeAPIQPS   = 50
	KubeAPIBurst = 100
)

// JoinOptions describe a lab node to bring up. Every lab after lab 05 that
// needs "a node that is Ready" joins through Join, so they all do it the
// same way lab 05 teaches.
type JoinOptions struct {
	// Admin is the lab's kubeconfig (admin): it names the server and its
	// CA, and makes the bootstrap token unless Token is given.
	Admin *rest.Config
	// Token "ID.SECRET" to bootstrap with (e.g. lab 03's); empty: a new
	// one is made with Admin.
	Token string
	// Name of the node; validated (DNS-1123 subdomain) before anything else.
	Name string
	// Dir is the node's folder: its key, certificates and kubeconfig go
	// there (the labs pass nodes/NAME in their state folder). Required.
	Dir string
	// Lab is the value of the LabLabel label, e.g. "08-static-pod".
	Lab string
	// LeaseDurationSeconds of the node's Lease; 0 = the kubelet's 40.
	LeaseDurationSeconds int32
	// NoTaint registers the node without NoRuntimeTaint. The default keeps
	// it, as lab 05 does: a real scheduler must not place pods on a node
	// that cannot run them. Pods in the labs name their node through
	// spec.nodeName, which the taint does not stop.
	NoTaint bool
	// InternalIP the node reports (default 127.0.0.1), DaemonPort the port
	// of its server and DeclaredFeatures what that server supports: see
	// Config. A node without a server leaves them empty.
	InternalIP       string
	DaemonPort       int32
	DeclaredFeatures []string
	// ContainerRuntimeVersion is the node's runtime, "NAME://VERSION" (see
	// Config and ContainerRuntimeVersion); "" for a node without one.
	ContainerRuntimeVersion string
	// Timeout bounds the join (certificate issued, node Ready); 0 = 2m.
	Timeout time.Duration
	// Log receives one human line per step (nil: silent).
	Log func(format string, args ...any)
}

// Joined is a node that is registered and sending heartbeats.
type Joined struct {
	// Config and Client authenticate as system:node:NAME.
	Config *rest.Config
	Client kubernetes.Interface
	// Node as registered: its UID is what a mirror pod's ownerRef needs.
	Node *v1.Node
	// Dir is the node's state folder (credentials and whatever the lab
	// keeps there, e.g. static pod manifests).
	Dir   string
	Agent *Agent
	// Bootstrap tells how the credentials were obtained (Skipped: they
	// were still valid).
	Bootstrap *bootstrap.JoinResult

	stopOnce sync.Once
}

// Join brings a node up as lab 05 does: TLS bootstrap (skipped while the
// credentials in the node's state folder are valid), Node created only if
// it does not exist, status posted, then status updates and the Lease in
// the background. It returns once the Node is Ready and its Lease exists.
//
// The heartbeats run until ctx ends or Stop is called, so ctx should live
// as long as the node; Timeout bounds only the join itself.
func Join(ctx context.Context, o JoinOptions) (*Joined, error) {
	if o.Admin == nil {
		return nil, fmt.Errorf("join: no admin kubeconfig")
	}
	if err := bootstrap.ValidateNodeName(o.Name); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if o.Dir == "" {
		return nil, fmt.Errorf("node.Join: JoinOptions.Dir (the node's folder) is required")
	}
	dir := o.Dir
	jctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	res, err := bootstrap.Join(jctx, bootstrap.JoinOptions{
		Admin: o.Admin, Token: o.Token, NodeName: o.Name, Dir: dir, Approve: bootstrap.ApproveAuto, Timeout: o.Timeout, Log: logf,
	})
	if err != nil {
		return nil, err
	}
	nodeCfg, err := res.Creds.RESTConfig()
	if err != nil {
		return nil, err
	}
	// The kubelet's client limits: kubeAPIQPS 50, kubeAPIBurst 100
	// (pkg/kubelet/apis/config/v1beta1/defaults.go:221-225, applied in
	// cmd/kubelet/app/server.go:1130-1131). client-go's default, 5 QPS,
	// would make a node that writes a few pods at once wait 200 ms a call.
	nodeCfg.QPS, nodeCfg.Burst = KubeAPIQPS, KubeAPIBurst

	// From here on, everything is done as system:node:NAME.
	cfg := Config{Name: o.Name, Labels: map[string]string{LabLabel: o.Lab},
		InternalIP: o.InternalIP, DaemonPort: o.DaemonPort, DeclaredFeatures: o.DeclaredFeatures,
		ContainerRuntimeVersion: o.ContainerRuntimeVersion}
	if !o.NoTaint {
		cfg.Taints = []v1.Taint{NoRuntimeTaint}
	}
	agent, err := NewAgent(nodeCfg, AgentOptions{Node: cfg, LeaseDurationSeconds: o.LeaseDurationSeconds, Log: logf})
	if err != nil {
		return nil, err
	}
	n, created, err := agent.Register(jctx)
	if err != nil {
		return nil, err
	}
	if created {
		logf("register    Node %s created (uid %s)", n.Name, n.UID)
	} else {
		logf("register    Node %s already exists (uid %s): not created again", n.Name, n.UID)
	}
	if err := agent.Start(ctx); err != nil {
		return nil, err
	}
	j := &Joined{Config: nodeCfg, Client: agent.Client, Node: n, Dir: dir, Agent: agent, Bootstrap: res}

	// Ready as everybody sees it: the Node's Ready condition, and a Lease.
	err = wait.PollUntilContextCancel(jctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := agent.Client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if c := GetCondition(&got.Status, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue {
			return false, nil
		}
		if _, err := agent.Heartbeat.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, o.Name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		j.Node = got
		return true, nil
	})
	if err != nil {
		j.Stop()
		return nil, fmt.Errorf("node %s did not become Ready with a Lease within %s: %w", o.Name, o.Timeout, err)
	}
	logf("ready       node %s is Ready; heartbeats every %s (lease %s)", o.Name, agent.RenewInterval, agent.LeaseDuration)
	return j, nil
}

// Stop ends the heartbeats, like a kubelet that died: the Node and its
// Lease stay. Safe to call more than once.
func (j *Joined) Stop() {
	j.stopOnce.Do(j.Agent.Stop)
}
