package kuberuntime

import (
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod with spec.subdomain is named in the node's cluster domain in its
// /etc/hosts — the kubelet's --cluster-domain, whatever it is
// (GeneratePodHostNameAndDomain, kubelet_pods.go:608-614) — and with the
// kubelet's default "" the name ends in "svc.", as upstream writes it.
func TestEtcHostsNamesThePodInTheClusterDomain(t *testing.T) {
	for _, tc := range []struct{ domain, want string }{
		{"corp.internal", "10.1.2.3\tmyhost.mysub.shop.svc.corp.internal\tmyhost\n"},
		{"", "10.1.2.3\tmyhost.mysub.shop.svc.\tmyhost\n"},
	} {
		m := New(nil, Options{PodsDir: t.TempDir(), ClusterDomain: tc.domain})
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
			Spec: v1.PodSpec{Hostname: "myhost", Subdomain: "mysub", Containers: []v1.Container{{Name: "c"}}}}
		mount, err := m.hostsMount(pod, &pod.Spec.Containers[0], []string{"10.1.2.3"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(mount.HostPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("--cluster-domain %q: /etc/hosts\n%s\nhas no line %q", tc.domain, got, tc.want)
		}
	}
}
