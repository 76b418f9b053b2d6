// Lab 00 starts the embedded control plane: a real etcd, kube-apiserver and
// kube-controller-manager (Kubernetes v1.36.3) on 127.0.0.1, built from this
// module's dependency graph into the state folder on first run. It writes
// the admin kubeconfig to .labs/admin.kubeconfig and stays in the
// foreground; Ctrl-C (or SIGTERM) stops every component.
//
//	go run ./labs/00-cluster
//	go run ./labs/00-cluster --apiserver-address 172.18.0.1   # the apiserver on a kind bridge instead
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
)

type options struct {
	cp        controlplane.Config
	buildOnly bool
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "00-cluster",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.cp.APIServerAddress, "apiserver-address", "127.0.0.1",
				"the one address kube-apiserver listens on and the admin kubeconfig names; another address of this machine (a kind bridge's, e.g. 172.18.0.1) makes the apiserver reachable from that network — TLS and a client certificate still required — and joins its certificate's names")
			fs.IntVar(&o.cp.APIServerPort, "apiserver-port", controlplane.DefaultAPIServerPort, "kube-apiserver secure port on --apiserver-address")
			fs.IntVar(&o.cp.EtcdPort, "etcd-port", controlplane.DefaultEtcdPort, "etcd client port on 127.0.0.1")
			fs.IntVar(&o.cp.EtcdPeerPort, "etcd-peer-port", controlplane.DefaultEtcdPeerPort, "etcd peer port on 127.0.0.1")
			fs.IntVar(&o.cp.ControllerManagerPort, "controller-manager-port", controlplane.DefaultControllerManagerPort, "kube-controller-manager secure port on 127.0.0.1")
			fs.DurationVar(&o.cp.NodeMonitorGracePeriod, "node-monitor-grace-period", controlplane.DefaultNodeMonitorGracePeriod,
				"how long a node may miss heartbeats before it is marked NotReady (upstream: 50s); keep it well above the nodes' lease renew interval (10s)")
			fs.BoolVar(&o.cp.Fresh, "fresh", false, "wipe etcd's data first: start with an empty cluster")
			fs.BoolVar(&o.buildOnly, "build-only", false, "only build the binaries into the state folder, then exit")
		},
		Run: func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out) },
	})
}

func run(ctx context.Context, o options, out *labenv.Printer) error {
	cfg := o.cp
	root, err := state.Root()
	if err != nil {
		return err
	}
	stateDir, err := state.Ensure()
	if err != nil {
		return err
	}
	if cfg.BinDir, err = state.Ensure("bin"); err != nil {
		return err
	}
	if cfg.Dir, err = state.Ensure("cluster"); err != nil {
		return err
	}
	cfg.ModuleRoot = root
	cfg.AdminKubeconfig = filepath.Join(stateDir, "admin.kubeconfig")
	cfg.Progress = out // one line per build and start, under the printer's lock

	if o.buildOnly {
		if err := controlplane.EnsureBinaries(root, cfg.BinDir, out); err != nil {
			return err
		}
		out.Printf("binaries are in %s", cfg.BinDir)
		return nil
	}

	t0 := time.Now()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c := cp.Config()
	if ip := net.ParseIP(c.APIServerAddress); !ip.IsLoopback() {
		// said before the banner, so whoever reads the URL reads this too
		out.Printf("kube-apiserver listens on %s, not loopback: reachable from that network (TLS, client certificates only)", c.APIServerAddress)
	}
	out.Printf(`
control plane (Kubernetes %s) ready in %s
  apiserver                  %s
  admin kubeconfig           %s
  logs                       %s
  node-monitor-grace-period  %s

In another terminal:
  export KUBECONFIG=%s
  export PATH=%s:$PATH   # kubectl %s
  kubectl get --raw /readyz

Press Ctrl-C to stop.`, controlplane.KubernetesVersion, time.Since(t0).Round(100*time.Millisecond), cp.URL(), cp.AdminKubeconfig(),
		filepath.Dir(cp.LogFile("etcd")), c.NodeMonitorGracePeriod, cp.AdminKubeconfig(), cfg.BinDir, controlplane.KubernetesVersion)

	// Run until Ctrl-C, or until a component exits on its own.
	var failed error
	select {
	case <-ctx.Done():
		out.Printf("\nstopping...")
	case failed = <-cp.Failed():
		out.Printf("\na component exited on its own; stopping the others...")
	}
	if err := cp.Stop(); err != nil {
		return err
	}
	if failed != nil {
		return fmt.Errorf("%w (the other components are stopped)", failed)
	}
	out.Printf("stopped: etcd, kube-apiserver and kube-controller-manager have exited")
	return nil
}
