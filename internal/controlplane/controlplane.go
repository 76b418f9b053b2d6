package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ControlPlane is a running etcd + kube-apiserver + kube-controller-manager.
type ControlPlane struct {
	cfg  Config
	pki  *PKI
	lock *fileLock

	mu        sync.Mutex // guards the fields below
	etcd      *process
	apiserver *process
	kcm       *process
	stopping  bool
	failed    chan error // one unexpected exit, buffered
}

// Start brings a control plane up and returns when the apiserver is ready
// and the controller-manager is healthy. On error nothing is left running.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Dir, cfg.logDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("state folder %s is not usable: %w", d, err)
		}
	}
	lock, err := acquireRunLock(cfg.Dir, cfg.BinDir, cfg.Progress)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{cfg: cfg, lock: lock, failed: make(chan error, 1)}
	started := false
	defer func() {
		if !started {
			cp.Stop() // whatever did start, and the run lock
		}
	}()

	if err := cfg.checkPortsFree(); err != nil {
		return nil, err
	}
	if err := EnsureBinaries(cfg.ModuleRoot, cfg.BinDir, cfg.Progress); err != nil {
		return nil, err
	}
	if cp.pki, err = EnsurePKI(cfg.pkiDir(), cfg.apiserverIP()); err != nil {
		return nil, err
	}
	if cfg.Fresh {
		if err := os.RemoveAll(cfg.etcdDir()); err != nil {
			return nil, fmt.Errorf("wipe etcd data: %w", err)
		}
	}
	if err := cp.writeKubeconfigs(); err != nil {
		return nil, err
	}

	steps := []struct {
		name  string
		start func(context.Context) error
	}{
		{"etcd", cp.startEtcd},
		{"kube-apiserver", cp.startAPIServer},
		{"kube-controller-manager", cp.startControllerManager},
	}
	for _, s := range steps {
		t0 := time.Now()
		if err := s.start(ctx); err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "%s ready in %s\n", s.name, time.Since(t0).Round(10*time.Millisecond))
		cp.writePids()
	}
	started = true
	return cp, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	c := &cp.cfg
	p := cp.pki
	client := "https://127.0.0.1:" + strconv.Itoa(c.EtcdPort)
	peer := "https://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort)
	args := []string{
		"--name=labs", "--data-dir=" + c.etcdDir(),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=labs=" + peer, "--initial-cluster-state=new",
		"--cert-file=" + p.CertFile(etcdServerName), "--key-file=" + p.KeyFile(etcdServerName),
		"--trusted-ca-file=" + p.CertFile(EtcdCAName), "--client-cert-auth=true",
		"--peer-cert-file=" + p.CertFile(etcdServerName), "--peer-key-file=" + p.KeyFile(etcdServerName),
		"--peer-trusted-ca-file=" + p.CertFile(EtcdCAName), "--peer-client-cert-auth=true",
		"--snapshot-count=10000", "--log-level=warn",
	}
	if c.UnsafeNoFsync {
		args = append(args, "--unsafe-no-fsync=true")
	}
	proc, err := cp.spawn("etcd", args)
	if err != nil {
		return err
	}
	cp.mu.Lock() // Pids and Stop read it from other goroutines
	cp.etcd = proc
	cp.mu.Unlock()
	hc, err := httpsClient(p.CertFile(EtcdCAName), p.CertFile(apiserverEtcdClientName), p.KeyFile(apiserverEtcdClientName))
	if err != nil {
		return err
	}
	return waitHealthy(ctx, proc, hc, client+"/health", `"health":"true"`, 60*time.Second)
}

func (cp *ControlPlane) apiserverArgs() []string {
	c := &cp.cfg
	p := cp.pki
	return []string{
		// One address, loopback unless the learner names another
		// (Config.APIServerAddress): kubeadm advertises its node's address
		// (cmd/kubeadm/app/phases/controlplane/manifests.go:187) and binds
		// every interface; we bind only the one named.
		"--bind-address=" + c.APIServerAddress, "--advertise-address=" + c.APIServerAddress,
		"--secure-port=" + strconv.Itoa(c.APIServerPort),
		"--endpoint-reconciler-type=" + endpointReconciler(c.APIServerAddress),
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(c.EtcdPort),
		"--etcd-cafile=" + p.CertFile(EtcdCAName),
		"--etcd-certfile=" + p.CertFile(apiserverEtcdClientName), "--etcd-keyfile=" + p.KeyFile(apiserverEtcdClientName),
		"--tls-cert-file=" + p.CertFile(apiserverName), "--tls-private-key-file=" + p.KeyFile(apiserverName),
		"--client-ca-file=" + p.CAFile(),
		// Node first, so kubelets are limited to their own node and pods.
		"--authorization-mode=Node,RBAC",
		"--enable-bootstrap-token-auth=true",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(p.Dir, serviceAccountKeyName+".pub"),
		"--service-account-signing-key-file=" + filepath.Join(p.Dir, serviceAccountKeyName+".key"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		// exec/logs/port-forward: the apiserver authenticates to kubelets
		// with its own client cert and verifies their serving certs.
		"--kubelet-client-certificate=" + p.CertFile(apiserverKubeletClientName),
		"--kubelet-client-key=" + p.KeyFile(apiserverKubeletClientName),
		"--kubelet-certificate-authority=" + p.CAFile(),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// The aggregation layer, as kubeadm configures it
		// (cmd/kubeadm/app/phases/controlplane/manifests.go:204-210): the
		// apiserver proxies /apis/<group> of an APIService to its extension
		// apiserver with the front-proxy client certificate and the user
		// in X-Remote-* headers, which extension apiservers trust only
		// from a certificate of this CA with this name.
		"--requestheader-client-ca-file=" + p.CertFile(FrontProxyCAName),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.CertFile(frontProxyClientName),
		"--proxy-client-key-file=" + p.KeyFile(frontProxyClientName),
		"--allow-privileged=true",
		"--profiling=false",
		// On SIGTERM, close open watches after 2 s. Without it the apiserver
		// waits for watch connections (every kubelet has some) until its
		// request timeout: a restart with one fake node attached took 32 s,
		// with this flag 2.8 s.
		"--shutdown-watch-termination-grace-period=2s",
	}
}

// ServiceCIDR is the range Services' cluster IPs come from; the
// "kubernetes" Service has its first address (pki.go's serviceIP).
const ServiceCIDR = "10.0.0.0/24"

// endpointReconciler is how the apiserver keeps the "kubernetes" Service's
// endpoints: "lease" (upstream's default) publishes its advertise address,
// so pods reach the apiserver at the Service IP through kube-proxy; the
// lease reconciler refuses a loopback address, which no pod could dial
// anyway, so on 127.0.0.1 the Service keeps no endpoints ("none").
func endpointReconciler(address string) string {
	if ip := net.ParseIP(address); ip != nil && !ip.IsLoopback() {
		return "lease"
	}
	return "none"
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	proc, err := cp.spawn("kube-apiserver", cp.apiserverArgs())
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.apiserver = proc
	cp.mu.Unlock()
	hc, err := httpsClient(cp.pki.CAFile(), cp.pki.CertFile(adminName), cp.pki.KeyFile(adminName))
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, proc, hc, cp.URL()+"/readyz", "ok", 120*time.Second); err != nil {
		return err
	}
	return cp.ensureKubeletClientRBAC(ctx)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	c := &cp.cfg
	p := cp.pki
	kubeconfig := filepath.Join(c.Dir, "controller-manager.kubeconfig")
	args := []string{
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.ControllerManagerPort),
		"--tls-cert-file=" + p.CertFile(controllerManagerServerName),
		"--tls-private-key-file=" + p.KeyFile(controllerManagerServerName),
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		// Each controller uses its own service account (as kubeadm does):
		// the CSR signer is ready within seconds instead of ~1 minute.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(p.Dir, serviceAccountKeyName+".key"),
		"--root-ca-file=" + p.CAFile(),
		// Approved CSRs are signed by the cluster CA, so node certs work.
		"--cluster-signing-cert-file=" + p.CAFile(), "--cluster-signing-key-file=" + p.CAKeyFile(),
		// bootstrapsigner signs cluster-info for joining nodes; tokencleaner
		// deletes expired bootstrap tokens. Both are off by default.
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--node-monitor-period=1s",
		"--node-monitor-grace-period=" + c.NodeMonitorGracePeriod.String(),
		"--profiling=false",
	}
	proc, err := cp.spawn("kube-controller-manager", args)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.kcm = proc
	cp.mu.Unlock()
	hc, err := httpsClient(p.CAFile(), "", "")
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, proc, hc, "https://127.0.0.1:"+strconv.Itoa(c.ControllerManagerPort)+"/healthz", "ok", 120*time.Second); err != nil {
		return err
	}
	return cp.waitControllersRun(ctx, 60*time.Second)
}

// spawn starts a child and watches it: an exit we did not ask for is
// reported on Failed().
func (cp *ControlPlane) spawn(name string, args []string) (*process, error) {
	proc, err := startProcess(name, filepath.Join(cp.cfg.BinDir, name), args, cp.LogFile(name))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cp.cfg.Progress, "started %s (pid %d), log %s\n", name, proc.pid(), proc.logPath)
	go func() {
		<-proc.done
		cp.mu.Lock()
		expected := cp.stopping || proc.retired
		cp.mu.Unlock()
		if !expected {
			select {
			case cp.failed <- proc.exitError():
			default:
			}
		}
	}()
	return proc, nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// with the same etcd: what a control-plane upgrade or crash looks like to
// clients. It returns when /readyz is ok again.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	old := cp.apiserver
	old.retired = true // the coming exit is not a failure
	cp.mu.Unlock()
	if err := old.stop(30 * time.Second); err != nil {
		return err
	}
	// The port can linger briefly after exit; the new process retries binding
	// for a while by itself, so just start it.
	return cp.startAPIServer(ctx)
}

// Failed delivers an error when a component exits on its own.
func (cp *ControlPlane) Failed() <-chan error { return cp.failed }

// Stop stops kube-controller-manager, kube-apiserver and etcd, in that
// order, and returns only when all have exited. It is safe to call twice.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	cp.stopping = true
	procs := []*process{cp.kcm, cp.apiserver, cp.etcd}
	cp.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if err := p.stop(20 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		os.Remove(cp.pidFile())
	}
	cp.lock.Unlock()
	return errors.Join(errs...)
}

// URL is the apiserver's address: on 127.0.0.1 unless
// Config.APIServerAddress names another.
func (cp *ControlPlane) URL() string {
	return "https://" + net.JoinHostPort(cp.cfg.APIServerAddress, strconv.Itoa(cp.cfg.APIServerPort))
}

// Config returns the configuration after defaults (ports chosen).
func (cp *ControlPlane) Config() Config { return cp.cfg }

// PKI gives access to the CA, for labs and tests that mint certificates.
func (cp *ControlPlane) PKI() *PKI { return cp.pki }

// AdminKubeconfig is the path of the admin (system:masters) kubeconfig.
func (cp *ControlPlane) AdminKubeconfig() string { return cp.cfg.AdminKubeconfig }

// AdminConfig is a rest.Config for the admin user.
func (cp *ControlPlane) AdminConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", cp.cfg.AdminKubeconfig)
}

// AdminClient is a clientset for the admin user.
func (cp *ControlPlane) AdminClient() (kubernetes.Interface, error) {
	cfg, err := cp.AdminConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// LogFile is the log of one component ("etcd", "kube-apiserver", "kube-controller-manager").
func (cp *ControlPlane) LogFile(component string) string {
	return filepath.Join(cp.cfg.logDir(), component+".log")
}

// LogFiles lists all component logs, for error messages.
func (cp *ControlPlane) LogFiles() []string {
	return []string{cp.LogFile("etcd"), cp.LogFile("kube-apiserver"), cp.LogFile("kube-controller-manager")}
}

// Pids returns the process IDs of the running components, by name.
func (cp *ControlPlane) Pids() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := map[string]int{}
	for _, p := range []*process{cp.etcd, cp.apiserver, cp.kcm} {
		if p != nil && !p.exited() {
			out[p.name] = p.pid()
		}
	}
	return out
}

// Ports lists every port the control plane listens on.
func (cp *ControlPlane) Ports() []int {
	c := cp.cfg
	return []int{c.EtcdPort, c.EtcdPeerPort, c.APIServerPort, c.ControllerManagerPort}
}

// processAlive reports whether pid exists (signal 0 probes without killing).
func processAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
