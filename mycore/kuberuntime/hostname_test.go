package kuberuntime

import (
	"context"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The sandbox's hostname is what the kernel will take: a 65-character pod
// name (the length upstream's e2e tests use) is cut to 63 without a
// trailing '-' or '.'; hostnameOverride and spec.hostname win over the
// name; a host-network pod gets none (it has the node's).
func TestSandboxHostnameIsWhatTheKernelTakes(t *testing.T) {
	// No host DNS (an empty resolv.conf): only the hostname is read here.
	m := New(nil, Options{ResolvConf: os.DevNull})
	long := strings.Repeat("a", 61) + "-b.cd" // 66: cut at 63 ends in "-b", then "…a-b"
	override := "over.ride"
	cases := []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"the pod's name", v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, "web"},
		{"spec.hostname", v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Hostname: "host"}}, "host"},
		{"hostnameOverride over spec.hostname", v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Hostname: "host", HostnameOverride: &override}}, "over.ride"},
		{"a long name, cut", v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, strings.Repeat("a", 61) + "-b"},
		{"cut, then no trailing '-'", v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 62) + "-xyz"}}, strings.Repeat("a", 62)},
		{"host network: none", v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{HostNetwork: true}}, ""},
	}
	for _, c := range cases {
		cfg, err := m.SandboxConfig(context.Background(), &c.pod, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.Hostname
		if got != c.want {
			t.Errorf("%s: hostname %q, want %q", c.name, got, c.want)
		}
		if len(got) > 63 {
			t.Errorf("%s: hostname of %d characters: sethostname refuses more than 63", c.name, len(got))
		}
	}
}
