package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/fleet"
)

// benchLabel marks what the benchmark makes: KWOK's nodes and the pods.
const benchLabel = "kubelet-labs.dev/bench"

// env is one run's cluster, binaries and clients.
type env struct {
	o          options
	dir        string // the state folder's bench-18/
	kubeconfig string
	cfg        *rest.Config
	admin      kubernetes.Interface
	cp         *controlplane.ControlPlane // nil with --kubeconfig
	ownsCP     bool                       // started for this run: stop it at the end
	version    string
	kwokBin    string
	fleetBin   string
	driver     *driver
}

func setup(ctx context.Context, o options, logf func(string, ...any)) (*env, error) {
	e := &env{o: o}
	var err error
	if e.dir = o.dir; e.dir == "" {
		if e.dir, err = state.Ensure("bench-18"); err != nil {
			return nil, err
		}
	}
	root, err := state.Root()
	if err != nil {
		return nil, err
	}
	binDir, err := state.Ensure("bin")
	if err != nil {
		return nil, err
	}

	// The tools, built first: a cold KWOK build takes minutes, and no
	// control plane should idle meanwhile.
	logf("building KWOK v0.7.0 (scripts/build-kwok.sh; once, minutes when cold) and lab 18 ...")
	build := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "build-kwok.sh"))
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("scripts/build-kwok.sh: %w\n%s", err, out)
	}
	e.kwokBin = filepath.Join(binDir, "kwok")
	e.fleetBin = filepath.Join(e.dir, "mykubelet")
	// -buildvcs=false: the repository may belong to another user (the
	// VM's read-only mount, a shared checkout), and git then refuses to
	// say its status; the benchmark needs no version stamp.
	gobuild := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-o", e.fleetBin, "./labs/18-mykubelet")
	gobuild.Dir = root
	if out, err := gobuild.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./labs/18-mykubelet: %w\n%s", err, out)
	}

	switch {
	case o.cp != nil: // a test's control plane
		e.cp = o.cp
		e.kubeconfig = e.cp.AdminKubeconfig()
		if e.cfg, err = e.cp.AdminConfig(); err != nil {
			return nil, err
		}
	case o.kubeconfig != "":
		if e.cfg, err = labenv.RESTConfig(ctx, o.kubeconfig); err != nil {
			return nil, err
		}
		e.kubeconfig = o.kubeconfig
	default:
		// A control plane of its own: no other agent's pods or nodes in
		// the numbers, and nothing left behind.
		e.cp, err = benchkit.StartControlPlane(ctx, controlplane.Config{
			Dir: filepath.Join(e.dir, "cp"), BinDir: binDir, ModuleRoot: root, Fresh: true, UnsafeNoFsync: o.noFsync,
		}, logf)
		if err != nil {
			return nil, err
		}
		e.ownsCP = true
		e.kubeconfig = e.cp.AdminKubeconfig()
		if e.cfg, err = e.cp.AdminConfig(); err != nil {
			e.close()
			return nil, err
		}
	}
	if e.admin, err = kubernetes.NewForConfig(e.cfg); err != nil {
		e.close()
		return nil, err
	}
	if v, err := e.admin.Discovery().ServerVersion(); err == nil {
		e.version = v.GitVersion
	}
	if e.driver, err = newDriver(e.cfg, o.qps, o.burst); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	if e.ownsCP {
		benchkit.StopControlPlane(e.cp, e.dir)
	}
}

// controllerManagerTotals is the controller-manager's own count of its
// requests so far (nil with --kubeconfig: not ours to read).
func (e *env) controllerManagerTotals(ctx context.Context) (map[fleet.Call]int64, error) {
	if e.cp == nil {
		return nil, nil
	}
	return controllerManagerTotals(ctx, e.cfg, e.cp.Config().ControllerManagerPort)
}
