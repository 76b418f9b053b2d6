package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
)

// TestVolumesOnContainerd: a pod's volumes as its containers see them,
// through kubectl exec, on containerd 2.2 — a ConfigMap's key at an item's
// path, a Secret, the downward API's labels, an emptyDir shared through a
// subPathExpr, a Memory emptyDir that is a sized tmpfs, fsGroup
// ownership, and the service account token, CA and namespace the
// admission plugin projects into every pod (kube-api-access-*). The
// ConfigMap and the labels change: the files follow. A pod whose
// ConfigMap is missing waits in ContainerCreating saying why, and starts
// once the ConfigMap exists. A deleted pod's folder goes; after Ctrl-C no
// mount of the node is left.
func TestVolumesOnContainerd(t *testing.T) {
	testenv.NoLeaks(t)
	critest.Require(t, slices.Contains(critest.Flavours(), "2.2") || !critest.InCI(), "containerd 2.2 is not under test (LABS_CONTAINERD)")
	critest.Require(t, os.Geteuid() == 0, "tmpfs and subPath mounts need root")
	rt := critest.ContainerdFlavour(t, "2.2")
	const node = "t18-volumes"
	lab := startNode(t, node, "containerd-2.2", rt.Endpoint)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-volumes")
	testenv.WaitServiceAccount(t, admin, ns)
	ctx := context.Background()

	cm, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"data-1": "value-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"pw": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vols := create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vols", Namespace: ns, Labels: map[string]string{"app": "vols"}},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext:               &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)},
			Volumes: []v1.Volume{
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
					Items: []v1.KeyToPath{{Key: "data-1", Path: "path/to/data-1"}}}}},
				{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}},
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
				{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi"))}}},
			},
			Containers: []v1.Container{{
				Name: "main", Image: rt.BusyboxImage, Command: []string{"sleep", "3600"},
				Env: []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []v1.VolumeMount{
					{Name: "cfg", MountPath: "/etc/cfg"},
					{Name: "sec", MountPath: "/etc/sec"},
					{Name: "info", MountPath: "/etc/info"},
					{Name: "cache", MountPath: "/cache"},
					{Name: "cache", MountPath: "/sub", SubPathExpr: "$(POD_NAME)"},
					{Name: "mem", MountPath: "/mem"},
				},
			}},
		},
	})
	waitPod(t, admin, ns, vols.Name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	sh := func(script string) (string, int) {
		out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "exec", "vols", "--", "sh", "-c", script)
		return strings.TrimSpace(out + errOut), code
	}
	expect := func(script, want string) {
		t.Helper()
		if got, code := sh(script); code != 0 || got != want {
			t.Errorf("in the container, %s: %q (exit %d), want %q", script, got, code, want)
		}
	}
	expect("cat /etc/cfg/path/to/data-1", "value-1")
	expect("cat /etc/sec/pw", "hunter2")
	expect("stat -L -c %a /etc/sec/pw", "440") // defaultMode 0400, g+r for the fsGroup
	expect("cat /etc/info/labels", `app="vols"`)
	expect("cat /var/run/secrets/kubernetes.io/serviceaccount/namespace", ns)
	expect("head -1 /var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "-----BEGIN CERTIFICATE-----")
	expect("stat -c %g /cache", "2000")
	expect("echo through-the-subpath > /sub/f && cat /cache/vols/f", "through-the-subpath")
	expect("grep ' /mem ' /proc/mounts | cut -d' ' -f3", "tmpfs")
	expect("grep -o 'size=[0-9]*k' /proc/mounts | grep -c size=16384k", "1")
	if got, code := sh("touch /etc/cfg/new"); code == 0 {
		t.Errorf("touch in the configMap volume succeeded (%q): it must be read-only", got)
	}
	// The token: a JWT bound to this pod.
	tok, code := sh("cat /var/run/secrets/kubernetes.io/serviceaccount/token")
	if claims := jwtClaims(t, tok); code != 0 || claims.K8s.Pod.Name != "vols" || claims.K8s.Pod.UID != string(vols.UID) || claims.K8s.Node.Name != node {
		t.Errorf("token (exit %d) claims %+v, want bound to pod vols (%s) on %s", code, claims.K8s, vols.UID, node)
	}

	// The sources change: the files follow (the label at once, with the
	// pod's update; the ConfigMap at the pod's next resync, ~1 min).
	p, err := admin.CoreV1().Pods(ns).Get(ctx, "vols", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["app"] = "relabelled"
	if _, err := admin.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Data["data-1"] = "value-2"
	if _, err := admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"/etc/info/labels": `app="relabelled"`, "/etc/cfg/path/to/data-1": "value-2"} {
		testenv.PollNil(t, "the container to see "+want+" in "+file, 3*time.Minute, func() error {
			if got, code := sh("cat " + file); code != 0 || got != want {
				return fmt.Errorf("%s: %q (exit %d)", file, got, code)
			}
			return nil
		})
	}

	// A missing ConfigMap: the pod waits, saying which volume and why.
	waiting := create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "waits", Namespace: ns},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes: []v1.Volume{{Name: "later", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "later"}}}}},
			Containers: []v1.Container{{Name: "main", Image: rt.BusyboxImage, Command: []string{"sleep", "3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "later", MountPath: "/later"}}}}},
	})
	waitPod(t, admin, ns, waiting.Name, "waiting in ContainerCreating for its ConfigMap", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "ContainerCreating" && strings.Contains(w.Message, `volume "later"`) && strings.Contains(w.Message, "not found") {
				return p.Status.Phase == v1.PodPending
			}
		}
		return false
	})
	// With init containers the kubelet's default waiting reason is
	// PodInitializing, for every container (kubelet_pods.go:2499-2502):
	// a volume that is not there yet does not change it (the conformance
	// spec "InitContainer should not start app containers and fail the pod
	// if init containers fail on a RestartNever pod" watches for it).
	withInit := create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "waits-init", Namespace: ns},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes:        []v1.Volume{{Name: "later", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "later"}}}}},
			InitContainers: []v1.Container{{Name: "init", Image: rt.BusyboxImage, Command: []string{"true"}}},
			Containers: []v1.Container{{Name: "main", Image: rt.BusyboxImage, Command: []string{"sleep", "3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "later", MountPath: "/later"}}}}},
	})
	waitPod(t, admin, ns, withInit.Name, "waiting in PodInitializing (init and app containers) for its ConfigMap", func(p *v1.Pod) bool {
		all := append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, cs := range all {
			if w := cs.State.Waiting; w == nil || w.Reason != "PodInitializing" || !strings.Contains(w.Message, `volume "later"`) {
				return false
			}
		}
		return len(all) == 2 && p.Status.Phase == v1.PodPending
	})
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, admin, ns, waiting.Name, "Running once its ConfigMap exists", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	waitPod(t, admin, ns, withInit.Name, "Running once its ConfigMap exists", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	// A deleted pod's folder goes, its volumes with it.
	podDir := filepath.Join(lab.L.node.Dir, "pods", string(waiting.UID))
	if _, err := os.Stat(podDir); err != nil {
		t.Fatalf("the running pod's folder: %v", err)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctx, waiting.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "the deleted pod's folder "+podDir+" to go", 2*time.Minute, func() error {
		if _, err := os.Stat(podDir); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})

	// Ctrl-C: every pod stopped, and no mount of the node left.
	lab.Stop()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, lab.L.node.Dir) {
			t.Errorf("after Ctrl-C, a mount under the node's folder is left: %s", line)
		}
	}
}

// claims are the token's claims about what it is bound to.
type claims struct {
	K8s struct {
		Pod  struct{ Name, UID string } `json:"pod"`
		Node struct{ Name string }      `json:"node"`
	} `json:"kubernetes.io"`
}

func jwtClaims(t *testing.T, token string) claims {
	t.Helper()
	var c claims
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Errorf("the token is not a JWT: %d parts", len(parts))
		return c
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		t.Errorf("the token's claims: %v", err)
	}
	return c
}
