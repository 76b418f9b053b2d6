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

// Cluster is what a run starts: a control plane, a scheduler and one node.
type Cluster struct {
	CP     *controlplane.ControlPlane
	Client kubernetes.Interface
	// NodeName is the node's name.
	NodeName string
	// NodeLog is the node's output.
	NodeLog string
	procs   []*child // started in order, stopped in reverse
	dir     string   // the control plane's folder
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

// StartCluster starts a fresh control plane in runDir/cluster on free
// ports, kube-scheduler, and the node of kind node named nodeName (its
// state in runDir/node-state), and waits until the node is Ready with no
// taint. runDir receives the scheduler's and the node's logs, the control
// plane's are in runDir/cluster/logs. On error nothing is left running.
func (l *Layout) StartCluster(ctx context.Context, rt Runtime, node, nodeName, runDir string, progress io.Writer) (_ *Cluster, err error) {
	if node != NodeMyKubelet && node != NodeRealKubelet {
		return nil, fmt.Errorf("NODE=%s: choose %s (lab 18, our kubelet) or %s (lab 01, the real kubelet)", node, NodeMyKubelet, NodeRealKubelet)
	}
	scheduler, err := l.Build("kube-scheduler", progress)
	if err != nil {
		return nil, err
	}
	nodeBin, err := l.Build(map[string]string{NodeMyKubelet: "mykubelet", NodeRealKubelet: "fakenode"}[node], progress)
	if err != nil {
		return nil, err
	}
	c := &Cluster{NodeName: nodeName, dir: filepath.Join(runDir, "cluster")}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	c.CP, err = controlplane.Start(ctx, controlplane.Config{
		Dir: c.dir, BinDir: l.ControlPlaneBinDir, ModuleRoot: l.Repo,
		Fresh: true, UnsafeNoFsync: true, Progress: progress,
		// upstream's default: a node is NotReady after 50 s without a lease
		NodeMonitorGracePeriod: 50 * time.Second,
	})
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

	c.NodeLog = filepath.Join(runDir, "node.log")
	var args, env []string
	switch node {
	case NodeMyKubelet:
		// its own state folder: its certificates and pod folders are not
		// those of a lab 18 the learner runs
		// a short shutdown grace: the e2e namespaces are gone by then
		args = []string{"--kubeconfig=" + admin, "--node-name=" + nodeName, "--port=0", "--runtime=containerd", "--shutdown-grace-period=5s"}
	case NodeRealKubelet:
		args = []string{"--kubeconfig=" + admin, "--node-name=" + nodeName, "--cri-endpoint=" + rt.Env.Endpoint}
	}
	env = []string{"LABS_STATE_DIR=" + filepath.Join(runDir, "node-state")}
	n, err := startChild("node", nodeBin, args, env, c.NodeLog, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, n)
	fmt.Fprintf(progress, "node %s (lab %s) starting, log %s\n", nodeName, node, c.NodeLog)
	if err := c.waitNodeReady(ctx, n, 3*time.Minute); err != nil {
		return nil, err
	}
	return c, nil
}

// waitNodeReady waits for the node to be Ready without taints (the node
// lifecycle controller's not-ready taint goes a moment after Ready).
func (c *Cluster) waitNodeReady(ctx context.Context, n *child, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "not registered"
	for {
		if n.exited() {
			return fmt.Errorf("the node exited while starting: see %s", c.NodeLog)
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
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
			return fmt.Errorf("node %s not usable after %s (%s): see %s", c.NodeName, timeout, last, c.NodeLog)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Stop stops the node (it removes its pods' containers), the scheduler
// and the control plane, in that order, and removes etcd's data (the logs
// stay).
func (c *Cluster) Stop() error {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
	var err error
	if c.CP != nil {
		err = c.CP.Stop()
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
