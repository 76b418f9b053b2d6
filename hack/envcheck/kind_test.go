package envcheck

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"golang.org/x/mod/semver"
	"sigs.k8s.io/kind/pkg/apis/config/defaults"
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

func TestKindConfig(t *testing.T) {
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
		// The node image is kind's own default for this kind release, by
		// digest: what kind v0.32.0 was released and tested with.
		if n.Image != defaults.Image {
			t.Errorf("nodes[%d].image = %s, want kind %s's default %s", i, n.Image, required(t, "go.mod", "sigs.k8s.io/kind"), defaults.Image)
		}
	}
	if controlPlanes != 1 {
		t.Errorf("%d control-plane nodes, want 1", controlPlanes)
	}
	if len(c.Nodes) > 2 {
		t.Errorf("%d nodes: one control-plane and at most one worker is plenty for an 8 GiB VM", len(c.Nodes))
	}

	// Version skew: the node image is the same minor as the Kubernetes this
	// module builds (go.mod), and not newer, so the real kubelet of the labs
	// is never older than the apiserver it talks to by more than the policy
	// allows, nor newer than it at all by minor.
	m := regexp.MustCompile(`^kindest/node:(v\d+\.\d+\.\d+)@sha256:[0-9a-f]{64}$`).FindStringSubmatch(defaults.Image)
	if m == nil {
		t.Fatalf("kind's default image %q is not kindest/node:vX.Y.Z@sha256:<64 hex>", defaults.Image)
	}
	k8s := required(t, repoRoot(t)+"/go.mod", "k8s.io/kubernetes")
	if semver.MajorMinor(m[1]) != semver.MajorMinor(k8s) || semver.Compare(m[1], k8s) > 0 {
		t.Errorf("node image Kubernetes %s vs go.mod's %s: want the same minor, not newer", m[1], k8s)
	}

	// Every patch targets kubeadm's v1beta4 ClusterConfiguration (what kind
	// v0.32 generates for Kubernetes 1.36; it merges v1beta4 extraArgs lists
	// by name) and sets node-monitor-grace-period like lab 00 does.
	var grace string
	for i, raw := range c.KubeadmConfigPatches {
		var p struct {
			APIVersion        string `yaml:"apiVersion"`
			Kind              string `yaml:"kind"`
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
		if p.APIVersion != "kubeadm.k8s.io/v1beta4" || p.Kind != "ClusterConfiguration" {
			t.Errorf("kubeadmConfigPatches[%d] targets %s/%s, want kubeadm.k8s.io/v1beta4 ClusterConfiguration", i, p.APIVersion, p.Kind)
		}
		for _, a := range p.ControllerManager.ExtraArgs {
			if a.Name == "node-monitor-grace-period" {
				grace = a.Value
			}
		}
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
