package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

// TestExecLatencyVersusTheRealKubelet measures `kubectl exec POD -- echo
// hi` into a pod on our node (lab 14) and into a pod on lab 01's node (the
// real kubelet, v1.36.3), both on the mock CRI, both built programs, one
// control plane, in alternation; and the same exec through client-go's
// WebSocket executor (kubectl's first choice) without kubectl's own start.
// It logs the numbers and asserts only that every exec printed hi: a
// ratio on a shared 2-core machine is a measurement, not a pass condition.
func TestExecLatencyVersusTheRealKubelet(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement that builds lab 01 (the real kubelet); run without -short")
	}
	const rounds = 30
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	env := func() []string {
		return []string{state.EnvVar + "=" + t.TempDir(), "KUBECONFIG=" + cp.AdminKubeconfig()}
	}

	type target struct{ label, node, pod string }
	targets := []target{{"real kubelet (lab 01)", "t14-real-kubelet", "shell-real"}, {"our node (lab 14)", "t14-our-node", "shell-ours"}}
	real := testenv.StartProgram(t, testenv.BuildLab(t, "./labs/01-fake-node"), env(), "--node-name="+targets[0].node)
	real.WaitFor(t, "Node "+targets[0].node+" is Ready", 3*time.Minute)
	ours := testenv.StartProgram(t, testenv.BuildLab(t, "./labs/14-exec"), env(), "--node-name="+targets[1].node, "--port=0", "--quiet-kubelet")
	ours.WaitFor(t, "serving   https://", 3*time.Minute)
	for _, tg := range targets {
		waitReady(t, admin, shellPod(t, admin, tg.node, tg.pod))
		n, err := admin.CoreV1().Nodes().Get(context.Background(), tg.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Both declare ExtendWebSocketsToKubelet: the apiserver passes
		// kubectl's WebSocket through to each, a like-for-like path.
		t.Logf("%-22s declaredFeatures %v, kubelet endpoint %s:%d", tg.label, n.Status.DeclaredFeatures, internalIP(n), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}

	kubectlTimes := make([][]time.Duration, len(targets))
	clientTimes := make([][]time.Duration, len(targets))
	for i := range rounds + 3 { // the first 3 rounds warm caches up and are not kept
		for j := range targets {
			tg := targets[(i+j)%len(targets)] // alternate who goes first
			k := (i + j) % len(targets)
			start := time.Now()
			out, errOut, code := testenv.Kubectl(t, "", "exec", tg.pod, "--", "echo", "hi")
			d := time.Since(start)
			if out != "hi\n" || code != 0 {
				t.Fatalf("kubectl exec %s -- echo hi (%s): %q exit %d %q", tg.pod, tg.label, out, code, errOut)
			}
			c := execOnce(t, "default", tg.pod)
			if i >= 3 {
				kubectlTimes[k] = append(kubectlTimes[k], d)
				clientTimes[k] = append(clientTimes[k], c)
			}
		}
	}
	for k, tg := range targets {
		t.Logf("%-22s kubectl exec: median %s p90 %s | client-go exec: median %s p90 %s  (%d rounds)", tg.label,
			median(kubectlTimes[k]), p90(kubectlTimes[k]), median(clientTimes[k]), p90(clientTimes[k]), rounds)
	}
	if raceBuilt {
		t.Logf("both labs were built with -race (as this test runs): run without -race for the numbers of the labs themselves")
	}
	t.Logf("ratio ours/real (medians): kubectl exec %s, client-go exec %s",
		ratio(median(kubectlTimes[1]), median(kubectlTimes[0])), ratio(median(clientTimes[1]), median(clientTimes[0])))
}

// execOnce runs one exec through the apiserver with client-go's WebSocket
// executor and returns how long it took.
func execOnce(t *testing.T, ns, pod string) time.Duration {
	t.Helper()
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	req := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: "shell", Command: []string{"echo", "hi"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	start := time.Now()
	ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil || out.String() != "hi\n" {
		t.Fatalf("exec into %s/%s: %q %q %v", ns, pod, out.String(), errb.String(), err)
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond / 10)
}

func p90(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*9/10].Round(time.Millisecond / 10)
}

func ratio(a, b time.Duration) string { return fmt.Sprintf("%.2f", float64(a)/float64(b)) }

func internalIP(n *v1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
