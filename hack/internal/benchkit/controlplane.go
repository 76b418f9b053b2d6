package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kubelet-labs/internal/controlplane"
)

// StartControlPlane starts a control plane of the benchmark's own, as cfg
// says (afresh: no other agent's pods or nodes in the numbers, and nothing
// left behind, StopControlPlane), trying up to three times.
func StartControlPlane(ctx context.Context, cfg controlplane.Config, logf func(string, ...any)) (*controlplane.ControlPlane, error) {
	logf("starting a private control plane in %s", cfg.Dir)
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		cp, err := controlplane.Start(cctx, cfg)
		cancel()
		// Free ports are picked, then bound by the children a moment
		// later; an outgoing connection can take one in between (its
		// source port comes from the same range): start again, on new
		// ports.
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return cp, err
		}
		logf("a port was taken before the control plane bound it; starting again on other ports")
	}
}

// StopControlPlane stops a control plane StartControlPlane started, and
// keeps its logs in dir/cp-logs, beside the tools' logs: what the
// controller-manager did to the nodes and pods (NotReady, taints,
// evictions) is the first question about a run that timed out. Its data
// folder, gigabytes of etcd, goes.
func StopControlPlane(cp *controlplane.ControlPlane, dir string) {
	if err := cp.Stop(); err != nil {
		return
	}
	cpDir := cp.Config().Dir
	keep := filepath.Join(dir, "cp-logs")
	os.RemoveAll(keep)
	if err := os.Rename(filepath.Join(cpDir, "logs"), keep); err != nil {
		fmt.Fprintf(os.Stderr, "the control plane's logs were not kept: %v\n", err)
	}
	os.RemoveAll(cpDir)
}

// ControlPlaneCPU is the CPU time so far of kube-apiserver and etcd, and
// of the controller-manager (0 for a control plane that is not ours, nil:
// its processes are not ours to read).
func ControlPlaneCPU(cp *controlplane.ControlPlane) (apiserverEtcd, controllerManager time.Duration) {
	if cp == nil {
		return 0, 0
	}
	for name, pid := range cp.Pids() {
		t, err := CPUTime(pid)
		if err != nil {
			continue
		}
		switch name {
		case "kube-apiserver", "etcd":
			apiserverEtcd += t
		case "kube-controller-manager":
			controllerManager += t
		}
	}
	return apiserverEtcd, controllerManager
}
