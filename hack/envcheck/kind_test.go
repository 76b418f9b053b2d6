package envcheck

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// decodeKindConfig decodes like kind v0.32.0 does (its internal
// pkg/internal/apis/config/encoding.Parse): go.yaml.in/yaml/v3 with
// KnownFields, into the public v1alpha4.Cluster, so an unknown or misspelt
// field is an error here exactly as in `kind create cluster`.
func decodeKindConfig(b []byte) (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	if err := d.Decode(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// scriptVar is the value of a NAME=value line of a script of the repository.
func scriptVar(t *testing.T, rel, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=([^\s"'$]+)$`).FindSubmatch(readRepoFile(t, rel))
	if m == nil {
		t.Fatalf("%s: no line %s=value", rel, name)
	}
	return string(m[1])
}

func TestKindConfig(t *testing.T) {
	// the name scripts/kind/build-image.sh gives the image it builds
	nodeImage := scriptVar(t, "scripts/kind/build-image.sh", "NODE_IMAGE")
	b := readRepoFile(t, "yaml/kind-config.yaml")
	c, err := decodeKindConfig(b)
	if err != nil {
		t.Fatalf("kind would reject yaml/kind-config.yaml: %v", err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Fatalf("kind/apiVersion = %s/%s, want Cluster/kind.x-k8s.io/v1alpha4", c.Kind, c.APIVersion)
	}
	v1alpha4.SetDefaultsCluster(c)

	controlPlanes := 0
	for i, n := range c.Nodes {
		switch n.Role {
		case v1alpha4.ControlPlaneRole:
			controlPlanes++
		case v1alpha4.WorkerRole:
		default:
			t.Errorf("nodes[%d].role %q is neither control-plane nor worker", i, n.Role)
		}
		// The node image is the one scripts/kind/build-image.sh makes and
		// names, by tag: kind pulls an image named with a digest, and a
		// loaded one has none.
		if n.Image != nodeImage {
			t.Errorf("nodes[%d].image = %s, want %s, the image scripts/kind/build-image.sh builds", i, n.Image, nodeImage)
		}
	}
	// kind's own nodes carry the label docs/vm.md §3 and hack/kindtest pin
	// kind's DaemonSets to (TestDocsMatchVM checks the docs' commands)
	for i, n := range c.Nodes {
		if n.Labels["kubelet-labs/kind-node"] != "true" {
			t.Errorf("nodes[%d] has no label kubelet-labs/kind-node=true: kind's DaemonSets would run on the labs' nodes", i)
		}
	}
	if !strings.Contains(string(readRepoFile(t, "hack/kindtest/kind.sh")), `{"nodeSelector":{"kubelet-labs/kind-node":"true"}}`) {
		t.Errorf("hack/kindtest/kind.sh does not pin kind's DaemonSets to kubelet-labs/kind-node=true as docs/vm.md §3 does")
	}
	if controlPlanes != 1 {
		t.Errorf("%d control-plane nodes, want 1", controlPlanes)
	}
	if len(c.Nodes) > 2 {
		t.Errorf("%d nodes: one control-plane and at most one worker is plenty for an 8 GiB VM", len(c.Nodes))
	}

	// The node image is built from the Kubernetes this module pins (go.mod):
	// its tag says that version, and the script builds that version.
	k8s := required(t, repoRoot(t)+"/go.mod", "k8s.io/kubernetes")
	if !strings.HasSuffix(nodeImage, ":"+k8s) {
		t.Errorf("node image %s is not tagged with go.mod's Kubernetes %s", nodeImage, k8s)
	}
	if v := scriptVar(t, "scripts/kind/versions.sh", "KUBERNETES_VERSION"); v != k8s {
		t.Errorf("scripts/kind/versions.sh builds Kubernetes %s, go.mod pins %s", v, k8s)
	}
	if v := scriptVar(t, "scripts/kind/versions.sh", "KIND_VERSION"); v != required(t, "go.mod", "sigs.k8s.io/kind") {
		t.Errorf("scripts/kind/versions.sh follows kind %s, hack/envcheck/go.mod pins %s", v, required(t, "go.mod", "sigs.k8s.io/kind"))
	}

	// The patches: kubeadm's v1beta4 ClusterConfiguration (what kind v0.32
	// generates for Kubernetes 1.36; it merges v1beta4 extraArgs lists by
	// name) setting node-monitor-grace-period like lab 00 does, and the
	// KubeletConfiguration that lets the kubelet run on a cgroup v1 host.
	var grace, apiCall string
	failCgroupV1 := true
	for i, raw := range c.KubeadmConfigPatches {
		var p struct {
			APIVersion   string `yaml:"apiVersion"`
			Kind         string `yaml:"kind"`
			FailCgroupV1 *bool  `yaml:"failCgroupV1"`
			Timeouts     struct {
				KubernetesAPICall string `yaml:"kubernetesAPICall"`
			} `yaml:"timeouts"`
			ControllerManager struct {
				ExtraArgs []struct {
					Name  string `yaml:"name"`
					Value string `yaml:"value"`
				} `yaml:"extraArgs"`
			} `yaml:"controllerManager"`
		}
		d := yaml.NewDecoder(strings.NewReader(raw))
		d.KnownFields(true)
		if err := d.Decode(&p); err != nil {
			t.Fatalf("kubeadmConfigPatches[%d]: %v", i, err)
		}
		switch {
		case p.APIVersion == "kubeadm.k8s.io/v1beta4" && p.Kind == "ClusterConfiguration":
			for _, a := range p.ControllerManager.ExtraArgs {
				if a.Name == "node-monitor-grace-period" {
					grace = a.Value
				}
			}
		case p.APIVersion == "kubeadm.k8s.io/v1beta4" && p.Kind == "InitConfiguration":
			apiCall = p.Timeouts.KubernetesAPICall
		case p.Kind == "KubeletConfiguration" && p.APIVersion == "" && p.FailCgroupV1 != nil:
			// no apiVersion: kind then matches the patch on kind alone
			// (its internal/patch/resource.go), whatever version it writes
			failCgroupV1 = *p.FailCgroupV1
		default:
			t.Errorf("kubeadmConfigPatches[%d] targets %s/%s, want kubeadm.k8s.io/v1beta4 ClusterConfiguration or InitConfiguration (timeouts), or KubeletConfiguration (failCgroupV1)", i, p.APIVersion, p.Kind)
		}
	}
	// kubeadm's first call to a new apiserver may wait longer than its
	// default minute (a VM under TCG needed more)
	if d, err := time.ParseDuration(apiCall); err != nil || d < 3*time.Minute {
		t.Errorf("InitConfiguration timeouts.kubernetesAPICall = %q, want at least 3m (a slow VM's apiserver needs more than kubeadm's 1m)", apiCall)
	}
	if failCgroupV1 {
		t.Errorf("no KubeletConfiguration patch with failCgroupV1: false: on a cgroup v1 host the kubelet of Kubernetes 1.36 would refuse to start")
	}
	d, err := time.ParseDuration(grace)
	if err != nil {
		t.Fatalf("node-monitor-grace-period %q: %v", grace, err)
	}
	// lab 00's value; at least 3 lease renew intervals (10s) so nodes do not flap
	if d != 30*time.Second {
		t.Errorf("node-monitor-grace-period = %s, want 30s like the embedded control plane (README.md)", d)
	}
}

// TestKindConfigDecodingIsStrict: the decoder above rejects what kind
// rejects, so TestKindConfig means something.
func TestKindConfigDecodingIsStrict(t *testing.T) {
	b := readRepoFile(t, "yaml/kind-config.yaml")
	for name, bad := range map[string][]byte{
		"unknown top-level field": append(bytes.Clone(b), []byte("nodez: []\n")...),
		"misspelt node field":     bytes.Replace(b, []byte("    image: "), []byte("    imag: "), 1),
	} {
		if bytes.Equal(bad, b) {
			t.Fatalf("%s: mutation did not apply", name)
		}
		if _, err := decodeKindConfig(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
