package labenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// splitAdmin writes the admin kubeconfig as two files, the way people keep
// them: one with only the context to use, one with the cluster and user.
func splitAdmin(t *testing.T) (contextFile, credsFile string) {
	raw, err := clientcmd.LoadFromFile(testenv.ControlPlane(t).AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctxOnly := clientcmdapi.NewConfig()
	ctxOnly.CurrentContext = raw.CurrentContext
	ctxOnly.Contexts = raw.Contexts
	creds := clientcmdapi.NewConfig()
	creds.Clusters, creds.AuthInfos = raw.Clusters, raw.AuthInfos
	contextFile, credsFile = filepath.Join(dir, "context"), filepath.Join(dir, "creds")
	if err := clientcmd.WriteToFile(*ctxOnly, contextFile); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*creds, credsFile); err != nil {
		t.Fatal(err)
	}
	return contextFile, credsFile
}

// TestKubeconfigList: KUBECONFIG=a:b is merged as kubectl merges it, and a
// missing file in the list is skipped.
func TestKubeconfigList(t *testing.T) {
	contextFile, credsFile := splitAdmin(t)
	missing := filepath.Join(t.TempDir(), "missing")
	list := strings.Join([]string{missing, contextFile, credsFile}, string(os.PathListSeparator))
	t.Setenv("KUBECONFIG", list)

	if got, err := labenv.Kubeconfig(); err != nil || got != list {
		t.Fatalf("Kubeconfig() = %q, %v; want the list", got, err)
	}
	cfg, err := labenv.RESTConfig(context.Background(), "")
	if err != nil {
		t.Fatalf("KUBECONFIG list refused: %v", err)
	}
	if cfg.Host != testenv.ControlPlane(t).URL() {
		t.Errorf("host %s, want %s", cfg.Host, testenv.ControlPlane(t).URL())
	}
	// One file alone has no cluster: the merge is what makes it work.
	if _, err := labenv.RESTConfig(context.Background(), contextFile); err == nil {
		t.Error("the context-only file worked alone; the test proves nothing")
	}

	// Flattened into one file (for the kubelet's --bootstrap-kubeconfig).
	flat := filepath.Join(t.TempDir(), "flat.kubeconfig")
	if err := labenv.WriteFlat("", flat); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(flat); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("flat kubeconfig: %v %v, want mode 0600", info, err)
	}
	if _, err := labenv.RESTConfig(context.Background(), flat); err != nil {
		t.Errorf("the flattened kubeconfig does not work: %v", err)
	}
}

func TestKubeconfigErrorsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, c := range []struct{ path, want string }{
		{a, "bad kubeconfig " + a},
		{a + string(os.PathListSeparator) + b, "none of these files exists"},
	} {
		_, err := labenv.RESTConfig(context.Background(), c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("RESTConfig(%q) = %v, want one line with %q", c.path, err, c.want)
		}
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("LABS_STATE_DIR", dir)
	if _, err := labenv.Kubeconfig(); err == nil || !strings.Contains(err.Error(), "go run ./labs/00-cluster") {
		t.Errorf("no cluster: %v, want the hint to start lab 00", err)
	}
}

func TestCheckNodeName(t *testing.T) {
	for _, ok := range []string{"fake-node-1", "a", "node.example.com"} {
		if err := labenv.CheckNodeName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../x", "a/b", "Bad_Name", ".", ".."} {
		if err := labenv.CheckNodeName(bad); err == nil || !strings.Contains(err.Error(), "not a valid Node name") {
			t.Errorf("%q: %v, want it refused", bad, err)
		}
	}
}
