package kuberuntime_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"kubelet-labs/mycore/kuberuntime"
)

// The order and precedence of makeEnvironmentVariables, which a test
// through the apiserver cannot pin down (its objects are the same either
// way): in-memory config maps, secrets and services, the runtime config's
// env list as the runtime gets it. TestEnvSourcesOnContainerd
// (mycore/mykubelet) reads the real thing from inside a container.

type objects struct {
	cms     map[string]*v1.ConfigMap
	secrets map[string]*v1.Secret
}

func (o objects) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := o.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
}

func (o objects) GetSecret(ns, name string) (*v1.Secret, error) {
	if s, ok := o.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}

type services []*v1.Service

func (s services) List(labels.Selector) ([]*v1.Service, error) { return s, nil }

func svc(ns, name, ip string, port int32) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: port}}}}
}

func envManager() *kuberuntime.Manager {
	return kuberuntime.New(nil, kuberuntime.Options{Env: &kuberuntime.EnvSources{
		Objects: objects{
			cms: map[string]*v1.ConfigMap{
				"one":    {Data: map[string]string{"A": "1", "B": "1"}},
				"two":    {Data: map[string]string{"B": "2", "C": "2"}},
				"dashes": {Data: map[string]string{"data-1": "value-1"}},
			},
			secrets: map[string]*v1.Secret{"s": {Data: map[string][]byte{"K": []byte("secret")}}},
		},
		Services: services{
			svc("default", "kubernetes", "10.0.0.1", 443),
			svc("ns", "web", "10.0.0.9", 80),
			svc("ns", "headless", "None", 80), // no variables: no cluster IP
			svc("other", "db", "10.0.0.7", 5432),
		},
		ServicesSynced: func() bool { return true },
		NodeAllocatable: func() (v1.ResourceList, error) {
			return v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")}, nil
		},
	}})
}

func envOf(t *testing.T, m *kuberuntime.Manager, pod *v1.Pod) ([]string, error) {
	t.Helper()
	cfg, err := m.ContainerConfig(pod, &pod.Spec.Containers[0], 0, kuberuntime.PodIPs{}, rootImage)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range cfg.Envs {
		out = append(out, kv.Key+"="+string(kv.Value))
	}
	return out, nil
}

func envPod(links bool, c v1.Container) *v1.Pod {
	c.Name, c.Image = "app", "busybox"
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{EnableServiceLinks: &links, Containers: []v1.Container{c}}}
}

func TestEnvOrderAndPrecedence(t *testing.T) {
	m := envManager()
	cm := func(name string) *v1.ConfigMapEnvSource {
		return &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: name}}
	}
	got, err := envOf(t, m, envPod(true, v1.Container{
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: cm("one")}, {ConfigMapRef: cm("two")}, {Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}},
		Env: []v1.EnvVar{
			{Name: "C", Value: "$(A)$(B)-$(WEB_SERVICE_PORT)-$(D)"}, // D comes later: left as written
			{Name: "D", Value: "d"},
			{Name: "WEB_SERVICE_HOST", Value: "mine"},
			{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		},
		Command: []string{"echo", "$(C)"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	// envFrom first (a later source wins, the first definition keeps its
	// place), then env's new names, then the service variables not
	// defined above, sorted; web's (same namespace) and kubernetes' only.
	want := []string{"A=1", "B=2", "C=12-80-$(D)", "S_K=secret", "D=d", "WEB_SERVICE_HOST=mine", "MEM=2048"}
	if strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("env starts %v, want %v", got[:min(len(want), len(got))], want)
	}
	rest := strings.Join(got[len(want):], " ")
	for _, v := range []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "WEB_SERVICE_PORT=80", "WEB_PORT=tcp://10.0.0.9:80"} {
		if !strings.Contains(rest, v) {
			t.Errorf("service variables %q lack %s", rest, v)
		}
	}
	for _, v := range []string{"WEB_SERVICE_HOST=", "DB_", "HEADLESS_"} {
		if strings.Contains(rest, v) {
			t.Errorf("service variables %q have %s", rest, v)
		}
	}

	// enableServiceLinks false: only the master service.
	got, err = envOf(t, m, envPod(false, v1.Container{}))
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); strings.Contains(s, "WEB_") || !strings.Contains(s, "KUBERNETES_SERVICE_HOST=10.0.0.1") {
		t.Errorf("enableServiceLinks false: %s, want kubernetes' variables only", s)
	}
}

// What upstream reports for a missing object or key, and what an optional
// reference skips.
func TestEnvMissingSources(t *testing.T) {
	m := envManager()
	yes := true
	ref := func(name, key string, optional bool) *v1.EnvVarSource {
		s := &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}
		if optional {
			s.Optional = &yes
		}
		return &v1.EnvVarSource{ConfigMapKeyRef: s}
	}
	for _, c := range []struct {
		c    v1.Container
		want string // error, or the env
	}{
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("nope", "k", false)}}}, `error: configmaps "nope" not found`},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("one", "nokey", false)}}}, `error: couldn't find key nokey in ConfigMap ns/one`},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("nope", "k", true)}, {Name: "Y", ValueFrom: ref("one", "nokey", true)}}}, ``},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "nokey"}}}}}, `error: couldn't find key nokey in Secret ns/s`},
		{v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}}}, `error: secrets "gone" not found`},
		{v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: &yes}}}}, ``},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}}}}, `X=`},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.containers"}}}}}, `error: field label not supported: spec.containers`},
	} {
		got, err := envOf(t, m, envPod(false, c.c))
		var s []string
		for _, kv := range got {
			if !strings.HasPrefix(kv, "KUBERNETES_") {
				s = append(s, kv)
			}
		}
		res := strings.Join(s, " ")
		if err != nil {
			res = fmt.Sprintf("error: %v", err)
		}
		if res != c.want {
			t.Errorf("%+v: %q, want %q", c.c, res, c.want)
		}
	}
}

// The CPU and memory the runtime is asked for (generateLinuxContainerResources):
// shares from the request, quota from the limit over the 100 ms period,
// the memory limit in bytes, and a Burstable pod's oom_score_adj between
// the Guaranteed -997 and the BestEffort 1000.
func TestContainerResourcesToCRI(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{MemoryCapacity: 4 << 30})
	pod := envPod(true, v1.Container{Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}})
	cfg, err := m.ContainerConfig(pod, &pod.Spec.Containers[0], 0, kuberuntime.PodIPs{}, rootImage)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.GetLinux().GetResources()
	if r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 64<<20 {
		t.Errorf("resources %+v, want shares 256, quota 50000, period 100000, memory %d", r, 64<<20)
	}
	// 1000 - 1000*32Mi/4Gi = 993 (qos.GetContainerOOMScoreAdjust)
	if r.OomScoreAdj != 993 {
		t.Errorf("oom_score_adj %d, want 993 (Burstable, 32Mi of 4Gi requested)", r.OomScoreAdj)
	}
	best := envPod(true, v1.Container{})
	cfg, err = m.ContainerConfig(best, &best.Spec.Containers[0], 0, kuberuntime.PodIPs{}, rootImage)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.GetLinux().GetResources(); r.CpuShares != 2 || r.CpuQuota != 0 || r.MemoryLimitInBytes != 0 || r.OomScoreAdj != 1000 {
		t.Errorf("BestEffort resources %+v, want shares 2, quota 0 (none: MilliCPUToQuota of no limit), no memory limit, oom_score_adj 1000", r)
	}
}

// TestEnvFromKeysThatAreNotShellNames: envFrom passes every key, with any
// prefix, as upstream does since the relaxed environment-variable
// validation (the conformance specs "consumable via the environment" with
// prefixes "p-", "1-", "$_-", "#@!"). Whether a container's shell keeps
// them is the image's business (hack/conformance/BASELINE.md).
func TestEnvFromKeysThatAreNotShellNames(t *testing.T) {
	var from []v1.EnvFromSource
	for _, prefix := range []string{"", "p-", "1-", "$_-", "#@!"} {
		from = append(from, v1.EnvFromSource{Prefix: prefix, ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "dashes"}}})
	}
	got, err := envOf(t, envManager(), envPod(false, v1.Container{EnvFrom: from}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data-1=value-1", "p-data-1=value-1", "1-data-1=value-1", "$_-data-1=value-1", "#@!data-1=value-1"} {
		if !slices.Contains(got, want) {
			t.Errorf("env %v lacks %s", got, want)
		}
	}
}
