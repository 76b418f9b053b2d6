package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
	volumevalidation "k8s.io/kubernetes/pkg/volume/validation"
)

// Mounts is makeMounts (kubelet_pods.go:278-435) and the CRI conversion
// of kuberuntime's makeMounts (kuberuntime_container.go:290): one CRI
// mount per volumeMount of the container, of a volume SetUp made. env is
// the container's environment, for subPathExpr. A subPath is made inside
// the volume if missing (SafeMakeDir) and bind-mounted from an fd opened
// without following symlinks out of the volume (PrepareSafeSubpath): a
// container that planted a symlink in its emptyDir cannot get the node's
// files through a subPath. Read-only: the volumeMount's readOnly or the
// plugin's (configMap, secret, downwardAPI, projected are always). SELinux
// relabelling is off: this node runs without SELinux.
func (m *Manager) Mounts(pod *v1.Pod, c *v1.Container, env []kubecontainer.EnvVar) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		vol, ok := m.volume(pod.UID, vm.Name)
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		hostPath := vol.path
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			var err error
			if sub, err = kubecontainer.ExpandContainerVolumeMounts(vm, env); err != nil {
				return nil, err
			}
		}
		if sub != "" {
			p, err := m.prepareSubPath(pod, c, i, vm.Name, vol.path, sub)
			if err != nil {
				return nil, err
			}
			hostPath = p
		}
		prop, err := propagation(vm.MountPropagation)
		if err != nil {
			return nil, err
		}
		if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
			return nil, fmt.Errorf("volumeMount %q: recursiveReadOnly Enabled is not supported on this node", vm.Name)
		}
		containerPath := vm.MountPath
		if !filepath.IsAbs(containerPath) {
			containerPath = "/" + containerPath // MakeAbsolutePath
		}
		out = append(out, &runtimeapi.Mount{
			ContainerPath:  containerPath,
			HostPath:       hostPath,
			Readonly:       vm.ReadOnly || vol.readOnly,
			SelinuxRelabel: false,
			Propagation:    prop,
		})
	}
	return out, nil
}

// prepareSubPath is kubelet_pods.go:319-371 with upstream's subpath
// package: validate, make the folder if it is missing (with the volume's
// mode, never leaving the volume), bind-mount it safely under
// PodDir/volume-subpaths/VOLUME/CONTAINER/INDEX. The errors say no more
// than upstream's: details of the node's filesystem stay in the log.
func (m *Manager) prepareSubPath(pod *v1.Pod, c *v1.Container, index int, volName, volPath, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	if err := volumevalidation.ValidatePathNoBacksteps(sub); err != nil {
		return "", fmt.Errorf("unable to provision SubPath `%s`: %w", sub, err)
	}
	if !m.root {
		return "", fmt.Errorf("volumeMount %q of container %q: a subPath needs a bind mount: this node does not run as root", volName, c.Name)
	}
	full := filepath.Join(volPath, sub)
	if _, err := os.Lstat(full); errors.Is(err, os.ErrNotExist) {
		fi, err := os.Stat(volPath)
		if err != nil {
			return "", err
		}
		// the volume's whole mode, as kubelet_pods.go:351-355 passes
		// hostutil's GetMode (os.Stat's Mode()): setgid from fsGroup and a
		// tmpfs root's sticky bit carry over to the new folder
		// (SafeMakeDir chmods with it); Perm() alone dropped them, and
		// "EmptyDir volumes when FSGroup is specified … nonexistent volume
		// subPath" wants dgtrwxrwxrwx
		if err := m.subpaths.SafeMakeDir(sub, volPath, fi.Mode()); err != nil {
			m.log("volumes subPath %q of volume %q of container %s: %v", sub, volName, c.Name, err)
			return "", fmt.Errorf("failed to create subPath directory for volumeMount %q of container %q", volName, c.Name)
		}
	}
	p, cleanup, err := m.subpaths.PrepareSafeSubpath(subpath.Subpath{
		VolumeMountIndex: index,
		Path:             full,
		VolumeName:       volName,
		VolumePath:       volPath,
		PodDir:           m.PodDir(pod.UID),
		ContainerName:    c.Name,
	})
	if cleanup != nil {
		cleanup() // nil on Linux: the bind mount stays until TearDown
	}
	if err != nil {
		m.log("volumes subPath %q of volume %q of container %s: %v", sub, volName, c.Name, err)
		return "", fmt.Errorf("failed to prepare subPath for volumeMount %q of container %q", volName, c.Name)
	}
	return p, nil
}

// propagation is translateMountPropagation (kubelet_pods.go:428).
func propagation(mode *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	switch {
	case mode == nil, *mode == v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case *mode == v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case *mode == v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid MountPropagation mode: %q", *mode)
}
