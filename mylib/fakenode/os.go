package fakenode

import (
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// nodeOS is the real OS interface except for Symlink: the kubelet links
// every container log into /var/log/containers — one folder shared by the
// whole host (pkg/kubelet/kuberuntime/kuberuntime_container.go,
// legacyLogSymlink). Fake nodes keep their logs in their own folder only.
type nodeOS struct{ kubecontainer.RealOS }

func (nodeOS) Symlink(oldname, newname string) error { return nil }
