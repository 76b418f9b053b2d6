package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
	"k8s.io/mount-utils"

	"kubelet-labs/mycore/configsecret"
)

// TokenGetter gets a service account token for a pod, as upstream's
// token.Manager does (pkg/kubelet/token/token_manager.go:104): cached and
// refreshed once 80% of its life has passed.
type TokenGetter interface {
	GetServiceAccountToken(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	DeleteServiceAccountToken(podUID types.UID)
}

// Options configure a Manager.
type Options struct {
	// PodsDir is the node's folder of pod data (the kubelet's ROOT/pods).
	// Required. Root-only: the node writes and removes in it as root.
	PodsDir string
	// Objects get the ConfigMaps and Secrets the volumes name.
	Objects configsecret.Managers
	// Tokens get service account tokens for projected volumes; nil refuses
	// serviceAccountToken sources with a clear error.
	Tokens TokenGetter
	// NodeAllocatable is the node's allocatable resources, for the
	// downward API's resourceFieldRef without a limit and the default
	// size of a Memory emptyDir; nil: such requests fail with a clear
	// error (and a Memory emptyDir is sized by its limits only).
	NodeAllocatable func() (v1.ResourceList, error)
	// Log, if set, gets one line per volume made or removed.
	Log func(format string, args ...any)
}

// Manager sets up and tears down pods' volumes. Safe for concurrent use:
// the pod workers sync different pods at once; one pod's volumes are
// only ever handled by its own worker (and by TearDown once it is over).
type Manager struct {
	o        Options
	mounter  mount.Interface
	subpaths subpath.Interface
	log      func(format string, args ...any)
	// root: the node may mount (tmpfs, subPath bind mounts) and chown.
	// A learner's node runs as the learner: secret, downwardAPI and
	// projected files then go to disk in the learner's own folder (not a
	// tmpfs), and a Memory emptyDir or a subPath is refused by name.
	root bool

	mu sync.Mutex
	// ready: the volumes of each pod that SetUp made, by name.
	ready map[types.UID]map[string]volume
}

// volume is one volume set up for a pod.
type volume struct {
	path string
	// readOnly: the plugin forces read-only mounts (configMap, secret,
	// downwardAPI, projected: GetAttributes().ReadOnly upstream).
	readOnly bool
}

// New returns a Manager.
func New(o Options) (*Manager, error) {
	if o.PodsDir == "" {
		return nil, errors.New("volumes: Options.PodsDir is required")
	}
	if !filepath.IsAbs(o.PodsDir) {
		return nil, fmt.Errorf("volumes: PodsDir %q is not an absolute path", o.PodsDir)
	}
	m := &Manager{o: o, mounter: mount.New(""), log: o.Log, ready: map[types.UID]map[string]volume{}, root: os.Geteuid() == 0}
	m.subpaths = subpath.New(m.mounter)
	if m.log == nil {
		m.log = func(string, ...any) {}
	}
	return m, nil
}

// Plugin folder names (each plugin's utilstrings.EscapeQualifiedName of
// its kubernetes.io/NAME).
const (
	emptyDirPlugin    = "kubernetes.io~empty-dir"
	configMapPlugin   = "kubernetes.io~configmap"
	secretPlugin      = "kubernetes.io~secret"
	downwardAPIPlugin = "kubernetes.io~downward-api"
	projectedPlugin   = "kubernetes.io~projected"
	// subpathDir is upstream's containerSubPathDirectoryName.
	subpathDir = "volume-subpaths"
)

// PodDir is the pod's folder: PodsDir/UID (kubelet_getters.go getPodDir).
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.o.PodsDir, string(uid))
}

func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", plugin, name)
}

// SetUp makes every volume of the pod, or says which one it could not
// make. Called at every sync of a pod that runs: emptyDir and hostPath are
// made once, the others have their files written again when their source
// changed (AtomicWriter writes nothing when nothing changed).
func (m *Manager) SetUp(pod *v1.Pod) error {
	if err := validUID(pod.UID); err != nil {
		return err
	}
	made := map[string]volume{}
	var errs []error
	if len(pod.Spec.Volumes) > 0 {
		// PodDir is the node's: no one else may reach the volumes'
		// folders, some of which any container may write (0777).
		if err := os.MkdirAll(m.PodDir(pod.UID), 0o750); err != nil {
			return err
		}
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		v, err := m.setUpVolume(pod, vol)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		made[vol.Name] = v
	}
	m.mu.Lock()
	m.ready[pod.UID] = made
	m.mu.Unlock()
	return errors.Join(errs...)
}

func (m *Manager) setUpVolume(pod *v1.Pod, vol *v1.Volume) (volume, error) {
	src := &vol.VolumeSource
	switch {
	case src.EmptyDir != nil:
		return m.setUpEmptyDir(pod, vol.Name, src.EmptyDir)
	case src.HostPath != nil:
		return setUpHostPath(src.HostPath)
	case src.ConfigMap != nil:
		return m.setUpAtomic(pod, configMapPlugin, vol.Name, v1.StorageMediumDefault, func(fsUser *int64) (payload, error) {
			return m.configMapPayload(pod, src.ConfigMap)
		})
	case src.Secret != nil:
		return m.setUpAtomic(pod, secretPlugin, vol.Name, v1.StorageMediumMemory, func(fsUser *int64) (payload, error) {
			return m.secretPayload(pod, src.Secret)
		})
	case src.DownwardAPI != nil:
		return m.setUpAtomic(pod, downwardAPIPlugin, vol.Name, v1.StorageMediumMemory, func(fsUser *int64) (payload, error) {
			return m.downwardAPIPayload(pod, src.DownwardAPI.Items, src.DownwardAPI.DefaultMode)
		})
	case src.Projected != nil:
		return m.setUpAtomic(pod, projectedPlugin, vol.Name, v1.StorageMediumMemory, func(fsUser *int64) (payload, error) {
			return m.projectedPayload(pod, vol.Name, src.Projected, fsUser)
		})
	}
	return volume{}, fmt.Errorf("this node does not support the volume type of %s (only emptyDir, hostPath, configMap, secret, downwardAPI and projected)", volumeKind(src))
}

// volumeKind names the source's type (its one non-nil field), for the
// refusal.
func volumeKind(src *v1.VolumeSource) string {
	v := reflect.ValueOf(*src)
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return v.Type().Field(i).Name
		}
	}
	return "an empty volume source"
}

// validUID refuses a UID that is not a single path element: it names a
// folder the node removes as root.
func validUID(uid types.UID) error {
	s := string(uid)
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return fmt.Errorf("pod UID %q cannot name a folder", s)
	}
	return nil
}

// Volume is the host path of a volume SetUp made, and whether the plugin
// mounts it read-only.
func (m *Manager) volume(uid types.UID, name string) (volume, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.ready[uid][name]
	return v, ok
}

// TearDown unmounts and removes the volumes of a pod that is over: its
// tmpfs mounts and subPath bind mounts are unmounted, its service account
// tokens forgotten, PodDir/volumes and PodDir/volume-subpaths removed —
// the emptyDir's data with them, as emptyDir's TearDownAt does. HostPath
// folders are the node's and stay. Nothing is removed while anything
// under the pod's folder is still mounted.
func (m *Manager) TearDown(uid types.UID) error {
	if err := validUID(uid); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.ready, uid)
	m.mu.Unlock()
	if m.o.Tokens != nil {
		m.o.Tokens.DeleteServiceAccountToken(uid)
	}
	podDir := m.PodDir(uid)
	var errs []error
	// subPath bind mounts first: they may point into any volume.
	if names, err := readDirNames(filepath.Join(podDir, subpathDir)); err != nil {
		errs = append(errs, err)
	} else {
		for _, name := range names {
			if err := m.subpaths.CleanSubPaths(podDir, name); err != nil {
				errs = append(errs, fmt.Errorf("subPath mounts of volume %q: %w", name, err))
			}
		}
	}
	// Then every volume folder that is a mount point (tmpfs).
	plugins, err := readDirNames(filepath.Join(podDir, "volumes"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range plugins {
		names, err := readDirNames(filepath.Join(podDir, "volumes", p))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, n := range names {
			dir := filepath.Join(podDir, "volumes", p, n)
			notMnt, err := m.mounter.IsLikelyNotMountPoint(dir)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			if err == nil && !notMnt {
				if err := m.mounter.Unmount(dir); err != nil {
					errs = append(errs, fmt.Errorf("unmount %s: %w", dir, err))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := m.removeUnmounted(podDir, "volumes", subpathDir); err != nil {
		return err
	}
	m.log("volumes removed the volumes of pod %s", uid)
	return nil
}

// CleanupOrphans tears down and removes the folder of every pod in
// PodsDir that keep does not want: cleanupOrphanedPodDirs
// (kubelet_volumes.go:169), for pods the node no longer has nor runs.
// It returns the folders it removed.
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) ([]string, error) {
	uids, err := readDirNames(m.o.PodsDir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, u := range uids {
		uid := types.UID(u)
		if keep(uid) || validUID(uid) != nil {
			continue
		}
		if err := m.TearDown(uid); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
			continue
		}
		dir := m.PodDir(uid)
		if err := m.removeUnmounted(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// removeUnmounted removes dir/sub for each sub (dir itself without subs),
// unless something is still mounted under it: RemoveAll would then
// delete the files of whatever is mounted there (a hostPath behind a
// subPath bind mount), which upstream refuses the same way
// (podVolumesExist, kubelet_volumes.go:198).
func (m *Manager) removeUnmounted(dir string, subs ...string) error {
	mps, err := m.mounter.List()
	if err != nil {
		return fmt.Errorf("list mounts: %w", err)
	}
	for _, mp := range mps {
		if mount.PathWithinBase(mp.Path, dir) || mp.Path == dir {
			return fmt.Errorf("%s is still mounted: not removing %s", mp.Path, dir)
		}
	}
	if len(subs) == 0 {
		subs = []string{""}
	}
	for _, s := range subs {
		// RemoveAll removes symlinks, never what they point to.
		if err := os.RemoveAll(filepath.Join(dir, s)); err != nil {
			return err
		}
	}
	return nil
}

// readDirNames lists a folder; a missing one is empty.
func readDirNames(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(es))
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}
