package fakenode

import (
	"os"

	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// nodeOS is the real OS interface except where the kubelet would touch
// /var/log/containers — one folder shared by the whole host, which only
// root may create. Fake nodes keep their logs in their own folder only,
// and run as the learner:
//   - Symlink: the kubelet links every container log into it
//     (pkg/kubelet/kuberuntime/kuberuntime_container.go, legacyLogSymlink);
//   - MkdirAll: it creates it at start and exits if it cannot
//     (pkg/kubelet/kubelet.go:1759-1763, initializeModules, v1.36.3), which
//     killed a fake node started by anyone but root on a machine where the
//     folder did not exist yet.
type nodeOS struct{ kubecontainer.RealOS }

func (nodeOS) Symlink(oldname, newname string) error { return nil }

func (o nodeOS) MkdirAll(path string, perm os.FileMode) error {
	if path == kubelet.ContainerLogsDir {
		return nil // never written to: see Symlink
	}
	return o.RealOS.MkdirAll(path, perm)
}
