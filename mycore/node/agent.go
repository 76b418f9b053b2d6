package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"kubelet-labs/mycore/lease"
)

// AgentOptions configure the heartbeat half of our kubelet.
type AgentOptions struct {
	Node Config
	// LeaseDurationSeconds (kubelet: nodeLeaseDurationSeconds, default 40).
	LeaseDurationSeconds int32
	// StatusUpdateFrequency (kubelet: nodeStatusUpdateFrequency, default 10s).
	StatusUpdateFrequency time.Duration
	// Log receives failures (nil: silent). The lease controller itself logs
	// through klog.
	Log func(format string, args ...any)
	// OnRenewal is told about every write of the Lease.
	OnRenewal func(lease.Renewal)
	// OnStatusPatched is told about every status write.
	OnStatusPatched func(*v1.Node)
	// OurLeaseRenewer renews the Lease with mycore/lease's Renewer — the
	// code of the lease-renew build-it stage, so a learner's version runs
	// in the lab (go run -overlay …) — instead of the upstream lease
	// controller the kubelet runs. Both send the same requests.
	OurLeaseRenewer bool
}

// Agent registers a Node and keeps it alive: status updates plus the Lease.
// Start and Stop may be called repeatedly (lab 02 stops the heartbeat to
// watch the node go NotReady, then starts it again).
type Agent struct {
	opts AgentOptions
	// Client is the node's ordinary client, its events sent through a
	// limiter of their own (clients.go); Heartbeat is the one for status
	// and lease, as in the kubelet (cmd/kubelet/app/server.go, v1.36.3): no
	// client-side rate limit, a timeout of min(status update frequency,
	// lease duration), and connections it can close after repeated failures.
	Client, Heartbeat kubernetes.Interface
	RenewInterval     time.Duration
	LeaseDuration     time.Duration
	closeAll          func()

	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
}

// NewAgent builds the clients from the node's own credentials (nodeCfg
// must authenticate as system:node:NAME).
func NewAgent(nodeCfg *rest.Config, o AgentOptions) (*Agent, error) {
	if o.StatusUpdateFrequency == 0 {
		o.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	leaseDur, renew, err := (lease.Config{LeaseDurationSeconds: o.LeaseDurationSeconds}).Durations()
	if err != nil {
		return nil, err
	}
	client, err := newNodeClient(nodeCfg)
	if err != nil {
		return nil, err
	}
	hb := rest.CopyConfig(nodeCfg)
	hb.Timeout = min(o.StatusUpdateFrequency, leaseDur)
	hb.QPS = -1
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	hb.Dial = dialer.DialContext
	if o.OnRenewal != nil {
		lease.ObserveRenewals(hb, o.Node.Name, o.OnRenewal)
	}
	heartbeat, err := kubernetes.NewForConfig(hb)
	if err != nil {
		return nil, err
	}
	return &Agent{opts: o, Client: client, Heartbeat: heartbeat, RenewInterval: renew, LeaseDuration: leaseDur, closeAll: dialer.CloseAll}, nil
}

// Register registers the Node in the kubelet's order (see Register).
func (a *Agent) Register(ctx context.Context) (*v1.Node, bool, error) {
	return Register(ctx, a.Client, a.opts.Node.InitialNode(time.Now()))
}

// Start posts the status once (so the node is Ready when Start returns
// without error), then keeps status and lease going in the background.
func (a *Agent) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel != nil {
		return fmt.Errorf("node %s: heartbeat already running", a.opts.Node.Name)
	}
	logf := a.opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	reporter := &StatusReporter{
		Client: a.Heartbeat, Node: a.opts.Node, UpdateFrequency: a.opts.StatusUpdateFrequency,
		Log: logf, OnPatched: a.opts.OnStatusPatched,
	}
	if _, err := reporter.Sync(ctx); err != nil {
		return fmt.Errorf("post node status: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cfg := lease.Config{
		Client: a.Heartbeat, NodeName: a.opts.Node.Name, LeaseDurationSeconds: int32(a.LeaseDuration / time.Second),
		OnRepeatedFailure: func() {
			if ctx.Err() != nil {
				return // we are stopping: the failures are our own cancellation
			}
			logf("heartbeat failed repeatedly: closing the connections to the apiserver, the next try dials a new one")
			a.closeAll()
		},
	}
	var ctl interface{ Run(context.Context) }
	var err error
	if a.opts.OurLeaseRenewer {
		ctl, err = lease.NewRenewer(ctx, cfg)
	} else {
		ctl, _, err = lease.NewController(ctx, cfg)
	}
	if err != nil {
		cancel()
		return err
	}
	a.cancel, a.stopped = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ctl.Run(ctx) }()
	go func() { defer wg.Done(); reporter.Run(ctx) }()
	go func(done chan struct{}) { wg.Wait(); close(done) }(a.stopped)
	return nil
}

// Stop ends status updates and lease renewals, like a kubelet that died:
// nothing is deleted. It returns when both loops have ended.
func (a *Agent) Stop() {
	a.mu.Lock()
	cancel, stopped := a.cancel, a.stopped
	a.cancel, a.stopped = nil, nil
	a.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-stopped
}
