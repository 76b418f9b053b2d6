package controlplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
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

	// Ports on 127.0.0.1 (the apiserver's on APIServerAddress); 0 picks a
	// free one.
	APIServerPort, EtcdPort, EtcdPeerPort, ControllerManagerPort int

	// APIServerAddress is the one address kube-apiserver binds and
	// advertises, and the one the kubeconfigs name; "" is 127.0.0.1, so
	// only this machine reaches it. Another address of this machine (a
	// kind bridge's, for a management cluster's pods) makes the apiserver
	// reachable from that address's network — still TLS, still a client
	// certificate required — and joins the serving certificate's IP SANs,
	// as kubeadm adds its advertise address
	// (cmd/kubeadm/app/util/pkiutil/pki_helpers.go:375-404). Never every
	// interface (0.0.0.0): the learner names the network they open it to.
	APIServerAddress string

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
	if err := c.checkAPIServerAddress(); err != nil {
		return err
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

// checkAPIServerAddress defaults the apiserver's address to loopback and
// refuses what is not one IP address: a host name would make the
// certificate's SANs and the bind address disagree, and the unspecified
// address would open the apiserver on every network this machine is on.
func (c *Config) checkAPIServerAddress() error {
	if c.APIServerAddress == "" {
		c.APIServerAddress = "127.0.0.1"
		return nil
	}
	ip := net.ParseIP(c.APIServerAddress)
	switch {
	case ip == nil:
		return fmt.Errorf("--apiserver-address %q is not an IP address: name one address of this machine (`ip -brief address` lists them), e.g. 127.0.0.1 or a kind bridge's 172.18.0.1", c.APIServerAddress)
	case ip.IsUnspecified():
		return fmt.Errorf("--apiserver-address %s would open the apiserver on every network of this machine: name the one address that should reach it (`ip -brief address` lists them)", c.APIServerAddress)
	}
	c.APIServerAddress = ip.String()
	return nil
}

// apiserverIP is the parsed APIServerAddress (after setDefaults).
func (c *Config) apiserverIP() net.IP { return net.ParseIP(c.APIServerAddress) }

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
		host string
		port int
		who  string
		flag string
	}{
		{"127.0.0.1", c.EtcdPort, "etcd (client)", "--etcd-port"},
		{"127.0.0.1", c.EtcdPeerPort, "etcd (peer)", "--etcd-peer-port"},
		{c.APIServerAddress, c.APIServerPort, "kube-apiserver", "--apiserver-port"},
		{"127.0.0.1", c.ControllerManagerPort, "kube-controller-manager", "--controller-manager-port"},
	} {
		// A process that is exiting (a previous run just stopped, a leftover
		// just killed) can hold its port for a moment: retry briefly.
		var err error
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort(p.host, strconv.Itoa(p.port))); err == nil {
				l.Close()
				break
			}
			if errors.Is(err, syscall.EADDRNOTAVAIL) {
				// no retry helps: the address is no interface's (a kind
				// bridge that is not up yet, a typo)
				return fmt.Errorf("--apiserver-address %s is not an address of this machine (`ip -brief address` lists them): %w", p.host, err)
			}
			if time.Now().After(deadline) {
				return &PortInUseError{Host: p.host, Port: p.port, Component: p.who, Flag: p.flag, Err: err}
			}
		}
	}
	return nil
}

// PortInUseError says which component's port is taken and how to choose another.
type PortInUseError struct {
	Host      string
	Port      int
	Component string
	Flag      string
	Err       error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d for %s is already in use on %s (%v); find the owner with `ss -ltnp 'sport = :%d'`, stop it, or pick another port with %s",
		e.Port, e.Component, e.Host, e.Err, e.Port, e.Flag)
}
