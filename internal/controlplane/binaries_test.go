package controlplane_test

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/testenv"
)

func binary(t *testing.T, name string) controlplane.Binary {
	for _, b := range controlplane.Binaries {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no binary %s", name)
	return controlplane.Binary{}
}

// TestEtcdVersionIsTheBuiltOne: the progress line says which etcd is
// built; it must be the version inside the binary, not Kubernetes'.
func TestEtcdVersionIsTheBuiltOne(t *testing.T) {
	root, binDir := testenv.Binaries(t)
	etcd := binary(t, "etcd")
	said := etcd.Version(root)
	if !strings.HasPrefix(said, "v3.") {
		t.Errorf("etcd version %q, want v3.x", said)
	}
	info, err := buildinfo.ReadFile(filepath.Join(binDir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	// `go build` of a command from a dependency records that module as Main.
	var built string
	if info.Main.Path == etcd.Module {
		built = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == etcd.Module {
			built = d.Version
			if d.Replace != nil {
				built = d.Replace.Version
			}
		}
	}
	if built != said {
		t.Errorf("progress says etcd %s, the binary was built from %s %q", said, etcd.Module, built)
	}
	if v := binary(t, "kube-apiserver").Version(root); v != controlplane.KubernetesVersion {
		t.Errorf("kube-apiserver version %q", v)
	}
}

func TestVersionFromGoMod(t *testing.T) {
	etcd := binary(t, "etcd")
	for _, c := range []struct{ gomod, want string }{
		{"module x\n\nrequire go.etcd.io/etcd/server/v3 v3.6.1\n", "v3.6.1"},
		{"module x\n\nrequire (\n\tfoo v1.0.0\n\tgo.etcd.io/etcd/server/v3 v3.6.2 // indirect\n)\n", "v3.6.2"},
		{"module x\n\nrequire go.etcd.io/etcd/server/v3 v3.6.1\n\nreplace go.etcd.io/etcd/server/v3 => go.etcd.io/etcd/server/v3 v3.6.9\n", "v3.6.9"},
	} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte(c.gomod), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := etcd.Version(root); got != c.want {
			t.Errorf("go.mod:\n%s\nversion %q, want %q", c.gomod, got, c.want)
		}
	}
	if got := etcd.Version(t.TempDir()); !strings.Contains(got, "unknown") {
		t.Errorf("no go.mod: version %q, want it to say unknown", got)
	}
}
