// Lab 00 starts the embedded control plane: a real etcd, kube-apiserver and
// kube-controller-manager (Kubernetes v1.36.3) on 127.0.0.1, built from this
// module's dependency graph into the state folder on first run. It writes
// the admin kubeconfig to .labs/admin.kubeconfig and stays in the
// foreground; Ctrl-C stops every component.
//
//	go run ./labs/00-cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
)

func main() {
	cfg := controlplane.Config{}
	flag.IntVar(&cfg.APIServerPort, "apiserver-port", controlplane.DefaultAPIServerPort, "kube-apiserver secure port on 127.0.0.1")
	flag.IntVar(&cfg.EtcdPort, "etcd-port", controlplane.DefaultEtcdPort, "etcd client port on 127.0.0.1")
	flag.IntVar(&cfg.EtcdPeerPort, "etcd-peer-port", controlplane.DefaultEtcdPeerPort, "etcd peer port on 127.0.0.1")
	flag.IntVar(&cfg.ControllerManagerPort, "controller-manager-port", controlplane.DefaultControllerManagerPort, "kube-controller-manager secure port on 127.0.0.1")
	flag.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", controlplane.DefaultNodeMonitorGracePeriod,
		"how long a node may miss heartbeats before it is marked NotReady (upstream: 50s); keep it well above the nodes' lease renew interval (10s)")
	flag.BoolVar(&cfg.Fresh, "fresh", false, "wipe etcd's data first: start with an empty cluster")
	buildOnly := flag.Bool("build-only", false, "only build the binaries into the state folder, then exit")
	flag.Parse()

	if err := run(cfg, *buildOnly); err != nil {
		labenv.Fatal(err)
	}
}

func run(cfg controlplane.Config, buildOnly bool) error {
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
	cfg.Progress = os.Stdout

	if buildOnly {
		if err := controlplane.EnsureBinaries(root, cfg.BinDir, os.Stdout); err != nil {
			return err
		}
		fmt.Printf("binaries are in %s\n", cfg.BinDir)
		return nil
	}

	// Ctrl-C, kill and a closed terminal all stop the children cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	t0 := time.Now()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c := cp.Config()
	fmt.Printf(`
control plane (Kubernetes %s) ready in %s
  apiserver                  %s
  admin kubeconfig           %s
  logs                       %s
  node-monitor-grace-period  %s

In another terminal:
  export KUBECONFIG=%s
  export PATH=%s:$PATH   # kubectl %s
  kubectl get --raw /readyz

Press Ctrl-C to stop.
`, controlplane.KubernetesVersion, time.Since(t0).Round(100*time.Millisecond), cp.URL(), cp.AdminKubeconfig(),
		filepath.Dir(cp.LogFile("etcd")), c.NodeMonitorGracePeriod, cp.AdminKubeconfig(), cfg.BinDir, controlplane.KubernetesVersion)

	var runErr error
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping...")
	case runErr = <-cp.Failed():
		fmt.Fprintln(os.Stderr, "error:", runErr)
		fmt.Println("stopping the other components...")
	}
	if err := cp.Stop(); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("a component failed; see the log named above")
	}
	fmt.Println("stopped: etcd, kube-apiserver and kube-controller-manager have exited")
	return nil
}
