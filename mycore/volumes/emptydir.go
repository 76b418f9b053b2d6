package volumes

import (
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	kubevolume "k8s.io/kubernetes/pkg/volume"
)

// emptyDirPerm: any user of any container may write
// (pkg/volume/emptydir/empty_dir.go:51, perm).
const emptyDirPerm os.FileMode = 0o777

// setUpEmptyDir is emptyDir's SetUpAt (empty_dir.go:235-276): a folder
// with mode 0777, or for medium Memory a tmpfs mounted on it
// (setupTmpfs :319), then the fsGroup's ownership.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, name string, src *v1.EmptyDirVolumeSource) (volume, error) {
	dir := m.volumeDir(pod.UID, emptyDirPlugin, name)
	// Made once (empty_dir.go:241-256, the ready file): the fsGroup's
	// ownership is given then, not again at every sync to the files the
	// containers have written since.
	if _, err := os.Lstat(dir); err == nil {
		if notMnt, err := m.mounter.IsLikelyNotMountPoint(dir); err == nil && (src.Medium != v1.StorageMediumMemory || !notMnt) {
			return volume{path: dir}, nil
		}
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
		if err := setupDir(dir); err != nil {
			return volume{}, err
		}
	case v1.StorageMediumMemory:
		if !m.root {
			return volume{}, errors.New("emptyDir medium Memory needs a tmpfs mount: this node does not run as root")
		}
		if err := m.setupTmpfs(dir, m.tmpfsSize(pod, src.SizeLimit)); err != nil {
			return volume{}, err
		}
	default:
		// HugePages* need the node's hugepage pools: not on this node.
		return volume{}, fmt.Errorf("emptyDir medium %q is not supported on this node (only the default and Memory)", src.Medium)
	}
	// Upstream ignores a failed ownership change here (:268-269): the
	// volume is usable, only some files may keep their group.
	if err := m.ownership(dir, pod, false); err != nil {
		m.log("volumes %v", err)
	}
	return volume{path: dir}, nil
}

// setupDir is empty_dir.go:449-480: make the folder and make sure its mode
// is perm whatever the umask; a folder of a wrong kind is an error.
func setupDir(dir string) error {
	if err := os.MkdirAll(dir, emptyDirPerm); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if fi.Mode().Perm() != emptyDirPerm {
		return os.Chmod(dir, emptyDirPerm)
	}
	return nil
}

// setupTmpfs is empty_dir.go:319-341: idempotent, a folder that is
// already a mount point is left as it is.
func (m *Manager) setupTmpfs(dir string, size *resource.Quantity) error {
	if err := setupDir(dir); err != nil {
		return err
	}
	notMnt, err := m.mounter.IsLikelyNotMountPoint(dir)
	if err != nil {
		return err
	}
	if !notMnt {
		return nil
	}
	// generateTmpfsMountOptions (empty_dir.go:574): a size when known
	// (tmpfs's own default mode, 1777, lets every container write).
	var opts []string
	if size != nil && size.Value() > 0 {
		opts = append(opts, fmt.Sprintf("size=%d", size.Value()))
	}
	if err := m.mounter.MountSensitiveWithoutSystemd("tmpfs", dir, "tmpfs", opts, nil); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	m.log("volumes mounted tmpfs %v on %s", opts, dir)
	return nil
}

// tmpfsSize is calculateEmptyDirMemorySize (empty_dir.go:115-141): the
// node's allocatable memory, or less: the pod's memory limit, or less:
// the volume's sizeLimit. Upstream reads the pod's limit from its cgroup
// config (cm.ResourceConfigForPod); the limits' sum is the same number
// for a pod whose every container has one, and no limit otherwise.
func (m *Manager) tmpfsSize(pod *v1.Pod, sizeLimit *resource.Quantity) *resource.Quantity {
	var size *resource.Quantity
	if m.o.NodeAllocatable != nil {
		if alloc, err := m.o.NodeAllocatable(); err == nil {
			if q, ok := alloc[v1.ResourceMemory]; ok {
				size = &q
			}
		}
	}
	smaller := func(q *resource.Quantity) {
		if q != nil && q.Sign() > 0 && (size == nil || q.Cmp(*size) < 1) {
			size = q
		}
	}
	if allLimited(pod) {
		limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
		if q, ok := limits[v1.ResourceMemory]; ok {
			smaller(&q)
		}
	}
	smaller(sizeLimit)
	return size
}

// allLimited: every container has a memory limit, the only case the pod
// has one (a container without a limit may use all the node's memory).
func allLimited(pod *v1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if _, ok := c.Resources.Limits[v1.ResourceMemory]; !ok {
			return false
		}
	}
	return len(pod.Spec.Containers) > 0
}

// ownership gives the volume to the pod's fsGroup: upstream's
// VolumeOwnership (pkg/volume/volume_linux.go:53), which every plugin
// here calls after writing (configmap.go:240-245, empty_dir.go:268-269):
// group fsGroup, g+rw (g+r if readOnly), setgid folders.
func (m *Manager) ownership(dir string, pod *v1.Pod, readOnly bool) error {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	err := kubevolume.NewVolumeOwnership(&ownedVolume{dir: dir, readOnly: readOnly}, dir, sc.FSGroup, nil, nil).ChangePermissions()
	if err != nil {
		return errors.Join(fmt.Errorf("fsGroup %d on %s", *sc.FSGroup, dir), err)
	}
	return nil
}

// ownedVolume is what VolumeOwnership asks of the volume: its path and
// whether it is read-only (volume.Mounter; the rest is never called).
type ownedVolume struct {
	kubevolume.MetricsNil
	dir      string
	readOnly bool
}

func (o ownedVolume) GetPath() string                    { return o.dir }
func (o ownedVolume) SetUp(kubevolume.MounterArgs) error { return errors.New("not a mounter") }
func (o ownedVolume) SetUpAt(string, kubevolume.MounterArgs) error {
	return errors.New("not a mounter")
}
func (o ownedVolume) GetAttributes() kubevolume.Attributes {
	return kubevolume.Attributes{ReadOnly: o.readOnly, Managed: true}
}
