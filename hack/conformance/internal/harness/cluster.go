package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/controlplane"
)

// Node kinds a run can test.
const (
	// NodeMyKubelet is lab 18, our own kubelet, on the course's containerd.
	NodeMyKubelet = "18"
	// NodeRealKubelet is lab 01: the real kubelet (as kubemark runs it:
	// fake cAdvisor, stub container manager, fake probes) with the course's
	// containerd as its CRI.
	NodeRealKubelet = "01"
)

// DefaultNodeName is the name the tested node registers with. Its
// containers carry it (mykubelet.NodeLabel), so two runs on one containerd
// with different names leave each other's containers alone.
const DefaultNodeName = "conformance"

// Cluster is what a run starts: a control plane, a scheduler and the
// nodes, and in a full cluster kube-proxy and CoreDNS on them.
type Cluster struct {
	CP     *controlplane.ControlPlane
	Client kubernetes.Interface
	// NodeName is the first node's name, NodeLog its output.
	NodeName, NodeLog string
	// Nodes are every node's name and NodeLogs their outputs.
	Nodes, NodeLogs []string
	procs           []*child // started in order, stopped in reverse
	dir             string   // the control plane's folder
	host            *hostNetwork
}

// ClusterSpec says what StartCluster starts.
type ClusterSpec struct {
	// Node is the kind of node: NodeMyKubelet or NodeRealKubelet.
	Node string
	// Nodes are the nodes' names and runtimes, at least one.
	Nodes []NodeSpec
	// Full makes the cluster the certified suite expects: the apiserver on
	// this host's address (pods reach it through the "kubernetes"
	// Service), kube-proxy and CoreDNS running on the nodes, the nodes
	// told the cluster's DNS. Root only (harness/hostnet.go says why).
	Full bool
	// RunDir receives the logs; the control plane's folder is in it.
	RunDir string
	// Solved: lab 18 with its exercise's solution (Options.Solved).
	Solved bool
}

// NodeSpec is one node: its name and the containerd it runs pods on.
type NodeSpec struct {
	Name    string
	Runtime Runtime
}

// child is a process the run started, in its own process group, killed by
// the kernel if the run dies (Pdeathsig), stopped by pid.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// grace is how long it may take after SIGTERM (the node removes its
	// pods' containers then).
	grace time.Duration
}

func startChild(name, bin string, args, env []string, logPath string, grace time.Duration) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "==== %s starting at %s: %s %s\n", name, time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{}), grace: grace}
	go func() { cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits its grace, then kills its process group.
func (c *child) stop() {
	if c.exited() {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(c.grace):
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// StartCluster starts a fresh control plane in RunDir/cluster on free
// ports, kube-scheduler, and the nodes (each its state in
// RunDir/node-state-NAME), waits until every node is Ready with no taint,
// and in a full cluster starts the add-ons and waits for them. RunDir
// receives the scheduler's and the nodes' logs, the control plane's are
// in RunDir/cluster/logs. On error nothing is left running.
func (l *Layout) StartCluster(ctx context.Context, spec ClusterSpec, progress io.Writer) (_ *Cluster, err error) {
	node, runDir := spec.Node, spec.RunDir
	if node != NodeMyKubelet && node != NodeRealKubelet {
		return nil, fmt.Errorf("NODE=%s: choose %s (lab 18, our kubelet) or %s (lab 01, the real kubelet)", node, NodeMyKubelet, NodeRealKubelet)
	}
	if len(spec.Nodes) == 0 {
		return nil, errors.New("a cluster needs at least one node")
	}
	if spec.Solved && node != NodeMyKubelet {
		return nil, fmt.Errorf("SOLVED=1 is lab 18's exercise solved: it needs NODE=%s, not NODE=%s", NodeMyKubelet, node)
	}
	if node == NodeRealKubelet {
		// the real kubelet stops every pod of its runtime that it does not
		// run itself (it lists all sandboxes, kuberuntime_container.go:628-639,
		// and kills the unknown ones, kubelet_pods.go:1398-1419 in v1.36.3):
		// two lab 01 nodes on one containerd would kill each other's pods
		sock := map[string]string{}
		for _, ns := range spec.Nodes {
			if other, ok := sock[ns.Runtime.Sock]; ok {
				return nil, fmt.Errorf("NODE=%s: nodes %s and %s would share containerd %s, and the real kubelet stops every pod of its runtime it does not run; start one containerd per node (sudo scripts/containerd-up.sh --version 2.2,1.6)", node, other, ns.Name, ns.Runtime.Sock)
			}
			sock[ns.Runtime.Sock] = ns.Name
		}
	}
	if spec.Full {
		if err := l.RootOnly(); err != nil {
			return nil, err
		}
	}
	scheduler, err := l.Build("kube-scheduler", progress)
	if err != nil {
		return nil, err
	}
	program := map[string]string{NodeMyKubelet: "mykubelet", NodeRealKubelet: "fakenode"}[node]
	if spec.Solved {
		program = "mykubelet-solved"
	}
	nodeBin, err := l.Build(program, progress)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: filepath.Join(runDir, "cluster")}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	cpConfig := controlplane.Config{
		Dir: c.dir, BinDir: l.ControlPlaneBinDir, ModuleRoot: l.Repo,
		Fresh: true, UnsafeNoFsync: true, Progress: progress,
		// upstream's default: a node is NotReady after 50 s without a lease
		NodeMonitorGracePeriod: 50 * time.Second,
	}
	var add addons
	if spec.Full {
		kubeProxy, err := l.Build("kube-proxy", progress)
		if err != nil {
			return nil, err
		}
		if add.clusterCIDR, err = podCIDR(spec.Nodes); err != nil {
			return nil, err
		}
		c.host = &hostNetwork{kubeProxy: kubeProxy, podCIDR: add.clusterCIDR}
		if err := c.host.prepare(); err != nil {
			c.host.undo()
			c.host = nil
			return nil, err
		}
		ip, err := hostAddress()
		if err != nil {
			return nil, err
		}
		cpConfig.APIServerAddress = ip.String()
	}
	c.CP, err = controlplane.Start(ctx, cpConfig)
	if err != nil {
		return nil, err
	}
	if c.Client, err = c.CP.AdminClient(); err != nil {
		return nil, err
	}
	admin := c.CP.AdminKubeconfig()

	// lab 00 runs no scheduler: the e2e pods carry no nodeName
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s, err := startChild("kube-scheduler", scheduler, []string{
		"--kubeconfig=" + admin, "--authentication-kubeconfig=" + admin, "--authorization-kubeconfig=" + admin,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--leader-elect=false",
	}, nil, filepath.Join(runDir, "kube-scheduler.log"), 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, s)

	var started []*child
	usedAddr := map[string]bool{}
	for i, ns := range spec.Nodes {
		log := filepath.Join(runDir, "node.log")
		if len(spec.Nodes) > 1 {
			log = filepath.Join(runDir, "node-"+ns.Name+".log")
		}
		var args []string
		switch node {
		case NodeMyKubelet:
			// a short shutdown grace: the e2e namespaces are gone by then;
			// one node on loopback takes a free port (a lab 18 the learner
			// runs keeps 10250)
			args = []string{"--kubeconfig=" + admin, "--node-name=" + ns.Name, "--runtime=containerd",
				"--cri-endpoint=" + ns.Runtime.Env.Endpoint, "--shutdown-grace-period=5s"}
			if !spec.Full {
				args = append(args, "--port=0")
			}
			if ns.Runtime.Env.PodLogDir != "" {
				args = append(args, "--pod-logs-dir="+ns.Runtime.Env.PodLogDir)
			}
		case NodeRealKubelet:
			args = []string{"--kubeconfig=" + admin, "--node-name=" + ns.Name, "--cri-endpoint=" + ns.Runtime.Env.Endpoint}
		}
		if spec.Full {
			addr, err := nodeAddress(ns.Runtime)
			if err != nil {
				return nil, err
			}
			// each node on an address of its own, so each on the
			// kubelet's port: specs name 10250 ("[sig-network] Proxy
			// ... with explicit kubelet port"); two nodes on one
			// containerd share its bridge's address, and the second
			// takes a free port (both labs: --port=0)
			port := "10250"
			if usedAddr[addr] {
				port = "0"
			}
			usedAddr[addr] = true
			args = append(args, "--address="+addr, "--port="+port, "--cluster-dns="+ClusterDNS, "--cluster-domain="+ClusterDomain)
		}
		// its own state folder: its certificates and pod folders are not
		// those of a lab the learner runs, nor another node's
		stateDir := filepath.Join(runDir, "node-state")
		if i > 0 {
			stateDir += "-" + ns.Name
		}
		n, err := startChild("node "+ns.Name, nodeBin, args, []string{"LABS_STATE_DIR=" + stateDir}, log, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, n)
		started = append(started, n)
		c.Nodes, c.NodeLogs = append(c.Nodes, ns.Name), append(c.NodeLogs, log)
		fmt.Fprintf(progress, "node %s (lab %s, %s) starting, log %s\n", ns.Name, node, ns.Runtime.Env.Endpoint, log)
	}
	c.NodeName, c.NodeLog = c.Nodes[0], c.NodeLogs[0]
	for i, n := range started {
		if err := c.waitNodeReady(ctx, n, c.Nodes[i], c.NodeLogs[i], 3*time.Minute); err != nil {
			return nil, err
		}
	}
	if spec.Full {
		add.apiserver, add.proxyNode = c.CP.URL(), c.Nodes[0]
		if err := add.create(ctx, c.Client); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "kube-proxy (on %s) and CoreDNS starting\n", add.proxyNode)
		if err := add.waitReady(ctx, c.Client, 3*time.Minute); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "kube-proxy and CoreDNS ready\n")
	}
	return c, nil
}

// podCIDR is the one IPv4 range kube-proxy is told the pods are in (its
// clusterCIDR: traffic to a Service from outside it is masqueraded): the
// /16 of the first node's subnet, which must hold every node's.
func podCIDR(nodes []NodeSpec) (string, error) {
	var cidr *net.IPNet
	for _, n := range nodes {
		_, sub, err := net.ParseCIDR(n.Runtime.Env.Subnet)
		if err != nil {
			return "", fmt.Errorf("node %s: its containerd names no pod subnet (CNI_SUBNET %q in %s)", n.Name, n.Runtime.Env.Subnet, n.Runtime.Env.File)
		}
		if cidr == nil {
			cidr = &net.IPNet{IP: sub.IP.Mask(net.CIDRMask(16, 32)), Mask: net.CIDRMask(16, 32)}
		}
		if !cidr.Contains(sub.IP) {
			return "", fmt.Errorf("node %s: pod subnet %s is outside %s, the first node's /16", n.Name, sub, cidr)
		}
	}
	return cidr.String(), nil
}

// waitNodeReady waits for the node to be Ready without taints (the node
// lifecycle controller's not-ready taint goes a moment after Ready).
func (c *Cluster) waitNodeReady(ctx context.Context, n *child, name, log string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "not registered"
	for {
		if n.exited() {
			return fmt.Errorf("the node exited while starting: see %s", log)
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = "not Ready"
			for _, cond := range node.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
					last = fmt.Sprintf("taints %v", node.Spec.Taints)
					if len(node.Spec.Taints) == 0 {
						return nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not usable after %s (%s): see %s", name, timeout, last, log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Stop drains the cluster (every pod deleted and gone, so each node has
// stopped its containers: drain.go), stops the nodes, the scheduler and
// the control plane, in that order, puts this host's network back as a
// full cluster found it, and removes etcd's data (the logs stay).
func (c *Cluster) Stop() error {
	var err error
	if c.Client != nil && len(c.procs) > 0 {
		err = c.drain()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
	if c.host != nil {
		// the nodes stopped their pods, kube-proxy among them: its rules stay
		if herr := c.host.undo(); err == nil {
			err = herr
		}
		c.host = nil
	}
	if c.CP != nil {
		if cerr := c.CP.Stop(); err == nil {
			err = cerr
		}
		c.CP = nil
	}
	if c.dir != "" {
		os.RemoveAll(filepath.Join(c.dir, "etcd"))
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.New("no free port on 127.0.0.1: " + err.Error())
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FullClusterNodes is how many nodes a full cluster has: the certified
// suite wants at least two schedulable ones ("[sig-architecture]
// Conformance Tests should have at least two untainted nodes").
const FullClusterNodes = 2

// Full says whether the suite runs on a full cluster (Options.Full, or
// the certified and node suites).
func (o Options) full() bool {
	return o.Full || o.Suite == SuiteCertified || o.Suite == SuiteNode
}

// StartFor makes the images and starts the cluster o asks for: one node
// on the course's containerd, or a full cluster whose nodes take turns
// over the containerd flavours that are up (2.2 and 1.6 side by side:
// each its own bridge and subnet, pods of the two reach each other
// through this host).
func (l *Layout) StartFor(ctx context.Context, o Options) (*Cluster, error) {
	name := o.NodeName
	if name == "" {
		name = DefaultNodeName
	}
	spec := ClusterSpec{Node: o.Node, Full: o.full(), RunDir: o.RunDir, Solved: o.Solved}
	if !spec.Full {
		rt, err := FindRuntime()
		if err != nil {
			return nil, err
		}
		spec.Nodes = []NodeSpec{{Name: name, Runtime: rt}}
	} else {
		rts, err := FindRuntimes()
		if err != nil || len(rts) < FullClusterNodes {
			// one command on a fresh machine: a full run is root's in a
			// checkout root owns (RootOnly), so it may start the course's
			// containerds itself, a node on each
			if rts, err = l.startContainerds(o.Progress); err != nil {
				return nil, err
			}
		}
		for i := 0; i < FullClusterNodes; i++ {
			spec.Nodes = append(spec.Nodes, NodeSpec{Name: fmt.Sprintf("%s-%d", name, i+1), Runtime: rts[i%len(rts)]})
		}
	}
	seen := map[string]bool{}
	for _, n := range spec.Nodes {
		if seen[n.Runtime.Sock] {
			continue
		}
		seen[n.Runtime.Sock] = true
		if err := l.Images(n.Runtime, o.Images, o.Progress); err != nil {
			return nil, err
		}
		if spec.Full {
			if err := l.clusterImages(n.Runtime, o.Progress); err != nil {
				return nil, err
			}
		}
	}
	return l.StartCluster(ctx, spec, o.Progress)
}

// startContainerds runs scripts/containerd-up.sh --version 2.2,1.6 (as a
// full run's root; it reuses a flavour already up) and finds them.
func (l *Layout) startContainerds(progress io.Writer) ([]Runtime, error) {
	if err := l.RootOnly(); err != nil {
		return nil, err
	}
	up := filepath.Join(l.Repo, "scripts", "containerd-up.sh")
	fmt.Fprintf(progress, "starting the course's containerd 2.2 and 1.6, a node on each: %s --version 2.2,1.6\n", up)
	cmd := exec.Command(up, "--version", "2.2,1.6")
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s --version 2.2,1.6: %w", up, err)
	}
	return FindRuntimes()
}
