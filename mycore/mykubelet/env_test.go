package mykubelet

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
)

// newContainerdNode is newNode on the course's containerd instead of the
// mock: for what only a real container shows (its environment, its cgroup).
func newContainerdNode(t *testing.T, name string) (*testNode, critest.Runtime) {
	t.Helper()
	testenv.NoLeaks(t)
	rt := critest.Containerd(t)
	dir, err := os.MkdirTemp("", "kubelet-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(state.EnvVar, dir)
	j, err := node.Join(context.Background(), node.JoinOptions{Admin: testenv.AdminConfig(t), Dir: testenv.NodeDir(t, name), Name: name, Lab: "test-kubelet", NoTaint: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	n := &testNode{name: name, dir: dir, manifests: filepath.Join(dir, "manifests"), cri: critest.Dial(t, rt),
		client: j.Client, admin: testenv.AdminClient(t), log: &lines{start: time.Now()}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelet log:\n%s", n.log)
		}
	})
	return n, rt
}

// envOf waits until the container of a Running pod printed its
// environment between BEGIN and END lines (as `kubectl logs` shows it) and
// returns it as NAME → value.
func (n *testNode) envOf(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	p := n.runningPod(t, ns, name)
	id := runtimeID(p.Status.ContainerStatuses[0])
	env := map[string]string{}
	testenv.PollTrue(t, "the environment in the log of "+name, patient, func() bool {
		lines, err := n.cri.ContainerLog(context.Background(), id)
		if err != nil {
			return false
		}
		in := false
		for _, l := range lines {
			switch {
			case l.Text == "BEGIN":
				in = true
			case l.Text == "END":
				return true
			case in:
				k, v, _ := strings.Cut(l.Text, "=")
				env[k] = v
			}
		}
		return false
	})
	return env
}

// A container's environment is what makeEnvironmentVariables makes of the
// pod's envFrom and env, read from inside the container: config map and
// secret keys (with a prefix), single keys, a missing optional key that
// sets nothing, labels and IPs through the downward API, resource limits
// (with a divisor, and the node's allocatable where the container sets
// none), $(VAR) references, and the service variables of the namespace
// and of default/kubernetes. The memory limit is in the container's cgroup,
// and the status shows the container's resources.
func TestEnvSourcesOnContainerd(t *testing.T) {
	n, rt := newContainerdNode(t, "t-env")
	n.start(t, Options{})
	ns := n.namespace(t)
	ctx := context.Background()

	if _, err := n.admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"color": "blue", "size": "9"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := n.admin.CoreV1().Services(ns).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := n.admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeObj, err := n.admin.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	yes := true
	mi := resource.MustParse("1Mi")
	const script = `echo BEGIN; env; echo "MEMMAX=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"; echo END; sleep 3600`
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "env", Namespace: ns, Labels: map[string]string{"app": "env-test"}},
		Spec: v1.PodSpec{NodeName: n.name, Containers: []v1.Container{{
			Name: "main", Image: rt.BusyboxImage, Command: []string{"sh", "-c", script},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}},
			EnvFrom: []v1.EnvFromSource{
				{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: &yes}},
			},
			Env: []v1.EnvVar{
				{Name: "COLOR", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "color"}}},
				{Name: "PASS", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
				{Name: "NOPE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "nope", Optional: &yes}}},
				{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "HOST_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIPs"}}},
				{Name: "POD_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
				{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: mi}}},
				{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "SUMMARY", Value: "$(COLOR)-$(CM_size)-$(WEB_SERVICE_PORT)-$(LATER)"},
				{Name: "LATER", Value: "late"},
			},
		}}},
	}
	if _, err := n.admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := n.envOf(t, ns, "env")

	cpus := nodeObj.Status.Allocatable[v1.ResourceCPU]
	want := map[string]string{
		"CM_color": "blue", "CM_size": "9", "password": "s3cret",
		"COLOR": "blue", "PASS": "s3cret", "APP": "env-test",
		"HOST_IPS": "127.0.0.1",
		"MEM_MI":   "64", "MEMMAX": strconv.Itoa(64 << 20),
		// no limit: the node's allocatable, rounded up to whole CPUs
		"CPU_LIMIT": strconv.FormatInt((cpus.MilliValue()+999)/1000, 10),
		// $(LATER) is defined after SUMMARY: left as written
		"SUMMARY":                 "blue-9-8080-$(LATER)",
		"WEB_SERVICE_HOST":        svc.Spec.ClusterIP,
		"WEB_SERVICE_PORT":        "8080",
		"KUBERNETES_SERVICE_HOST": kube.Spec.ClusterIP,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("in the container %s=%q, want %q", k, env[k], v)
		}
	}
	if v, ok := env["NOPE"]; ok {
		t.Errorf("NOPE=%q is set; an optional missing key sets nothing", v)
	}
	p, err := n.getPod(ns, "env")
	if err != nil {
		t.Fatal(err)
	}
	if env["POD_IPS"] == "" || env["POD_IPS"] != p.Status.PodIP {
		t.Errorf("POD_IPS=%q, want the pod's IP %q", env["POD_IPS"], p.Status.PodIP)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.Resources == nil || cs.Resources.Limits.Memory().Cmp(resource.MustParse("64Mi")) != 0 {
		t.Errorf("status.containerStatuses[0].resources = %v, want limits.memory 64Mi", cs.Resources)
	}
	if got := cs.AllocatedResources[v1.ResourceMemory]; got.Cmp(resource.MustParse("64Mi")) != 0 {
		t.Errorf("status.containerStatuses[0].allocatedResources = %v, want memory 64Mi (the request, defaulted to the limit)", cs.AllocatedResources)
	}
}

// A host-network pod has the node's IPs: its status.podIP and what its
// container reads through the downward API, as upstream's e2e "should
// provide host IP and pod IP as an env var if pod uses host network"
// checks (containerd reports no IP for such a sandbox).
func TestHostNetworkPodIPOnContainerd(t *testing.T) {
	n, rt := newContainerdNode(t, "t-hostnet")
	n.start(t, Options{})
	ns := n.namespace(t)
	field := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet", Namespace: ns},
		Spec: v1.PodSpec{NodeName: n.name, HostNetwork: true, Containers: []v1.Container{{
			Name: "main", Image: rt.BusyboxImage,
			Command: []string{"sh", "-c", `echo BEGIN; echo "POD_IP=$POD_IP"; echo "HOST_IP=$HOST_IP"; echo END; sleep 3600`},
			Env:     []v1.EnvVar{{Name: "POD_IP", ValueFrom: field("status.podIP")}, {Name: "HOST_IP", ValueFrom: field("status.hostIP")}},
		}}},
	}
	if _, err := n.admin.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := n.envOf(t, ns, "hostnet")
	if env["POD_IP"] != "127.0.0.1" || env["HOST_IP"] != "127.0.0.1" {
		t.Errorf("in the container POD_IP=%q HOST_IP=%q, want the node's 127.0.0.1 for both", env["POD_IP"], env["HOST_IP"])
	}
	p, err := n.getPod(ns, "hostnet")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.PodIP != "127.0.0.1" {
		t.Errorf("status.podIP %q, want the node's 127.0.0.1", p.Status.PodIP)
	}
}
