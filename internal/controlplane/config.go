package controlplane

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultNodeMonitorGracePeriod is how long the node lifecycle controller
// waits for a heartbeat (the node's Lease) before it marks the node
// Ready=Unknown. Upstream's default is 50 s; labs want a shorter wait, but it
// must stay well above the lease renew interval: the kubelet renews every
// 10 s (0.25 × 40 s), and with an 8 s grace we measured nodes flapping
// NotReady between beats, while 40 s never flapped. 30 s leaves three
// renewals of slack and makes the NotReady demo of lab 02 take half a minute.
const DefaultNodeMonitorGracePeriod = 30 * time.Second

// Default ports for lab 00. Tests pass 0 to get free ports, so they never
// clash with a running lab 00.
const (
	DefaultAPIServerPort         = 6443
	DefaultEtcdPort              = 2379
	DefaultEtcdPeerPort          = 2380
	DefaultControllerManagerPort = 10257
)

// Config says where a control plane keeps its files and which ports it uses.
type Config struct {
	// Dir holds pki/, etcd/, logs/ and the component kubeconfigs.
	Dir string
	// BinDir holds the built binaries; ModuleRoot is the go.mod they are built from.
	BinDir     string
	ModuleRoot string
	// AdminKubeconfig is where the admin kubeconfig is written
	// (default Dir/admin.kubeconfig).
	AdminKubeconfig string

	// Ports on 127.0.0.1; 0 picks a free one.
	APIServerPort, EtcdPort, EtcdPeerPort, ControllerManagerPort int

	NodeMonitorGracePeriod time.Duration
	// Fresh wipes etcd's data before starting: an empty cluster.
	Fresh bool
	// UnsafeNoFsync makes etcd skip fsync: much faster on slow disks, loses
	// data on a crash. For tests only.
	UnsafeNoFsync bool

	// Progress receives one human line per step (builds, starts); nil = discard.
	Progress io.Writer
}

func (c *Config) setDefaults() error {
	if c.Dir == "" || c.BinDir == "" || c.ModuleRoot == "" {
		return fmt.Errorf("controlplane: Dir, BinDir and ModuleRoot are required")
	}
	// Absolute, so the children's command lines name the state folder the
	// way recovery looks for it (usesStateFolder).
	for _, p := range []*string{&c.Dir, &c.BinDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if c.AdminKubeconfig == "" {
		c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	}
	if c.NodeMonitorGracePeriod == 0 {
		c.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	for _, p := range []*int{&c.APIServerPort, &c.EtcdPort, &c.EtcdPeerPort, &c.ControllerManagerPort} {
		if *p != 0 {
			continue
		}
		free, err := freePort()
		if err != nil {
			return err
		}
		*p = free
	}
	return nil
}

func (c *Config) pkiDir() string  { return filepath.Join(c.Dir, "pki") }
func (c *Config) etcdDir() string { return filepath.Join(c.Dir, "etcd") }
func (c *Config) logDir() string  { return filepath.Join(c.Dir, "logs") }

// freePort asks the kernel for an unused loopback port. Another process can
// take it before we bind; Start reports that as "port in use", and the test
// harness retries.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortsFree fails with a message that names the component, before
// anything starts, when one of our ports is taken.
func (c *Config) checkPortsFree() error {
	for _, p := range []struct {
		port int
		who  string
		flag string
	}{
		{c.EtcdPort, "etcd (client)", "--etcd-port"},
		{c.EtcdPeerPort, "etcd (peer)", "--etcd-peer-port"},
		{c.APIServerPort, "kube-apiserver", "--apiserver-port"},
		{c.ControllerManagerPort, "kube-controller-manager", "--controller-manager-port"},
	} {
		// A process that is exiting (a previous run just stopped, a leftover
		// just killed) can hold its port for a moment: retry briefly.
		var err error
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))); err == nil {
				l.Close()
				break
			}
			if time.Now().After(deadline) {
				return &PortInUseError{Port: p.port, Component: p.who, Flag: p.flag, Err: err}
			}
		}
	}
	return nil
}

// PortInUseError says which component's port is taken and how to choose another.
type PortInUseError struct {
	Port      int
	Component string
	Flag      string
	Err       error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d for %s is already in use on 127.0.0.1 (%v); find the owner with `ss -ltnp 'sport = :%d'`, stop it, or pick another port with %s",
		e.Port, e.Component, e.Err, e.Port, e.Flag)
}
