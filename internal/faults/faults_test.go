package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mylib/fakecri"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// run is one invocation as a learner types it: what it printed, and its
// exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := execute(args, &out, &out)
	t.Logf("$ go run ./internal/faults %s   → exit %d\n%s", strings.Join(args, " "), code, out.String())
	return out.String(), code
}

// Bad input gets one line and exit 2, before anything is contacted.
func TestBadInput(t *testing.T) {
	out, code := run(t)
	if code != 0 || !strings.Contains(out, "short-grace        lab 15-stop-escalation") {
		t.Errorf("the list: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frob", "x"}, `unknown command "frob"`},
		{[]string{"break"}, "break needs a scenario's name (one of: lease-stopped, csr-pending"},
		{[]string{"check", "nope"}, `no scenario "nope"`},
		{[]string{"break", "crash-loop", "extra"}, `unexpected argument "extra"`},
		{[]string{"break", "crash-loop", "--node", "Bad_Name"}, "--node"},
	} {
		if out, code := run(t, tc.args...); code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q in:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// node is our kubelet (lab 18's, on the mock runtime) running in the
// test's process: the learner's running node. Its mock refuses every pull,
// as containerd on these machines does: there is no registry to reach.
func startNode(t *testing.T, kubeconfig, name string) {
	t.Helper()
	o := labnode.Defaults("faults", name)
	o.Kubeconfig, o.Timeout = kubeconfig, time.Minute
	o.Runtime = labruntime.Flags{Kind: labruntime.Mock}
	o.PodFiles = true
	o.Kubelet.BackOffInitial, o.Kubelet.BackOffMax = time.Second, 10*time.Second
	o.Mock = []fakecri.Option{fakecri.WithPullHook(func(_ context.Context, ref string) error {
		return status.Errorf(codes.Unavailable, "failed to resolve reference %q: no registry reachable from this machine", ref)
	})}
	testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*labnode.Node)) error {
		n, err := labnode.Start(ctx, o, labenv.NewPrinter(out))
		if err != nil {
			return err
		}
		defer n.Close()
		onReady(n)
		return n.Run(ctx)
	})
}

// Every scenario, as a learner meets it: break, check says not yet, the
// fix a learner would make with kubectl, check says fixed, and undo
// leaves nothing of the break behind.
func TestScenarios(t *testing.T) {
	testenv.NoLeaks(t)
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	// A short state folder: the mock's socket lives in it (108 bytes).
	dir, err := os.MkdirTemp("", "faults-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(state.EnvVar, dir)
	const node = "faults-test-node"
	startNode(t, cp.AdminKubeconfig(), node)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	ns := testenv.Namespace(t, admin, "faults")
	flags := []string{"--kubeconfig", cp.AdminKubeconfig(), "--node", node, "--namespace", ns}
	file := func(name string) string { return filepath.Join(dir, "faults", name+".yaml") }
	kubectl := func(t *testing.T, stdin string, args ...string) {
		t.Helper()
		out, errOut, code := testenv.Kubectl(t, stdin, args...)
		if code != 0 {
			t.Fatalf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	// reapply is the learner's edit of the manifest the break wrote:
	// delete the pod, change the file, apply it again.
	reapply := func(t *testing.T, name, pod, old, new string) {
		t.Helper()
		b, err := os.ReadFile(file(name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q:\n%s", file(name), old, b)
		}
		kubectl(t, "", "delete", "pod", "-n", ns, pod, "--ignore-not-found")
		kubectl(t, strings.Replace(string(b), old, new, 1), "apply", "-f", "-")
	}

	for _, tc := range []struct {
		name string
		fix  func(t *testing.T)
		left func() (int, error) // what of the break is still there after undo
	}{
		{"lease-stopped", func(t *testing.T) {
			kubectl(t, "", "delete", "validatingadmissionpolicybinding", leasePolicy)
		}, func() (int, error) {
			l, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(context.Background(), metav1.ListOptions{LabelSelector: faultLabel})
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
		{"csr-pending", func(t *testing.T) {
			// Approving alone is not the fix: the next node would wait too.
			out, _, _ := testenv.Kubectl(t, "", "get", "csr", "-o", "name", "-l", faultLabel+"=csr-pending")
			kubectl(t, "", append([]string{"certificate", "approve"}, strings.Fields(out)...)...)
			if out, code := run(t, append([]string{"check", "csr-pending"}, flags...)...); code != 1 || !strings.Contains(out, "would not be approved") {
				t.Errorf("check after approving only: exit %d, want 1 and the approver's answer:\n%s", code, out)
			}
			kubectl(t, "", "create", "clusterrolebinding", "kubelet-labs:node-autoapprove-bootstrap",
				"--clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient", "--group=system:bootstrappers:kubelet-labs:auto-approve")
		}, func() (int, error) {
			l, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{LabelSelector: faultLabel})
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
		{"image-pull", func(t *testing.T) {
			reapply(t, "image-pull", imagePod, missingImage, image)
		}, podsLeft(admin, ns)},
		{"short-grace", func(t *testing.T) {
			reapply(t, "short-grace", gracePod, "terminationGracePeriodSeconds: 2", "terminationGracePeriodSeconds: 15")
		}, podsLeft(admin, ns)},
		{"stuck-terminating", func(t *testing.T) {
			kubectl(t, "", "patch", "pod", "-n", ns, stuckPod, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}, podsLeft(admin, ns)},
		{"crash-loop", func(t *testing.T) {
			reapply(t, "crash-loop", crashPod, "exit 1", "while true; do sleep 1; done")
		}, podsLeft(admin, ns)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, code := run(t, append([]string{"check", tc.name}, flags...)...); code != 1 || !strings.Contains(out, "is not broken here") {
				t.Errorf("check before break: exit %d, want 1 and 'is not broken here'", code)
			}
			if out, code := run(t, append([]string{"break", tc.name}, flags...)...); code != 0 || !strings.Contains(out, "Where to start looking") {
				t.Fatalf("break: exit %d, want 0 and where to look:\n%s", code, out)
			}
			t.Cleanup(func() { run(t, append([]string{"undo", tc.name}, flags...)...) })
			if _, code := run(t, append([]string{"break", tc.name}, flags...)...); code != 1 {
				t.Errorf("a second break: exit %d, want 1 (already broken)", code)
			}
			if out, code := run(t, append([]string{"check", tc.name}, flags...)...); code != 1 || !strings.Contains(out, "not fixed yet") {
				t.Errorf("check after break: exit %d, want 1 and 'not fixed yet'", code)
			}
			tc.fix(t)
			testenv.PollTrue(t, "check to say fixed", 2*time.Minute, func() bool {
				_, code := run(t, append([]string{"check", tc.name}, flags...)...)
				return code == 0
			})
			if out, code := run(t, append([]string{"undo", tc.name}, flags...)...); code != 0 || !strings.Contains(out, "put back") {
				t.Fatalf("undo: exit %d\n%s", code, out)
			}
			if n, err := tc.left(); err != nil || n != 0 {
				t.Errorf("after undo: %d object(s) of the break left (%v)", n, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "faults", tc.name+".json")); !os.IsNotExist(err) {
				t.Errorf("after undo the record is still there: %v", err)
			}
			if _, err := os.Stat(file(tc.name)); !os.IsNotExist(err) {
				t.Errorf("after undo the manifest %s is still there: %v", file(tc.name), err)
			}
		})
	}
}

// podsLeft counts the pods left in ns: every scenario pod is there.
func podsLeft(admin kubernetes.Interface, ns string) func() (int, error) {
	return func() (int, error) {
		l, err := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}
}
