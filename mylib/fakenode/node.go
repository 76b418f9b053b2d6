package fakenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/mount-utils"

	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/util/oom"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/configmap"
	"k8s.io/kubernetes/pkg/volume/downwardapi"
	"k8s.io/kubernetes/pkg/volume/emptydir"
	"k8s.io/kubernetes/pkg/volume/hostpath"
	"k8s.io/kubernetes/pkg/volume/projected"
	"k8s.io/kubernetes/pkg/volume/secret"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
	"k8s.io/kubernetes/pkg/volume/util/subpath"

	"kubelet-labs/mylib/fakecadvisor"
	"kubelet-labs/mylib/fakecri"
)

// Node is a running fake node.
type Node struct {
	cfg  Config
	cri  *fakecri.Server
	done chan error
}

// Start prepares the node's folder, starts the mock CRI (unless an
// endpoint is given) and runs the real kubelet in the background. It
// returns at once; the kubelet bootstraps its certificate and registers the
// Node asynchronously. Err reports when the kubelet's Run gives up.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("node folder: %w", err)
	}
	// Before anything in the folder is touched: a second process for the
	// same node must not take the first one's runtime or certificates.
	lock, err := lockNode(cfg.Dir, cfg.NodeName)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if started {
			holdForever(lock) // the kubelet runs until the process exits
		} else {
			lock.Close() // nothing runs: the next try may take the node
		}
	}()
	if err := cfg.shortenDir(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Dir, cfg.RootDir(), cfg.CertDir(), cfg.StaticPodDir(), cfg.PodLogsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("node folder: %w", err)
		}
	}
	if err := writeClusterCA(cfg.BootstrapKubeconfig, cfg.CAFile()); err != nil {
		return nil, err
	}

	n := &Node{cfg: cfg, done: make(chan error, 1)}
	endpoint := cfg.CRIEndpoint
	if endpoint == "" {
		// fakecri clears a socket file left by a killed run, and refuses
		// one a live server still answers on.
		srv, err := fakecri.Start(cfg.MockCRISocket())
		if err != nil {
			return nil, fmt.Errorf("start the mock CRI: %w", err)
		}
		n.cri = srv
		endpoint = srv.Endpoint()
	}

	server, err := kubeletServer(&cfg, endpoint)
	if err != nil {
		n.Stop()
		return nil, err
	}
	deps, err := dependencies(ctx, &cfg, server)
	if err != nil {
		n.Stop()
		return nil, err
	}
	go func() {
		// kubeletapp.Run is the kubelet's main after flag parsing
		// (cmd/kubelet/app/server.go). It returns when ctx ends — or early,
		// with the reason, when start-up fails.
		err := kubeletapp.Run(ctx, server, deps, utilfeature.DefaultFeatureGate)
		n.done <- err
	}()
	started = true
	return n, nil
}

// Err delivers the kubelet's exit: an error if start-up failed, nil when
// its context ended.
func (n *Node) Err() <-chan error { return n.done }

// CRI is the in-process mock runtime, or nil when an external endpoint is used.
func (n *Node) CRI() *fakecri.Server { return n.cri }

// Config returns the node's configuration after defaults.
func (n *Node) Config() Config { return n.cfg }

// Stop stops the mock CRI. The kubelet's own goroutines stop with the
// process (see the package doc).
func (n *Node) Stop() {
	if n.cri != nil {
		n.cri.Stop()
	}
}

// kubeletServer is the kubelet's flags and configuration, as
// `kubelet --config …` would load them, set for a node that lives in one
// folder.
func kubeletServer(cfg *Config, endpoint string) (*options.KubeletServer, error) {
	s, err := options.NewKubeletServer()
	if err != nil {
		return nil, err
	}
	f := &s.KubeletFlags
	f.HostnameOverride = cfg.NodeName
	// NodeIP is the address the server listens on unless told otherwise
	// (ListenAddress); empty only when Address is 0.0.0.0 or loopback,
	// and then the kubelet detects the host's address (it refuses a
	// loopback node IP: kubelet_node_status.go, validateNodeIP). The
	// apiserver reaches the server there, so Address must include it.
	f.NodeIP = cfg.NodeIP
	f.RootDirectory = cfg.RootDir()
	f.CertDirectory = cfg.CertDir()
	// The kubelet's own TLS bootstrap (pkg/kubelet/certificate/bootstrap):
	// with no kubeconfig yet, it uses the bootstrap credentials once to
	// create a CSR for system:node:NAME, waits for it to be approved and
	// signed, and writes KubeConfig pointing at the new certificate.
	f.KubeConfig = cfg.Kubeconfig()
	f.BootstrapKubeconfig = cfg.BootstrapKubeconfig

	c := &s.KubeletConfiguration
	c.ContainerRuntimeEndpoint = endpoint
	c.ImageServiceEndpoint = endpoint
	c.ProviderID = "kubelet-labs://" + cfg.NodeName

	// The kubelet server: TLS on Address (the node IP by default), clients
	// authenticated by certificate (the apiserver's kubelet client) or token
	// review, and authorized by SubjectAccessReview. NewKubeletServer starts
	// from the *legacy* defaults (anonymous allowed, AlwaysAllow, read-only
	// port 10255): every one of them is switched off here, and a test
	// checks that an anonymous request is refused.
	c.Address = cfg.Address
	c.Port = int32(cfg.Port)
	c.ReadOnlyPort = 0
	c.HealthzPort = 0 // 10248 would clash between nodes and with a host kubelet
	c.Authentication.Anonymous.Enabled = false
	c.Authentication.Webhook.Enabled = true
	c.Authentication.X509.ClientCAFile = cfg.CAFile()
	c.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeWebhook
	// The serving certificate comes through a CSR too (signer
	// kubernetes.io/kubelet-serving), so the apiserver can verify it
	// against the cluster CA; someone must approve it (the
	// csrapproving controller approves only kubelet client certificates:
	// pkg/controller/certificates/approver/sarapprove.go:62-73,151-156, v1.36.3).
	c.ServerTLSBootstrap = true
	c.RotateCertificates = true

	// No cgroups, no host changes: the stub container manager does nothing.
	c.CgroupsPerQOS = false
	c.CgroupRoot = ""
	c.CgroupDriver = "cgroupfs"
	c.EnforceNodeAllocatable = nil
	c.KubeletCgroups = ""
	c.SystemCgroups = ""
	c.FailSwapOn = false
	c.ProtectKernelDefaults = false
	// A fake node uses no cgroups at all, so the host's cgroup version does
	// not matter (since 1.35 the kubelet refuses cgroup v1 hosts by default).
	c.FailCgroupV1 = false
	c.VolumePluginDir = cfg.RootDir() + "/volume-plugins"

	c.StaticPodPath = cfg.StaticPodDir()
	c.FileCheckFrequency.Duration = 5 * time.Second
	c.PodLogsDir = cfg.PodLogsDir()
	c.MaxPods = int32(cfg.MaxPods)
	c.NodeLeaseDurationSeconds = int32(cfg.NodeLeaseDuration / time.Second)
	// Pods' DNS (GetPodDNS, pkg/kubelet/network/dns/dns.go:402-421): with
	// clusterDNS set, a ClusterFirst pod's resolv.conf names only those
	// servers and searches the cluster domain first; with none, the pod
	// falls back to the host's and a MissingClusterDNS event says so.
	c.ClusterDNS = cfg.ClusterDNS
	c.ClusterDomain = cfg.ClusterDomain
	return s, nil
}

// dependencies mirrors kubemark's NewHollowKubelet (pkg/kubemark/
// hollow_kubelet.go, v1.36.3): real kubelet, fakes at the machine's edges.
// The API clients, Auth and the runtime clients are left nil on purpose:
// kubeletapp.Run builds them the way the real kubelet does.
func dependencies(ctx context.Context, cfg *Config, s *options.KubeletServer) (*kubelet.Dependencies, error) {
	tlsOptions, err := kubeletapp.InitializeTLS(ctx, &s.KubeletFlags, &s.KubeletConfiguration)
	if err != nil {
		return nil, fmt.Errorf("kubelet TLS: %w", err)
	}
	deps := &kubelet.Dependencies{
		CAdvisorInterface: fakecadvisor.New(fakecadvisor.Machine{
			NumCores: cfg.CPUs, MemoryBytes: cfg.MemoryBytes, MaxPods: cfg.MaxPods,
			RootDir: cfg.RootDir(), NodeName: cfg.NodeName,
		}),
		ContainerManager: cm.NewStubContainerManager(),
		OSInterface:      nodeOS{},
		Mounter:          mount.NewFakeMounter(nil),
		HostUtil:         hostutil.NewFakeHostUtil(nil),
		Subpather:        &subpath.FakeSubpath{},
		OOMAdjuster:      oom.NewFakeOOMAdjuster(),
		VolumePlugins:    volumePlugins(cfg.CRIEndpoint != ""),
		TLSOptions:       tlsOptions,
		TracerProvider:   noopoteltrace.NewTracerProvider(),
	}
	// Real events (kubectl describe shows Pulled, Created, Started) need a
	// real recorder, and with one the kubelet insists on watching /dev/kmsg
	// for OOM kills (pkg/kubelet/oom), which only root may read.
	if !canReadKmsg() {
		deps.Recorder = &record.FakeRecorder{}
	}
	return deps, nil
}

// volumePlugins are the plugins whose volumes need no mount: enough for
// service-account tokens, ConfigMaps, Secrets and emptyDir on disk.
//
// On a real runtime, hostPath too: it needs no mount by the kubelet either
// (the runtime bind-mounts the host's path), and kube-proxy's pod cannot
// start without it (kubeadm's DaemonSet mounts /run/xtables.lock,
// cmd/kubeadm/app/phases/addons/proxy/manifests.go:104-107), so a node
// without it cannot be a full cluster's. Its FileOrCreate and
// DirectoryOrCreate types create the path on the host (SetUp and
// checkTypeInternal, pkg/volume/hostpath/host_path.go:241-254 and
// 462-499); with the fake HostUtil every path looks missing, so those
// create it (or find it there) and a plain File or Directory type is
// refused; an untyped one is not checked. Not on the mock CRI: there a pod must leave the host as it
// found it, as the package says. A real runtime already lets a pod reach
// the host (privileged pods are allowed, as in every kubelet:
// cmd/kubelet/app/server.go:1252-1254); hostPath adds no power beyond it.
func volumePlugins(realRuntime bool) []volume.VolumePlugin {
	var all []volume.VolumePlugin
	if realRuntime {
		all = append(all, hostpath.ProbeVolumePlugins(volume.VolumeConfig{})...)
	}
	all = append(all, emptydir.ProbeVolumePlugins()...)
	all = append(all, secret.ProbeVolumePlugins()...)
	all = append(all, configmap.ProbeVolumePlugins()...)
	all = append(all, projected.ProbeVolumePlugins()...)
	all = append(all, downwardapi.ProbeVolumePlugins()...)
	return all
}

func canReadKmsg() bool {
	f, err := os.Open("/dev/kmsg")
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// writeClusterCA extracts the cluster CA from the bootstrap kubeconfig: the
// kubelet server trusts client certificates signed by it (the apiserver's).
func writeClusterCA(kubeconfig, out string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("bootstrap kubeconfig %s: %w", kubeconfig, err)
	}
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 && cfg.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			return err
		}
	}
	if len(ca) == 0 {
		return errors.New("the bootstrap kubeconfig has no certificate-authority: a node must verify the apiserver (InsecureSkipTLSVerify is not supported)")
	}
	return os.WriteFile(out, ca, 0o644)
}
