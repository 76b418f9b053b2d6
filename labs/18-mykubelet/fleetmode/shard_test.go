package fleetmode

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/fleet"
)

// TestShardsAreOneFleet: three processes, each --shard I/3 of one fleet of
// three nodes a shard, against one control plane — as kubemark's hollow
// nodes run as pods of another cluster. Every node is registered once, by
// its own shard; pods bound to nodes of every shard run; a shard killed
// (SIGKILL: no goodbye) and started again takes its nodes and their pods
// back (new containers in its new mock runtimes), while the others' pods
// are left alone.
func TestShardsAreOneFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: three fleet processes")
	}
	const perShard, shards, prefix = 3, 3, "shardt"
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	ctx := context.Background()
	bin := testenv.BuildLab(t, "./labs/18-mykubelet")
	env := []string{"LABS_STATE_DIR=" + t.TempDir()}
	start := func(i int) *testenv.Program {
		p := testenv.StartProgram(t, bin, env, "--kubeconfig="+cp.AdminKubeconfig(), fmt.Sprintf("--nodes=%d", perShard),
			"--node-prefix="+prefix, fmt.Sprintf("--shard=%d/%d", i, shards), "--report-every=0")
		p.WaitFor(t, fmt.Sprintf("ready   %d nodes Ready", perShard), 3*time.Minute)
		return p
	}
	t.Cleanup(func() {
		c := context.Background()
		for i := range shards * perShard {
			_ = admin.CoreV1().Nodes().Delete(c, fleet.NodeName(prefix, i), metav1.DeleteOptions{})
		}
		for i := range shards {
			role := fleet.ShardRole(prefix, i, shards)
			_ = admin.RbacV1().ClusterRoleBindings().Delete(c, role, metav1.DeleteOptions{})
			_ = admin.RbacV1().ClusterRoles().Delete(c, role, metav1.DeleteOptions{})
		}
	})
	procs := make([]*testenv.Program, shards)
	for i := range shards {
		procs[i] = start(i)
		if want := fmt.Sprintf("(%s … %s) in this process, shard %d of %d", fleet.NodeName(prefix, i*perShard), fleet.NodeName(prefix, i*perShard+perShard-1), i, shards); !strings.Contains(procs[i].Output(), want) {
			t.Errorf("shard %d does not say %q:\n%s", i, want, procs[i].Output())
		}
	}

	// Every node once, all Ready; each shard may act as its own nodes only.
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, prefix+"-") {
			names = append(names, n.Name)
			if !nodeReady(&n) {
				t.Errorf("node %s is not Ready", n.Name)
			}
		}
	}
	var want []string
	for i := range shards * perShard {
		want = append(want, fleet.NodeName(prefix, i))
	}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Fatalf("nodes %v, want %v", names, want)
	}
	for i := range shards {
		role, err := admin.RbacV1().ClusterRoles().Get(ctx, fleet.ShardRole(prefix, i, shards), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var users []string
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "users") {
				users = r.ResourceNames
			}
		}
		var own []string
		for k := range perShard {
			own = append(own, "system:node:"+fleet.NodeName(prefix, i*perShard+k))
		}
		if !slices.Equal(users, own) {
			t.Errorf("shard %d's role may impersonate %v, want its own nodes %v", i, users, own)
		}
	}

	// A pod on every node: each runs, on its own shard.
	ns := testenv.Namespace(t, admin, "shards")
	waitServiceAccount(t, admin, ns)
	for _, n := range want {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + n}, Spec: v1.PodSpec{NodeName: n,
			Containers: []v1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}}}}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := waitAllRunning(t, admin, ns, want)

	// Shard 1 dies without a word and comes back.
	procs[1].Cmd.Process.Signal(syscall.SIGKILL)
	if !procs[1].WaitExit(30 * time.Second) {
		t.Fatal("shard 1 did not die on SIGKILL")
	}
	procs[1] = start(1)
	testenv.PollNil(t, "shard 1's pods running again in its new process", 3*time.Minute, func() error {
		after := containerIDs(t, admin, ns)
		for i, n := range want {
			mine := i/perShard == 1
			switch {
			case after[n] == "":
				return fmt.Errorf("pod on %s has no running container", n)
			case mine && after[n] == before[n]:
				return fmt.Errorf("pod on %s still shows the container of the killed process, %s", n, before[n])
			case !mine && after[n] != before[n]:
				t.Fatalf("pod on %s (shard %d) was restarted: %s → %s; only shard 1 died", n, i/perShard, before[n], after[n])
			}
		}
		return nil
	})
	for _, n := range want[perShard : 2*perShard] {
		got, err := admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil || !nodeReady(got) {
			t.Errorf("node %s after shard 1's restart: ready %v, %v", n, err == nil && nodeReady(got), err)
		}
	}
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// waitAllRunning waits until each node's pod runs, and returns the ID of
// each one's container by node.
func waitAllRunning(t *testing.T, c kubernetes.Interface, ns string, nodes []string) map[string]string {
	t.Helper()
	var ids map[string]string
	testenv.PollNil(t, "a running pod on every node", 3*time.Minute, func() error {
		ids = containerIDs(t, c, ns)
		for _, n := range nodes {
			if ids[n] == "" {
				return fmt.Errorf("the pod on %s is not running yet", n)
			}
		}
		return nil
	})
	return ids
}

// containerIDs is the running container of each node's pod ("" if none).
func containerIDs(t *testing.T, c kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		ids[p.Spec.NodeName] = p.Status.ContainerStatuses[0].ContainerID
	}
	return ids
}

// TestShardManifestsAreValid: the README's commands for the shards, with
// the apiserver's server-side dry run (validation, defaulting and
// admission; nothing stored) on a real control plane: the Secret of the
// target's kubeconfig and the StatefulSet.
func TestShardManifestsAreValid(t *testing.T) {
	admin := testenv.AdminClient(t)
	const ns = "kubelet-labs-fleet"
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	kubeconfig := testenv.ControlPlane(t).AdminKubeconfig()
	for _, args := range [][]string{
		{"-n", ns, "create", "secret", "generic", "target-kubeconfig", "--from-file=kubeconfig=" + kubeconfig, "--dry-run=server"},
		{"apply", "--dry-run=server", "-f", repoPath(t, "labs/18-mykubelet/shards/fleet.yaml")},
	} {
		out, errOut, code := testenv.Kubectl(t, "", args...)
		if code != 0 {
			t.Errorf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestFleetImage: scripts/build-fleet-image.sh makes, offline, an image
// that containerd's importer reads (the name in index.json's annotation)
// whose one layer holds a static /mykubelet (no ELF interpreter: it needs
// no libc in the image) that runs.
func TestFleetImage(t *testing.T) {
	// Without cgo every package that has cgo files is built again, in a
	// cache of its own: minutes on 2 cores, measured 1-2 min warm and far
	// more cold, too much for each CI run. make fleet-image runs it.
	if os.Getenv("LABS_FLEET_IMAGE_TEST") != "1" {
		t.Skip("builds lab 18 without cgo (minutes when cold): run it with make fleet-image (LABS_FLEET_IMAGE_TEST=1)")
	}
	out := filepath.Join(t.TempDir(), "mykubelet.tar")
	cmd := exec.Command("bash", repoPath(t, "scripts/build-fleet-image.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "localhost/kubelet-labs/mykubelet:dev") {
		t.Fatalf("build-fleet-image.sh: %v\n%s", err, b)
	}
	files := untar(t, out)
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != "localhost/kubelet-labs/mykubelet:dev" {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	var manifest struct{ Layers []struct{ Digest string } }
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	layer := filepath.Join(t.TempDir(), "layer.tar")
	if err := os.WriteFile(layer, files["blobs/sha256/"+strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:")], 0o600); err != nil {
		t.Fatal(err)
	}
	rootfs := untar(t, layer)
	bin := filepath.Join(t.TempDir(), "mykubelet")
	if err := os.WriteFile(bin, rootfs["mykubelet"], 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/mykubelet is dynamically linked: it would not start in an image without libc")
		}
	}
	f.Close()
	if !strings.Contains(string(rootfs["etc/passwd"]), ":65532:") {
		t.Errorf("no user 65532 in /etc/passwd: %q", rootfs["etc/passwd"])
	}
	// It runs, and reads the StatefulSet's --shard as it expands it.
	b, _ := exec.Command(bin, "--nodes=1", "--shard=3/3").CombinedOutput()
	if !strings.Contains(string(b), `--shard "3/3"`) {
		t.Errorf("/mykubelet --nodes=1 --shard=3/3: %s", b)
	}
}

// untar reads a tar file into memory: name → bytes (regular files only).
func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, _ := testenv.Binaries(t)
	return filepath.Join(root, rel)
}
