package volumes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/mount-utils"
	"k8s.io/utils/ptr"

	"kubelet-labs/mycore/configsecret"
)

// objects is a ConfigMap and Secret store in place of the apiserver.
type objects struct {
	cms     map[string]*v1.ConfigMap
	secrets map[string]*v1.Secret
}

func (o *objects) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := o.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (o *objects) GetSecret(ns, name string) (*v1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}
func (o *objects) RegisterPod(*v1.Pod)   {}
func (o *objects) UnregisterPod(*v1.Pod) {}

// tokens hands out a token naming what was asked.
type tokens struct {
	asked   []*authenticationv1.TokenRequest
	deleted []types.UID
}

func (t *tokens) GetServiceAccountToken(ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	t.asked = append(t.asked, tr)
	out := tr.DeepCopy()
	out.Status.Token = "token-for-" + ns + "/" + name + "/" + tr.Spec.BoundObjectRef.Name
	return out, nil
}
func (t *tokens) DeleteServiceAccountToken(uid types.UID) { t.deleted = append(t.deleted, uid) }

type env struct {
	m   *Manager
	obj *objects
	tok *tokens
	dir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{obj: &objects{cms: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}, tok: &tokens{}, dir: t.TempDir()}
	m, err := New(Options{PodsDir: e.dir, Objects: configsecret.Managers{ConfigMaps: e.obj, Secrets: e.obj}, Tokens: e.tok,
		NodeAllocatable: func() (v1.ResourceList, error) {
			return v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2")}, nil
		}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	// whatever a test leaves mounted goes before TempDir's RemoveAll
	t.Cleanup(func() {
		uids, _ := readDirNames(e.dir)
		for _, u := range uids {
			if err := m.TearDown(types.UID(u)); err != nil {
				t.Errorf("TearDown %s: %v", u, err)
			}
		}
	})
	return e
}

func pod(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid), Labels: map[string]string{"app": "x"}},
		Spec:       v1.PodSpec{ServiceAccountName: "default", Volumes: vols, Containers: []v1.Container{{Name: "c"}}},
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts")
	}
}

func TestEmptyDirIsAFolderOfThePodAndGoesWithIt(t *testing.T) {
	e := newEnv(t)
	p := pod("u1", v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "cache"}}
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "u1", "volumes", "kubernetes.io~empty-dir", "cache")
	if got := mode(t, dir); got != 0o777 {
		t.Errorf("emptyDir mode %o, want 0777", got)
	}
	if got := mode(t, filepath.Join(e.dir, "u1")); got != 0o750 {
		t.Errorf("pod folder mode %o, want 0750", got)
	}
	ms, err := e.m.Mounts(p, &p.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].HostPath != dir || ms[0].ContainerPath != "/cache" || ms[0].Readonly {
		t.Fatalf("mounts %v, want %s at /cache read-write", ms, dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.m.TearDown("u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after TearDown, the emptyDir: %v, want gone", err)
	}
	if _, err := e.m.Mounts(p, &p.Spec.Containers[0], nil); err == nil {
		t.Error("Mounts after TearDown: no error")
	}
	removed, err := e.m.CleanupOrphans(func(types.UID) bool { return false })
	if err != nil || len(removed) != 1 {
		t.Errorf("CleanupOrphans removed %v (%v), want the pod's folder", removed, err)
	}
}

func TestConfigMapVolume(t *testing.T) {
	e := newEnv(t)
	e.obj.cms["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "one", "b": "two"}}
	src := &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr.To[int32](0o644),
		Items: []v1.KeyToPath{{Key: "a", Path: "sub/a.txt", Mode: ptr.To[int32](0o400)}}}
	p := pod("u2", v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: src}})
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "u2", "volumes", "kubernetes.io~configmap", "cfg")
	if got := read(t, filepath.Join(dir, "sub/a.txt")); got != "one" {
		t.Errorf("sub/a.txt = %q, want one", got)
	}
	if got := mode(t, filepath.Join(dir, "sub/a.txt")); got != 0o400 {
		t.Errorf("sub/a.txt mode %o, want 0400 (the item's)", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); err == nil {
		t.Error("key b was written although items name only a")
	}
	ms, _ := e.m.Mounts(p, &p.Spec.Containers[0], nil)
	if len(ms) != 1 || !ms[0].Readonly {
		t.Errorf("mounts %v: a configMap is mounted read-only", ms)
	}
	// The ConfigMap changes: the next sync's SetUp writes the new value.
	e.obj.cms["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "uno"}}
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "sub/a.txt")); got != "uno" {
		t.Errorf("after the update sub/a.txt = %q, want uno", got)
	}
	// A key that is gone is an error unless optional.
	e.obj.cms["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"b": "two"}}
	if err := e.m.SetUp(p); err == nil || !strings.Contains(err.Error(), "non-existent config key: a") {
		t.Errorf("SetUp with key a gone: %v, want the missing key named", err)
	}
}

func TestMissingConfigMapKeepsThePodFromStartingUnlessOptional(t *testing.T) {
	e := newEnv(t)
	vol := func(optional bool) v1.Volume {
		return v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, DefaultMode: ptr.To[int32](0o644), Optional: &optional}}}
	}
	err := e.m.SetUp(pod("u3", vol(false)))
	if err == nil || !strings.Contains(err.Error(), `volume "cfg"`) || !strings.Contains(err.Error(), `"nope" not found`) {
		t.Errorf("SetUp with a missing ConfigMap: %v, want an error naming the volume and the ConfigMap", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "u3", "volumes", "kubernetes.io~configmap", "cfg")); err == nil {
		t.Error("the volume's folder was made although its ConfigMap is missing")
	}
	if err := e.m.SetUp(pod("u4", vol(true))); err != nil {
		t.Errorf("optional missing ConfigMap: %v, want an empty volume", err)
	}
}

func TestSecretDownwardAPIAndProjected(t *testing.T) {
	e := newEnv(t)
	e.obj.secrets["ns/s"] = &v1.Secret{Data: map[string][]byte{"pw": []byte("hunter2")}}
	e.obj.cms["ns/kube-root-ca.crt"] = &v1.ConfigMap{Data: map[string]string{"ca.crt": "CA"}}
	p := pod("u5",
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o440)}}},
		v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o644), Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory"}},
		}}}},
		// what the ServiceAccount admission plugin adds (kube-api-access-*)
		v1.Volume{Name: "api", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607), Audience: "aud"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
	)
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	vd := func(plugin, name, file string) string {
		return filepath.Join(e.dir, "u5", "volumes", plugin, name, file)
	}
	for _, c := range []struct{ path, want string }{
		{vd("kubernetes.io~secret", "sec", "pw"), "hunter2"},
		{vd("kubernetes.io~downward-api", "info", "labels"), `app="x"`},
		{vd("kubernetes.io~downward-api", "info", "mem"), "1073741824"}, // no limit: the node's allocatable
		{vd("kubernetes.io~projected", "api", "token"), "token-for-ns/default/p-u5"},
		{vd("kubernetes.io~projected", "api", "ca.crt"), "CA"},
		{vd("kubernetes.io~projected", "api", "namespace"), "ns"},
	} {
		if got := read(t, c.path); got != c.want {
			t.Errorf("%s = %q, want %q", c.path, got, c.want)
		}
	}
	if got := mode(t, vd("kubernetes.io~secret", "sec", "pw")); got != 0o440 {
		t.Errorf("secret file mode %o, want the defaultMode 0440", got)
	}
	tr := e.tok.asked[0]
	if tr.Spec.BoundObjectRef.UID != "u5" || tr.Spec.BoundObjectRef.Kind != "Pod" || len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != "aud" || *tr.Spec.ExpirationSeconds != 3607 {
		t.Errorf("TokenRequest %+v, want bound to the pod, audience aud, 3607 s", tr.Spec)
	}
	if os.Geteuid() == 0 {
		mounted, err := e.m.mounter.IsLikelyNotMountPoint(vd("kubernetes.io~secret", "sec", ""))
		if err != nil || mounted {
			t.Errorf("the secret volume is not a tmpfs mount (notMnt %v, %v): a secret must not reach the node's disk", mounted, err)
		}
	}
	if err := e.m.TearDown("u5"); err != nil {
		t.Fatal(err)
	}
	if len(e.tok.deleted) != 1 {
		t.Errorf("TearDown forgot %d pods' tokens, want 1", len(e.tok.deleted))
	}
}

func TestFSGroupOwnsTheVolumeAndTheTokenIs0640(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	p := pod("u6",
		v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "api", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](1234)}
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kubernetes.io~empty-dir/cache", "kubernetes.io~projected/api/token"} {
		fi, err := os.Stat(filepath.Join(e.dir, "u6", "volumes", f))
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 1234 {
			t.Errorf("%s: group %d, want the fsGroup 1234", f, gid)
		}
	}
	if got := mode(t, filepath.Join(e.dir, "u6", "volumes", "kubernetes.io~projected/api/token")); got != 0o640 {
		t.Errorf("token mode %o with an fsGroup, want 0640", got)
	}
}

func TestMemoryEmptyDirIsASizedTmpfs(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	p := pod("u7", v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Mi"))}}})
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	if err := e.m.SetUp(p); err != nil { // idempotent: no second mount
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "u7", "volumes", "kubernetes.io~empty-dir", "mem")
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if size := fs.Blocks * uint64(fs.Bsize); size != 8<<20 {
		t.Errorf("tmpfs size %d, want the sizeLimit 8Mi", size)
	}
	n := 0
	mps, _ := mount.New("").List()
	for _, mp := range mps {
		if mp.Path == dir {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d mounts on %s after two SetUps, want 1", n, dir)
	}
	if err := e.m.TearDown("u7"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after TearDown: %v, want the folder gone", err)
	}
}

func TestSubPathCannotEscapeTheVolume(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	secret := filepath.Join(t.TempDir(), "node-secret")
	if err := os.WriteFile(secret, []byte("node's"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := pod("u8", v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c := &p.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/data", SubPathExpr: "$(POD)/logs"}}
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	ms, err := e.m.Mounts(p, c, []kubecontainer.EnvVar{{Name: "POD", Value: "p-u8"}})
	if err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(e.dir, "u8", "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.WriteFile(filepath.Join(vol, "p-u8/logs/seen"), []byte("through the subPath"), 0o644); err != nil {
		t.Fatalf("subPathExpr's folder was not made in the volume: %v", err)
	}
	if got := read(t, filepath.Join(ms[0].HostPath, "seen")); got != "through the subPath" {
		t.Errorf("the mount's host path %s shows %q", ms[0].HostPath, got)
	}
	// A container planted a symlink in its emptyDir: the subPath naming it is refused.
	if err := os.Symlink(secret, filepath.Join(vol, "escape")); err != nil {
		t.Fatal(err)
	}
	c.VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/x", SubPath: "escape"}}
	if ms, err := e.m.Mounts(p, c, nil); err == nil {
		t.Errorf("subPath through a symlink out of the volume gave %v, want an error", ms)
	}
	for _, bad := range []string{"../x", "/abs"} {
		c.VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/x", SubPath: bad}}
		if _, err := e.m.Mounts(p, c, nil); err == nil {
			t.Errorf("subPath %q: no error", bad)
		}
	}
	if err := e.m.TearDown("u8"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, secret); got != "node's" {
		t.Errorf("the node's file changed: %q", got)
	}
}

func TestHostPathTypes(t *testing.T) {
	e := newEnv(t)
	base := t.TempDir()
	file := filepath.Join(base, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	hp := func(path string, tp v1.HostPathType) *v1.Pod {
		return pod("u9", v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &tp}}})
	}
	for _, c := range []struct {
		path string
		tp   v1.HostPathType
		ok   bool
	}{
		{file, v1.HostPathFile, true},
		{file, v1.HostPathDirectory, false},
		{base, v1.HostPathDirectory, true},
		{filepath.Join(base, "new"), v1.HostPathDirectoryOrCreate, true},
		{filepath.Join(base, "newfile"), v1.HostPathFileOrCreate, true},
		{filepath.Join(base, "missing"), v1.HostPathFile, false},
		{file, v1.HostPathSocket, false},
		{file, v1.HostPathUnset, true},
		{"relative", v1.HostPathUnset, false},
	} {
		err := e.m.SetUp(hp(c.path, c.tp))
		if (err == nil) != c.ok {
			t.Errorf("hostPath %s type %q: %v, want ok=%v", c.path, c.tp, err, c.ok)
		}
	}
	if fi, err := os.Stat(filepath.Join(base, "new")); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate did not make the folder: %v", err)
	}
	if err := e.m.TearDown("u9"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("TearDown touched the hostPath: %v", err)
	}
}

func TestUnsupportedVolumeIsRefusedByName(t *testing.T) {
	e := newEnv(t)
	p := pod("u10", v1.Volume{Name: "n", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}})
	if err := e.m.SetUp(p); err == nil || !strings.Contains(err.Error(), "NFS") {
		t.Errorf("SetUp of an NFS volume: %v, want a refusal naming NFS", err)
	}
	if err := e.m.SetUp(pod("../x")); err == nil {
		t.Error("a pod UID with a slash was accepted")
	}
}

// A missing subPath folder gets the volume's whole mode, as the kubelet
// passes it (kubelet_pods.go:351-355, hostutil GetMode): an fsGroup's
// setgid and a tmpfs root's sticky bit carry over ("EmptyDir volumes when
// FSGroup is specified … nonexistent volume subPath" wants dgtrwxrwxrwx).
func TestSubPathFolderKeepsTheVolumesMode(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	p := pod("u10", v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c := &p.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/data", SubPath: "new"}}
	if err := e.m.SetUp(p); err != nil {
		t.Fatal(err)
	}
	defer e.m.TearDown("u10")
	vol := filepath.Join(e.dir, "u10", "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.Chmod(vol, 0o777|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Mounts(p, c, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(vol, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().String(); got != "dgtrwxrwxrwx" {
		t.Errorf("subPath folder mode %s, want dgtrwxrwxrwx (the volume's, setgid and sticky kept)", got)
	}
}
